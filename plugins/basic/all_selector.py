"""The ``all`` selector: verifies the whole candidate tree."""

from specmix import Proposal, Selector, StepContext, TokenTree


class AllSelector(Selector):
    def select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        return tree
