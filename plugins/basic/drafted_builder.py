"""The ``drafted`` builder: uses the candidate tree the drafter proposed, as it is."""

from typing import cast

from specmix import Capability, Proposal, StepContext, TokenTree, TreeBuilder


class DraftedTreeBuilder(TreeBuilder):
    consumes = frozenset({Capability.TREE})

    def build(self, proposal: Proposal, ctx: StepContext) -> TokenTree:
        return cast(TokenTree, proposal.tree)  # consumed, so always there
