"""The ``tree`` verifier: one target forward over root, candidates and riders with tree attention."""

import torch

from specmix import Capability, Verdict, Verifier
from specmix.acceptance import greedy_walk, rejection_walk, sample_walk
from specmix.node_logits import NodeLogits
from specmix.sampling import target_probs, warpers

AHEAD = 3
"""When the walk needs a node's logits, the head also runs on this many nodes below it, where the walk is likeliest
to go next: one call of the head over a few rows costs little more than over one."""


def likely_next(tree, node: int, count: int = AHEAD) -> list[int]:
    """The ``count`` nodes below ``node`` along its most probable children (the first child without draft scores)."""
    chain, scores = [], None if tree.logprobs is None else tree.logprobs.tolist()
    while len(chain) < count and tree.children[node]:
        children = tree.children[node]
        node = children[0] if scores is None else max(children, key=scores.__getitem__)
        chain.append(node)
    return chain


class _Argmaxes:
    """The target's argmax at each node, as a sequence the greedy walk indexes, computed as the walk goes."""

    def __init__(self, tree, logits: NodeLogits):
        self.tree, self.logits = tree, logits

    def __getitem__(self, node: int) -> int:
        return int(self.logits.row(node, likely_next(self.tree, node)).argmax())


class TreeVerifier(Verifier):
    """Greedy walk, sample-and-match, or recursive rejection when the tree carries ``draft_q``."""

    consumes = frozenset({Capability.TREE})
    produces = frozenset({Capability.HIDDEN_STATES, Capability.RIDER_LOGITS})
    uses = frozenset({Capability.RIDERS})

    def verify(self, target, tree, proposal, ctx, hidden_layers):
        out = target.forward_tree(tree, proposal.riders, hidden_layers)
        path, bonus = self.accept(tree, out.node_logits, ctx)
        target.commit(path)
        return Verdict(tree=tree, path=tuple(path), bonus=bonus, logits=out.node_logits, rider_logits=out.rider_logits,
                       hidden=out.hidden_along(path))

    def accept(self, tree, logits, ctx):
        """The accepted path and bonus token, given the target's logits at the tree's nodes (a tensor or
        :class:`NodeLogits`, of which only the rows the walk reaches are read)."""
        logits = NodeLogits.of(logits)
        if ctx.settings.greedy:
            return greedy_walk(tree, _Argmaxes(tree, logits))
        processors = warpers(ctx.settings)

        def probs_at(node):
            path_ids = torch.cat([ctx.tokens, tree.tokens[tree.path(node)]])
            return target_probs(logits.row(node, likely_next(tree, node)), path_ids, processors)

        walk = sample_walk if tree.draft_q is None else rejection_walk
        return walk(tree, probs_at, ctx.generator)
