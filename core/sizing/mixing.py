"""Several drafters in one step: their trees merged into one, their riders side by side, each verdict shared.

With one drafter the step is the drafter's own (:class:`Solo` hands everything through).
With several, :class:`Mix` unites their candidate trees as a trie: a node any of them
proposed is in it once, scored by the mean of the calibrated estimates of those that
proposed it (:mod:`specmix.sizing.calibration`), and remembered as theirs. A claim is calibrated
apart for how it stands among the others: where another drafter proposed the same token it
is likelier than either claim says, where another proposed a different one in its place, less
likely (on MT-bench, the retrieval drafter's first tokens that the lookup contested were
taken 4% of the time for a claimed 10%, and the tokens both proposed 43% for a claimed 36% at
best). Each estimate of a shared node is then right on average, but the larger of two is
not: scored by the larger, first tokens both drafters proposed were taken 41% of the time
for an estimated 57% (ten MT-bench answers).
Riders of in-pass drafters ride in the same forward, each drafter's seeing only its own and the root. After verification
every drafter observes the verdict, with its own riders' logits, and the calibration
learns which of its claims the target took. A drafter whose tokens do not pay for what it
adds to the step sits steps out (:mod:`specmix.sizing.payoff`): it is not asked to propose, and
still observes every verdict. Drafters are asked in the order the composition names them,
and each is measured apart in the steps where those before it already expect ``covered``
tokens: what a second drafter adds beside a lookup match is not what it adds where the
lookup has nothing.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Protocol

import attrs
import torch

from specmix.sizing.calibration import Calibration
from specmix.sizing.cost import CostCurve
from specmix.sizing.payoff import DrafterPayoff
from specmix.sizing.tuning import Sizing
from specmix.tree import TokenTree
from specmix.values import Proposal, Riders, StepContext, Verdict


class Drafters(Protocol):
    """How the drafters of a composition share a step: :class:`Solo` for one, :class:`Mix` for several.

    The engine asks it, per step and in order, whether each drafter proposes (:meth:`ask`), merges what they
    built into one tree and proposal (:meth:`merge`), gives each drafter its view of the verdict (:meth:`share`),
    credits the accepted tokens to the drafters that proposed them (:meth:`credit`), and, after commit, tells it
    what each drafter gained and cost (:meth:`settle`).
    """

    asked: list[bool]
    """Per drafter, whether it was asked this step."""

    def start(self) -> None:
        """A generation begins."""

    def ask(self, drafter: int, trees: Sequence[TokenTree | None]) -> bool:
        """Whether ``drafter`` proposes this step, given the trees of those before it (None: sat out)."""
        ...

    def merge(self, trees: Sequence[TokenTree | None], proposals: Sequence[Proposal | None],
              ctx: StepContext) -> tuple[TokenTree, Proposal]:
        """One tree and proposal from each drafter's (None where it sat out)."""
        ...

    def share(self, verdict: Verdict) -> list[Verdict]:
        """The verdict as each drafter sees it."""
        ...

    def credit(self, verdict: Verdict) -> tuple[int, ...]:
        """Per drafter, how many accepted nodes it had proposed."""
        ...

    def settle(self, verdict: Verdict, spent: Sequence[float], seconds: dict[str, float], committed: int,
               cost: CostCurve | None) -> None:
        """The step is committed: ``spent`` per drafter, ``seconds`` per part of the step, on the curve ``cost``."""


def drafting_policy(calibrated: Sequence[bool], priced: bool, sizing: Sizing | None = None) -> Drafters:
    """The policy for drafters whose scores are (or are not) ``calibrated`` acceptance odds; where the composition
    sizes its work by the cost curve (``priced``), each drafter also earns its place on it (:mod:`.payoff`, unless
    ``sizing`` switches it off)."""
    sizing = sizing or Sizing()
    if len(calibrated) == 1:
        return Solo(sizing.build("payoff", DrafterPayoff, 1) if priced else None, calibrated[0])
    payoff = sizing.build("payoff", DrafterPayoff, Mix.slots(len(calibrated))) if priced else None
    mix = sizing.build("mix", Mix, len(calibrated), sizing.build("calibration", Calibration), payoff, calibrated)
    assert mix is not None, "a mix is never switched off"
    return mix


