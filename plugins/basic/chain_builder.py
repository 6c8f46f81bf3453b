"""The ``chain`` builder: one straight path, the best token at each drafted position given the one before."""

from typing import cast

from specmix import Capability, Marginals, Proposal, StepContext, TokenTree, TreeBuilder


class ChainBuilder(TreeBuilder):
    """Position by position, the candidate with the best score: its draft log-probability plus, when the
    marginals carry transitions (DFlash 2's candidate selector), its transition score after the
    previous pick. Without transitions that is the top-1 token of each position."""

    consumes = frozenset({Capability.MARGINALS})
    produces = frozenset({Capability.TREE, Capability.LOGPROBS})
    uses = frozenset({Capability.TRANSITIONS})

    def build(self, proposal: Proposal, ctx: StepContext) -> TokenTree:
        marginals = cast(Marginals, proposal.marginals)  # consumed, so always there
        depth = min(marginals.depth, max(ctx.max_depth, 0))
        tokens, logprobs, previous = [ctx.root], [0.0], 0
        for position in range(depth):
            scores = marginals.logprobs[position]
            if marginals.transitions is not None:
                scores = scores + marginals.transitions[position, previous].to(scores.dtype)
            previous = int(scores.argmax())
            tokens.append(int(marginals.ids[position, previous]))
            logprobs.append(float(marginals.logprobs[position, previous]))
        return TokenTree(tokens=tokens, parents=range(-1, depth), vocab_size=ctx.vocab_size, logprobs=logprobs)
