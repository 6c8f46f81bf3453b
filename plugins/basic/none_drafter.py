"""The ``none`` drafter: proposes nothing, so every step verifies the root alone (plain decoding)."""

from specmix import Capability, Drafter, Proposal, StepContext, TokenTree


class NoDrafter(Drafter):
    produces = frozenset({Capability.TREE})

    def propose(self, ctx: StepContext) -> Proposal:
        return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size))
