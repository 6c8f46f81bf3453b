"""The four component interfaces. A plugin subclasses one and registers it through a hook.

Every component declares the capabilities it ``consumes`` and ``produces``; the
registry refuses a composition in which a component consumes something no component
before it in the step produces (for a drafter: the verifier of the previous step).
Capabilities in use by the built-ins:

``tree``           a candidate tree in the proposal
``marginals``      per-position top-K distributions in the proposal
``riders``         in-pass drafting tokens in the proposal
``features``       the drafter's own hidden states in the proposal
``logprobs``       per-node draft log-probabilities on the candidate tree
``cost-curve``     the measured forward-time curve T(N) (the engine supplies it)
``hidden-states``  the target's hidden states at accepted positions, in the verdict
``rider-logits``   the target's logits at the riders, in the verdict
"""

from __future__ import annotations

from typing import ClassVar

import torch

from specmix.target import Target
from specmix.tree import TokenTree
from specmix.values import HiddenStates, Proposal, StepContext, Verdict

ENGINE_PROVIDES = frozenset({"cost-curve"})


class Component:
    """Shared by all four kinds. Options arrive as keyword arguments to the constructor.

    ``test_options`` are the options the conformance kit builds the component with on
    tiny random targets (a drafter that needs trained weights can ask for random ones).
    """

    consumes: ClassVar[frozenset[str]] = frozenset()
    produces: ClassVar[frozenset[str]] = frozenset()
    test_options: ClassVar[dict] = {}

    def attach(self, target: Target) -> None:
        """Called once when a decoder is built for ``target`` (for a drafter, before ``hidden_layers`` is read).

        A component that shares the target's weights (embeddings, LM head), sizes itself
        from the target, or loads weights trained for it does so here, and refuses a
        target it was not made for (compare :attr:`Target.fingerprint`).
        """


class Drafter(Component):
    """Proposes what comes next.

    Contract: ``start`` is called once per generation after the prompt (all but its last
    token) is in the cache; ``propose`` then runs once per step and ``observe`` receives
    that step's verdict. A drafter must never assume its proposal was accepted, must not
    draw from ``ctx.generator``, and must keep no state that outlives ``start``.

    In-pass drafters put tokens in ``Proposal.riders`` and read ``Verdict.rider_logits``;
    feature-conditioned drafters list target layers in ``hidden_layers`` and read
    ``Verdict.hidden`` (and the prompt's states in ``start``).
    """

    hidden_layers: tuple[int, ...] = ()

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        """Begin a generation. ``prompt`` is every prompt id; ``hidden`` covers all but the last."""

    def propose(self, ctx: StepContext) -> Proposal:
        raise NotImplementedError

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        """Learn from the step's verdict. ``ctx`` is the context the step was proposed in."""


class TreeBuilder(Component):
    """Turns a proposal into a candidate tree rooted at ``ctx.root``.

    Contract: pure in its inputs; the result's root token is ``ctx.root``.
    """

    produces = frozenset({"tree"})

    def build(self, proposal: Proposal, ctx: StepContext) -> TokenTree:
        raise NotImplementedError


class Selector(Component):
    """Picks the part of a candidate tree worth verifying.

    Contract: returns ``tree.subtree(keep)`` for a prefix-closed ``keep`` holding the root;
    which nodes to keep may depend on anything but the target's outputs for this step.
    """

    produces = frozenset({"tree"})

    def select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        raise NotImplementedError


class Verifier(Component):
    """Runs the target once over root, tree and riders, accepts a path losslessly, and compacts the cache.

    Contract: under greedy settings the path follows the target's argmax and the bonus is
    the argmax after it; under sampling every committed token is distributed exactly as
    the target's processed distribution given the tokens before it. On return the cache
    holds the committed prefix, the root and the accepted nodes, nothing else.
    """

    consumes = frozenset({"tree"})

    def verify(
        self,
        target: Target,
        tree: TokenTree,
        proposal: Proposal,
        ctx: StepContext,
        hidden_layers: tuple[int, ...],
    ) -> Verdict:
        raise NotImplementedError
