"""What the engine checks after every call into a component, so that a faulty plugin is named
where it goes wrong instead of corrupting a later step.

Each check returns the value it was given (a tree cut to the room left) or raises a
:class:`~specmix.errors.PluginError` that names the component and what it declared.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmix.capabilities import Capability
from specmix.composition import Slot
from specmix.target import Target
from specmix.tree import TokenTree
from specmix.values import Proposal, StepContext, Verdict

_PROPOSAL_FIELDS = {
    Capability.TREE: "tree",
    Capability.MARGINALS: "marginals",
    Capability.RIDERS: "riders",
    Capability.FEATURES: "features",
}


def checked_proposal(slot: Slot, proposal: object, ctx: StepContext) -> Proposal:
    """A drafter's proposal: a :class:`Proposal` holding every part the drafter declares, fit for this step."""
    if not isinstance(proposal, Proposal):
        raise slot.error(f"returned {type(proposal).__name__} from propose(), not a Proposal")
    for capability in slot.component.produces:
        field = _PROPOSAL_FIELDS.get(capability)
        if field is not None and getattr(proposal, field) is None:
            raise slot.error(f"declares it produces '{capability}' but its proposal has no {field}")
    if proposal.tree is not None:
        _check_tree_fits(slot, proposal.tree, ctx, "proposed")
    if proposal.marginals is not None and proposal.marginals.vocab_size != ctx.vocab_size:
        raise slot.error(f"proposed marginals over {proposal.marginals.vocab_size} tokens; the target has {ctx.vocab_size}")
    return proposal


def checked_tree(slot: Slot, tree: object, ctx: StepContext) -> TokenTree:
    """The tree a builder or selector returned, checked against the step and cut to the room left."""
    if not isinstance(tree, TokenTree):
        raise slot.error(f"returned {type(tree).__name__}, not a TokenTree")
    _check_tree_fits(slot, tree, ctx, "returned")
    if Capability.LOGPROBS in slot.component.produces and tree.logprobs is None:
        raise slot.error("declares it produces 'logprobs' but returned a tree without them")
    return tree.truncated(ctx.max_depth)


def _check_tree_fits(slot: Slot, tree: TokenTree, ctx: StepContext, verb: str) -> None:
    if tree.root != ctx.root:
        raise slot.error(f"{verb} a tree rooted at token {tree.root}, but the last committed token is {ctx.root}")
    if tree.vocab_size != ctx.vocab_size:
        raise slot.error(f"{verb} a tree over {tree.vocab_size} tokens; the target has {ctx.vocab_size}")


def checked_verdict(slot: Slot, verdict: object, tree: TokenTree, proposal: Proposal, layers: Sequence[int]) -> Verdict:
    """A verifier's verdict on ``tree``, with the hidden states and rider logits it declares."""
    if not isinstance(verdict, Verdict):
        raise slot.error(f"returned {type(verdict).__name__} from verify(), not a Verdict")
    if verdict.tree is not tree:
        raise slot.error("returned a verdict on another tree than the one it was given")
    produces = slot.component.produces
    if Capability.HIDDEN_STATES in produces:
        rows = 1 + len(verdict.path)
        for layer in layers:
            states = verdict.hidden.get(layer)
            if states is None or states.shape[0] != rows:
                shape = None if states is None else tuple(states.shape)
                raise slot.error(f"declares 'hidden-states' but gave layer {layer} as {shape}; "
                                 f"expected {rows} rows (the root and the accepted nodes)")
    if Capability.RIDER_LOGITS in produces and proposal.riders is not None:
        logits = verdict.rider_logits
        if logits is None or logits.shape[0] != proposal.riders.count:
            shape = None if logits is None else tuple(logits.shape)
            raise slot.error(f"declares 'rider-logits' but gave {shape} for {proposal.riders.count} riders")
    return verdict


def check_cache(slot: Slot, target: Target, tokens: Sequence[int], new: int) -> None:
    """The cache holds every token of ``tokens`` but the last, at their positions (the last ``new`` written this step)."""
    held = tokens[:-1]
    if not target.holds(held, new):
        raise slot.error(f"left the cache holding {target.length} tokens where the {len(held)} committed before the "
                         "last belong, or not at their positions: verifiers write the cache through "
                         "Target.forward_tree and keep the accepted path with Target.commit")
