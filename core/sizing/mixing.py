"""Several drafters in one step: their trees merged into one, their riders side by side, each verdict shared.

With one drafter the step is the drafter's own (:class:`Solo` hands everything through).
With several, :class:`Mix` unites their candidate trees as a trie: a node any of them
proposed is in it once, scored by the mean of the calibrated estimates of those that
proposed it (:mod:`specmix.sizing.calibration`), and remembered as theirs. A claim is calibrated
apart for how it stands among the others: where another drafter proposed the same token it
is likelier than either claim says, where another proposed a different one in its place,
less likely. The mean, not the larger, of two estimates scores a shared node, since only the
mean is right on average.
Riders of in-pass drafters ride in the same forward, each drafter's seeing only its own and the root. After verification
every drafter observes the verdict, with its own riders' logits, and the calibration
learns which of its claims the target took.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Protocol

import attrs
import torch

from specmix.sizing.calibration import Calibration
from specmix.tree import TokenTree
from specmix.values import Proposal, Riders, StepContext, Verdict


class Drafters(Protocol):
    """How the drafters of a composition share a step: :class:`Solo` for one, :class:`Mix` for several.

    The engine has every drafter propose and build, then asks it to merge what they built into one tree and proposal
    (:meth:`merge`), to give each drafter its view of the verdict (:meth:`share`), and to credit the accepted tokens
    to the drafters that proposed them (:meth:`credit`).
    """

    def merge(self, trees: Sequence[TokenTree], proposals: Sequence[Proposal], ctx: StepContext) -> tuple[TokenTree, Proposal]:
        """One tree and proposal from each drafter's."""
        ...

    def share(self, verdict: Verdict) -> list[Verdict]:
        """The verdict as each drafter sees it."""
        ...

    def credit(self, verdict: Verdict) -> tuple[int, ...]:
        """Per drafter, how many accepted nodes it had proposed."""
        ...


def drafting_policy(drafters: int, calibrated: Sequence[bool]) -> Drafters:
    """The policy for ``drafters`` drafters whose scores are (or are not) ``calibrated`` acceptance odds."""
    return Solo() if drafters == 1 else Mix(drafters, calibrated=calibrated)


class Solo(Drafters):
    """One drafter: its tree and proposal as they are."""

    def merge(self, trees: Sequence[TokenTree], proposals: Sequence[Proposal], ctx: StepContext) -> tuple[TokenTree, Proposal]:
        return trees[0], proposals[0]

    def share(self, verdict: Verdict) -> list[Verdict]:
        return [verdict]

    def credit(self, verdict: Verdict) -> tuple[int, ...]:
        return (len(verdict.path),)


def _conditional(tree: TokenTree) -> list[float]:
    """Each node's probability given its parent, as its drafter claims it (an even share of half where it does not)."""
    if tree.logprobs is not None:
        return [math.exp(v) for v in tree.logprobs.tolist()]
    return [1.0] + [0.5 / len(tree.children[tree.parent_list[i]]) for i in range(1, tree.size)]


def combined_riders(proposals: Sequence[Proposal]) -> tuple[Riders | None, list[int]]:
    """The riders of every proposal side by side (each set sees the root and itself), and where each set begins."""
    parts = [p.riders for p in proposals]
    present = [r for r in parts if r is not None]
    starts, total = [], 0
    for riders in parts:
        starts.append(total)
        total += 0 if riders is None else riders.count
    if not present:
        return None, starts
    visible = torch.zeros(total, total + 1, dtype=torch.bool)
    for riders, start in zip(parts, starts):
        if riders is not None and riders.count:
            end = start + riders.count
            visible[start:end, 0] = riders.visible[:, 0]
            visible[start:end, 1 + start:1 + end] = riders.visible[:, 1:]
    return Riders(tokens=torch.cat([r.tokens for r in present]), offsets=torch.cat([r.offsets for r in present]),
                  visible=visible), starts


ALONE, AGREED, CONTESTED = "alone", "agreed", "contested"
"""How a node stands for one drafter that proposed it (see :func:`_situation`)."""


def _situation(source: int, proposers: dict[int, float], beside: set[int]) -> str:
    """How a node that ``proposers`` proposed stands for ``source``, one of them, where ``beside`` are the drafters
    that proposed a child of its parent: ``agreed`` if another proposed it too, ``contested`` if another proposed a
    sibling instead (it did not propose this node, so that child is another), else ``alone``."""
    if len(proposers) > 1:
        return AGREED
    return CONTESTED if beside - {source} else ALONE


