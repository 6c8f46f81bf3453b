"""The ``tree`` verifier: one target forward over root, candidates and riders with tree attention."""

import torch

from specmix import Capability, Verdict, Verifier
from specmix.acceptance import greedy_walk, rejection_walk, sample_walk
from specmix.sampling import target_probs, warpers


class TreeVerifier(Verifier):
    """Greedy walk, sample-and-match, or recursive rejection when the tree carries ``draft_q``."""

    consumes = frozenset({Capability.TREE})
    produces = frozenset({Capability.HIDDEN_STATES, Capability.RIDER_LOGITS})
    uses = frozenset({Capability.RIDERS})

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        out = target.forward_tree(tree, proposal.riders, hidden_layers)
        path, bonus = self.accept(tree, out.logits, ctx)
        target.commit(path)
        return Verdict(tree=tree, path=tuple(path), bonus=bonus, logits=out.logits, rider_logits=out.rider_logits,
                       hidden=out.hidden_along(path))

    def accept(self, tree, logits, ctx):
        """The accepted path and bonus token, given the target's logits at every tree node."""
        if ctx.settings.greedy:
            return greedy_walk(tree, logits.argmax(dim=-1).tolist())
        processors = warpers(ctx.settings)

        def probs_at(node):
            path_ids = torch.cat([ctx.tokens, tree.tokens[tree.path(node)]])
            return target_probs(logits[node], path_ids, processors)

        walk = sample_walk if tree.draft_q is None else rejection_walk
        return walk(tree, probs_at, ctx.generator)