class Solo(Drafters):
    """One drafter: its tree and proposal as they are; with a ``payoff``, the drafter sits out steps it does not pay for.

    The selector prices the nodes it verifies on the drafter's scores. Where those are acceptance odds learnt from
    verdicts (``calibrated``), that price is right and the drafter answers only for its pass, its riders, and the
    selector's time over its tree (with no tree to weigh, the selector has nothing to do, and a learned selector's
    scorer costs as much as a small pass). Where the scores are the drafter's own claims, which may promise more than
    the target takes, it answers for all that verifying its tree took beyond a one-token step too (the curve's price
    of its positions, or the measured time where that is more): it is then weighed as a whole against plain
    decoding."""

    def __init__(self, payoff: DrafterPayoff | None = None, calibrated: bool = False):
        self.payoff, self.calibrated = payoff, calibrated

    def start(self) -> None:
        if self.payoff is not None:
            self.payoff.reset()

    def ask(self, drafter: int, trees: Sequence[TokenTree | None]) -> bool:
        """Whether the drafter proposes this step (it is the only one, measured in the payoff's one slot)."""
        self.asked = [self.payoff is None or self.payoff.ask(0)]
        return self.asked[0]

    def merge(self, trees: Sequence[TokenTree | None], proposals: Sequence[Proposal | None],
              ctx: StepContext) -> tuple[TokenTree, Proposal]:
        if trees[0] is None:
            tree = TokenTree.root_only(ctx.root, ctx.vocab_size)
            return tree, Proposal(tree=tree)
        assert proposals[0] is not None, "a drafter that built a tree proposed"
        if self.calibrated and not proposals[0].calibrated:  # its scores are the drafter's learnt odds
            return trees[0], attrs.evolve(proposals[0], calibrated=True)
        return trees[0], proposals[0]

    def settle(self, verdict: Verdict, spent: Sequence[float], seconds: dict[str, float], committed: int,
               cost: CostCurve | None) -> None:
        """Tell the payoff what the drafter gained (the accepted nodes) and what it answers for: its pass, ``spent``,
        the selection over its tree, the forward time of its riders, and where it is not calibrated, of its verified
        nodes."""
        if self.payoff is None:
            return
        assert cost is not None, "a payoff is kept only where steps are priced"
        riders = 0 if verdict.rider_logits is None else verdict.rider_logits.shape[0]
        forward = verdict.tree.size + riders
        if self.calibrated:
            priced = cost.time(forward) - cost.time(verdict.tree.size)
        else:
            # Weighed against plain decoding as a whole: the verification it made dearer than a one-token step, as
            # measured where that is more than the curve says (the walk's head rows, a forward slower than its price).
            priced = max(cost.time(forward), seconds.get("verify", 0.0)) - cost.time(1)
        added = spent[0] + seconds.get("select", 0.0) + priced
        self.payoff.record({0: (self.asked[0], float(len(verdict.path)), added)}, committed, sum(seconds.values()))

    def share(self, verdict: Verdict) -> list[Verdict]:
        return [verdict]

    def credit(self, verdict: Verdict) -> tuple[int, ...]:
        return (len(verdict.path),)


def _conditional(tree: TokenTree) -> list[float]:
    """Each node's probability given its parent, as its drafter claims it (an even share of half where it does not)."""
    if tree.logprobs is not None:
        return [math.exp(v) for v in tree.logprobs.tolist()]
    return [1.0] + [0.5 / len(tree.children[tree.parent_list[i]]) for i in range(1, tree.size)]


