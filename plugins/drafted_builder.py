"""The ``drafted`` builder: uses the candidate tree the drafter proposed, as it is."""

from specmix import TokenTree, TreeBuilder, hookimpl


class DraftedTreeBuilder(TreeBuilder):
    consumes = frozenset({"tree"})

    def build(self, proposal, ctx):
        if proposal.tree is None:
            return TokenTree.root_only(ctx.root, ctx.vocab_size)
        return proposal.tree


@hookimpl
def register_tree_builders(register):
    register("drafted", DraftedTreeBuilder)
