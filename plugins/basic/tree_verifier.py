"""The ``tree`` verifier: one target forward over root, candidates and riders with tree attention."""

import itertools
import math
import operator
from collections.abc import Sequence
from typing import cast

import torch

from specmix import Capability, Proposal, StepContext, Target, TokenTree, Verdict, Verifier
from specmix.acceptance import greedy_walk, rejection_walk, sample_walk
from specmix.kernels.node_logits import NodeLogits
from specmix.sampling import target_probs, warpers


class _Rows:
    """The target's logits at the nodes a walk reaches. One call of the head over a few rows costs about what one
    row does (:attr:`NodeLogits.width`), so a row computed now brings that many more nodes along the node's most
    probable children (its first children, without draft scores), where the walk is likeliest to go next; with
    draft scores, the chance that the walk reads each of them decides whether a greedy walk computes them together
    or screens one argmax at a time."""

    def __init__(self, tree: TokenTree, logits: NodeLogits) -> None:
        self.tree, self.logits = tree, logits
        self.scores: list[float] | None = None if tree.logprobs is None else tree.logprobs.tolist()

    def likely_next(self, node: int, length: int) -> list[int]:
        """Up to ``length`` nodes down from ``node``, each its parent's most probable child."""
        chain: list[int] = []
        children = self.tree.children
        while len(chain) < length and children[node]:
            node = children[node][0] if self.scores is None else max(children[node], key=self.scores.__getitem__)
            chain.append(node)
        return chain

    def chances(self, chain: list[int]) -> list[float]:
        """The chance, by the draft scores, that the walk reads each node of ``chain`` once it reads the one above."""
        scores = cast("list[float]", self.scores)  # read only where the tree has draft scores
        return list(itertools.accumulate((math.exp(scores[node]) for node in chain), operator.mul))

    def __call__(self, node: int) -> torch.Tensor:
        if self.logits.has(node):
            return self.logits[node]
        return self.logits.row(node, self.likely_next(node, self.logits.width - 1))

    def __getitem__(self, node: int) -> int:
        """The argmax at ``node``, as the greedy walk indexes it (without its row where the target screens it)."""
        chain = self.likely_next(node, self.logits.width - 1)
        return self.logits.argmax(node, chain, () if self.scores is None else self.chances(chain))


class TreeVerifier(Verifier):
    """Greedy walk, sample-and-match, or recursive rejection when the tree carries ``draft_q``."""

    consumes = frozenset({Capability.TREE})
    produces = frozenset({Capability.HIDDEN_STATES, Capability.RIDER_LOGITS})
    uses = frozenset({Capability.RIDERS})

    def verify(self, target: Target, tree: TokenTree, proposal: Proposal, ctx: StepContext,
               hidden_layers: Sequence[int]) -> Verdict:
        # Padded to a larger forward where the step's cost curve prices that lower.
        pad_to = None if ctx.cost is None else ctx.cost.padded_size
        out = target.forward_tree(tree, proposal.riders, hidden_layers, pad_to=pad_to)
        path, bonus = self.accept(tree, out.node_logits, ctx)
        target.commit(path)
        return Verdict(tree=tree, path=tuple(path), bonus=bonus, logits=out.node_logits, rider_logits=out.rider_logits,
                       hidden=out.hidden_along(path))

    def accept(self, tree: TokenTree, logits: torch.Tensor | NodeLogits, ctx: StepContext) -> tuple[list[int], int]:
        """The accepted path and bonus token, given the target's logits at the tree's nodes (a tensor or
        :class:`NodeLogits`, of which only the rows the walk reaches are read)."""
        rows = _Rows(tree, NodeLogits.of(logits))
        if ctx.settings.greedy:
            return greedy_walk(tree, rows)
        processors = warpers(ctx.settings)

        def probs_at(node: int) -> torch.Tensor:
            path_ids = torch.cat([ctx.tokens, tree.tokens[tree.path(node)]])
            return target_probs(rows(node), path_ids, processors)

        walk = sample_walk if tree.draft_q is None else rejection_walk
        return walk(tree, probs_at, ctx.generator)