class Mix(Drafters):
    """Several drafters: one merged tree, calibrated scores, riders side by side, one verdict each."""

    def __init__(self, drafters: int, calibrated: Sequence[bool] = ()):
        """``calibrated``: per drafter, whether its scores are acceptance estimates already, taken as they are."""
        self.drafters = drafters
        self.calibration = Calibration()
        self.calibrated = tuple(calibrated) or (False,) * drafters
        self._mapped_tree: TokenTree | None = None

    def merge(self, trees: Sequence[TokenTree], proposals: Sequence[Proposal], ctx: StepContext) -> tuple[TokenTree, Proposal]:
        tokens, parents, index = [ctx.root], [-1], {}
        claims: list[dict[int, float]] = [{}]
        for source, tree in enumerate(trees):
            probabilities, mapped = _conditional(tree), [0]
            for node in range(1, tree.size):
                key = (mapped[tree.parent_list[node]], tree.token_list[node])
                if key not in index:
                    index[key] = len(tokens)
                    tokens.append(tree.token_list[node])
                    parents.append(key[0])
                    claims.append({})
                merged = index[key]
                mapped.append(merged)
                claims[merged][source] = max(claims[merged].get(source, 0.0), probabilities[node])
        depths = [0] * len(tokens)
        below: list[set[int]] = [set() for _ in tokens]  # the drafters that proposed a child of each node
        for node in range(1, len(tokens)):
            depths[node] = depths[parents[node]] + 1
            below[parents[node]].update(claims[node])
        situations: list[dict[int, str]] = [{}] + [
            {source: _situation(source, claims[node], below[parents[node]]) for source in claims[node]}
            for node in range(1, len(tokens))]
        scores = [0.0] + [math.log(statistics.fmean(self._estimate(s, depths[n], p, situations[n][s])
                                                    for s, p in claims[n].items())) for n in range(1, len(tokens))]
        self.claims, self.depths, self.index, self.situations = claims, depths, index, situations
        self._mapped_tree = None
        riders, self.rider_starts = combined_riders(proposals)
        self.rider_counts = [0 if p.riders is None else p.riders.count for p in proposals]
        first = {field: next((getattr(p, field) for p in proposals if getattr(p, field) is not None), None)
                 for field in ("marginals", "features")}
        tree = TokenTree(tokens=tokens, parents=parents, vocab_size=ctx.vocab_size, logprobs=scores)
        return tree, Proposal(tree=tree, riders=riders, **first)

    def _estimate(self, source: int, depth: int, claimed: float, situation: str = ALONE) -> float:
        """A drafter's claim on the common scale: a calibrated drafter's as it is where it stands alone (its own
        odds were learnt for that), and every claim learnt afresh where other drafters agree or disagree with it."""
        if self.calibrated[source] and situation == ALONE:
            return claimed
        return self.calibration.estimate((source, situation), depth, claimed)

    def share(self, verdict: Verdict) -> list[Verdict]:
        """The verdict as each drafter sees it (with its own riders' logits); the calibration learns from it."""
        self._learn(verdict)
        views = []
        for start, count in zip(self.rider_starts, self.rider_counts):
            logits = None if verdict.rider_logits is None or not count else verdict.rider_logits[start:start + count]
            views.append(verdict if logits is verdict.rider_logits else attrs.evolve(verdict, rider_logits=logits))
        return views

    def _merged(self, tree: TokenTree) -> list[int]:
        """The merged node each node of ``tree`` is: the selector and the room left keep a subtree of the merge.
        Learning and credit both ask for the verified tree's, so the last answer is kept."""
        if self._mapped_tree is not tree:
            mapped = [0]
            for node in range(1, tree.size):
                mapped.append(self.index[(mapped[tree.parent_list[node]], tree.token_list[node])])
            self._mapped_tree, self._mapped = tree, mapped
        return self._mapped

    def _learn(self, verdict: Verdict) -> None:
        """Every verified node whose parent the walk reached: accepted if the walk went on through it."""
        tree, reached = verdict.tree, {0, *verdict.path}
        mapped = self._merged(tree)
        for node in range(1, tree.size):
            if tree.parent_list[node] in reached:
                merged = mapped[node]
                for source, claimed in self.claims[merged].items():
                    situation = self.situations[merged][source]
                    if not self.calibrated[source] or situation != ALONE:
                        self.calibration.record((source, situation), self.depths[merged], claimed, node in reached)

    def credit(self, verdict: Verdict) -> tuple[int, ...]:
        """Per drafter, how many of the accepted nodes it had proposed."""
        counts = [0] * self.drafters
        mapped = self._merged(verdict.tree)
        for node in verdict.path:
            for source in self.claims[mapped[node]]:
                counts[source] += 1
        return tuple(counts)
