"""The ``all`` selector: verifies the whole candidate tree."""

from specmix import Selector


class AllSelector(Selector):
    def select(self, tree, proposal, ctx):
        return tree
