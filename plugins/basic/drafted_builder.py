"""The ``drafted`` builder: uses the candidate tree the drafter proposed, as it is."""

from specmix import Capability, TreeBuilder


class DraftedTreeBuilder(TreeBuilder):
    consumes = frozenset({Capability.TREE})

    def build(self, proposal, ctx):
        return proposal.tree
