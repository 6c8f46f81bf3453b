"""The ``chain`` builder: the top-1 token at each drafted position, one straight path."""

from specmix import Capability, TokenTree, TreeBuilder


class ChainBuilder(TreeBuilder):
    consumes = frozenset({Capability.MARGINALS})
    produces = frozenset({Capability.TREE, Capability.LOGPROBS})

    def build(self, proposal, ctx):
        marginals = proposal.marginals
        depth = min(marginals.depth, max(ctx.max_depth, 0))
        tokens = [ctx.root, *marginals.ids[:depth, 0].tolist()]
        logprobs = [0.0, *marginals.logprobs[:depth, 0].tolist()]
        return TokenTree(tokens=tokens, parents=range(-1, depth), vocab_size=ctx.vocab_size, logprobs=logprobs)