def combined_riders(proposals: Sequence[Proposal | None]) -> tuple[Riders | None, list[int]]:
    """The riders of every proposal side by side (each set sees the root and itself), and where each set begins."""
    parts = [None if p is None else p.riders for p in proposals]
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

    def __init__(self, drafters: int, calibration: Calibration | None = None, payoff: DrafterPayoff | None = None,
                 calibrated: Sequence[bool] = (), covered: float = 0.5):
        """``calibrated``: per drafter, whether its scores are acceptance estimates already, taken as they are.
        ``payoff``: one with :meth:`slots` slots. ``covered``: the tokens the drafters before one must expect for it
        to be measured apart, in its second slot."""
        if payoff is not None and payoff.slots != self.slots(drafters):
            raise ValueError(f"a mix of {drafters} drafters needs a payoff of {self.slots(drafters)} slots")
        self.drafters, self.covered = drafters, covered
        self.calibration = calibration or Calibration()
        self.calibrated = tuple(calibrated) or (False,) * drafters
        self.payoff = payoff
        self._mapped_tree: TokenTree | None = None

    def start(self) -> None:
        if self.payoff is not None:
            self.payoff.reset()

    @staticmethod
    def slots(drafters: int) -> int:
        """The payoff's slots for a mix: per drafter, one for steps where the drafters before it expect fewer than
        ``covered`` tokens, and one for the others."""
        return 2 * drafters

    def ask(self, drafter: int, trees: Sequence[TokenTree | None]) -> bool:
        """Whether ``drafter`` proposes this step, given the trees of the drafters before it (None: sat out). One that
        is not asked sits the step out: its tree and proposal are None."""
        if drafter == 0:
            self.asked, self.slot, self.before = [], [], 0.0  # before: the most any earlier tree expects
        elif self.payoff is not None and (tree := trees[drafter - 1]) is not None:  # each tree weighed once, and only if priced
            self.before = max(self.before, self._expected(drafter - 1, tree))
        self.slot.append(2 * drafter + (self.before >= self.covered))
        self.asked.append(self.payoff is None or self.payoff.ask(self.slot[-1]))
        return self.asked[-1]

    def _expected(self, source: int, tree: TokenTree) -> float:
        """The tokens ``tree`` would bring if verified whole, on the calibrated scale."""
        probabilities, reach = _conditional(tree), [1.0] * tree.size
        for node in range(1, tree.size):
            reach[node] = reach[tree.parent_list[node]] * self._estimate(source, tree.depth_list[node], probabilities[node])
        return sum(reach) - 1.0

    def merge(self, trees: Sequence[TokenTree | None], proposals: Sequence[Proposal | None],
              ctx: StepContext) -> tuple[TokenTree, Proposal]:
        tokens, parents, index = [ctx.root], [-1], {}
        claims: list[dict[int, float]] = [{}]
        for source, tree in enumerate(trees):
            if tree is None:
                continue
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
        self.rider_counts = [0 if p is None or p.riders is None else p.riders.count for p in proposals]
        present = [p for p in proposals if p is not None]
        first = {field: next((getattr(p, field) for p in present if getattr(p, field) is not None), None)
                 for field in ("marginals", "features")}
        tree = TokenTree(tokens=tokens, parents=parents, vocab_size=ctx.vocab_size, logprobs=scores)
        return tree, Proposal(tree=tree, riders=riders, calibrated=True, **first)

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
        Learning, credit and payoff all ask for the verified tree's, so the last answer is kept."""
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

    def settle(self, verdict: Verdict, spent: Sequence[float], seconds: dict[str, float], committed: int,
               cost: CostCurve | None) -> None:
        """Tell the payoff what each asked drafter gained and added to the step that the selector did not price:
        its own pass and reading of the verdict, ``spent``, and the forward time of its riders.

        A drafter's gain is what the step would lose without it: the accepted nodes only it proposed. A node several
        proposed is credited to the cheapest of them (the one a step would keep), split on a tie, so that drafters
        that agree never all go quiet, and a costly one is not kept for tokens a cheap one brings anyway."""
        if self.payoff is None:
            return
        assert cost is not None, "a payoff is kept only where steps are priced"
        mapped = self._merged(verdict.tree)
        gains = [0.0] * self.drafters
        for node in verdict.path:
            sources = list(self.claims[mapped[node]])
            cheapest = min(self.payoff.cost(self.slot[source]) for source in sources)
            credited = [source for source in sources if self.payoff.cost(self.slot[source]) == cheapest]
            for source in credited:
                gains[source] += 1.0 / len(credited)
        forward = verdict.tree.size + sum(self.rider_counts)
        costs = [spent[source] + cost.time(forward) - cost.time(forward - self.rider_counts[source])
                 for source in range(self.drafters)]
        played = {self.slot[d]: (self.asked[d], gains[d], costs[d]) for d in range(self.drafters)}
        self.payoff.record(played, committed, sum(seconds.values()))
