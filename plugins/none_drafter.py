"""The ``none`` drafter: proposes nothing, so every step verifies the root alone (plain decoding)."""

from specmix import Drafter, Proposal, TokenTree, hookimpl


class NoDrafter(Drafter):
    produces = frozenset({"tree"})

    def propose(self, ctx):
        return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size))


@hookimpl
def register_drafters(register):
    register("none", NoDrafter)
