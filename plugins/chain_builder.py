"""The ``chain`` builder: the top-1 token at each drafted position, one straight path."""

from specmix import TokenTree, TreeBuilder, hookimpl


class ChainBuilder(TreeBuilder):
    consumes = frozenset({"marginals"})
    produces = frozenset({"tree", "logprobs"})

    def build(self, proposal, ctx):
        marginals = proposal.marginals
        depth = 0 if marginals is None else min(marginals.depth, max(ctx.max_depth, 0))
        if depth == 0:
            return TokenTree.root_only(ctx.root, ctx.vocab_size)
        tokens = [ctx.root, *marginals.ids[:depth, 0].tolist()]
        logprobs = [0.0, *marginals.logprobs[:depth, 0].tolist()]
        return TokenTree(tokens=tokens, parents=range(-1, depth), vocab_size=ctx.vocab_size, logprobs=logprobs)


@hookimpl
def register_tree_builders(register):
    register("chain", ChainBuilder)
