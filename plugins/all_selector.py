"""The ``all`` selector: verifies the whole candidate tree."""

from specmix import Selector, hookimpl


class AllSelector(Selector):
    def select(self, tree, proposal, ctx):
        return tree


@hookimpl
def register_selectors(register):
    register("all", AllSelector)
