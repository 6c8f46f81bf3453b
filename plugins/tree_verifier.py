"""The ``tree`` verifier: one target forward over root, candidates and riders with tree attention."""

import torch

from specmix import Verdict, Verifier, hookimpl
from specmix.acceptance import greedy_walk, rejection_walk, sample_walk
from specmix.sampling import target_probs, warpers


class TreeVerifier(Verifier):
    """Greedy walk, sample-and-match, or recursive rejection when the tree carries ``draft_q``."""

    consumes = frozenset({"tree"})
    produces = frozenset({"hidden-states", "rider-logits"})

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        riders = proposal.riders
        size, rider_count = tree.size, 0 if riders is None else riders.count
        root_position = len(ctx.tokens) - 1
        visible = torch.zeros(size + rider_count, size + rider_count, dtype=torch.bool)
        visible[:size, :size] = tree.ancestor_mask()
        ids, positions = tree.tokens, root_position + torch.tensor(tree.depth_list)
        if rider_count:
            visible[size:, 0] = riders.visible[:, 0]
            visible[size:, size:] = riders.visible[:, 1:]
            ids = torch.cat([ids, riders.tokens])
            positions = torch.cat([positions, root_position + riders.offsets])
        logits, hidden = target.forward(ids, positions, visible, hidden_layers)
        tree_logits = logits[:size]
        path, bonus = self.accept(tree, tree_logits, ctx)
        keep = torch.tensor([0, *path])
        target.compact(keep)
        return Verdict(
            tree=tree,
            path=tuple(path),
            bonus=bonus,
            logits=tree_logits,
            rider_logits=logits[size:] if rider_count else None,
            hidden={layer: states.index_select(0, keep.to(states.device)) for layer, states in hidden.items()},
        )

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


@hookimpl
def register_verifiers(register):
    register("tree", TreeVerifier)
