"""One scale for every drafter: how often the target accepts a node a drafter scored at probability p.

Drafters' scores are not comparable as they are (a lookup's counts, a network's softmax,
a pool's shares), so a mix compares them after calibration: per drafter (a mix keys it by
how the claim stands among the other drafters' too), per depth (1, 2, 3 or deeper) and per
band of claimed probability, the share of such nodes the target
took when it reached their parent. Each band starts from its own claim (a Beta prior worth
two observations), keeps about ``memory`` recent observations, and adds ``explore``
standard deviations of optimism, so that no drafter is written off after a bad stretch.
How a drafter's claims fare is a property of the drafter and the target more than of one
prompt, so a mix keeps its calibration across generations.

The optimism is kept small because the selector sizes the merged tree by these estimates:
at one standard deviation every node of a mix looked likelier than it was, and on MT-bench
(default model, greedy) the mix verified 18 positions a step for 13.2 tokens/s, against
9.6 positions and 16.8 tokens/s with none. A quarter keeps bands that were rarely tried in
play; the lookup's own odds and the payoff's trials explore too. A drafter whose scores
are such estimates already (``Drafter.calibrated``) is not calibrated again where its claim
stands alone.

A lone drafter's claims, and a trained scorer's, are calibrated where a selector sizes
trees on them (:class:`~specmix.sizing.selection.ReachSelector`), by :class:`DepthScale`: one
factor per depth rather than a share per band, since there the order of the claims is all
the selector has to rank nodes by and the bands, each learnt from few verdicts, reordered
them (``ddtree`` on 18 MT-bench prompts: 0.47 tokens accepted per tree verified with
bands, 0.65 on the claims as they were, for about as many positions).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable

from specmix.sizing.estimate import BetaOdds, DecayingAverage

EDGES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85)
"""Upper edges of the bands of claimed probability (the last band runs to 1)."""


class Calibration:
    def __init__(self, memory: float | None = 256.0, explore: float = 0.25, weight: float = 2.0):
        self.odds = BetaOdds(weight=weight, explore=explore, memory=memory)

    def reset(self) -> None:
        self.odds.reset()

    @staticmethod
    def _key(drafter: Hashable, depth: int, claimed: float) -> tuple[Hashable, int, int]:
        return drafter, min(depth, 3), bisect.bisect_left(EDGES, claimed)

    def estimate(self, drafter: Hashable, depth: int, claimed: float) -> float:
        """The calibrated chance that a node ``drafter`` claims ``claimed`` for, at ``depth``, is accepted once reached."""
        return self.odds.estimate(self._key(drafter, depth, claimed), prior=claimed)

    def record(self, drafter: Hashable, depth: int, claimed: float, accepted: bool) -> None:
        self.odds.record(self._key(drafter, depth, claimed), accepted)


class DepthScale:
    """Claims scaled by one factor per depth (1, 2, 3 or deeper): the tokens the target took over those claimed.

    Scaling keeps the order of the claims at a depth, and sizes trees on what was taken.
    Deeper claims get their own factor because a drafter's deeper guesses lean on its own
    earlier ones (a diffusion drafter's marginals are not conditioned on the tokens above
    them at all). Each factor starts at 1, held there by ``weight`` claimed tokens' worth
    of evidence, and keeps about ``memory`` recent verdicts.
    """

    def __init__(self, memory: float | None = 256.0, weight: float = 2.0):
        self.memory, self.weight = memory, weight
        self.reset()

    def reset(self) -> None:
        self.taken = [DecayingAverage(self.memory, prior=(1.0, self.weight)) for _ in range(4)]  # tokens taken per claimed

    @property
    def learnt(self) -> bool:
        """Whether any verdict has been recorded since the last reset."""
        return any(average.weight > 0 for average in self.taken)

    def factor(self, depth: int) -> float:
        return self.taken[min(depth, 3)].backed_mean

    def estimate(self, depth: int, claimed: float) -> float:
        """The chance that a node claimed at ``claimed`` to follow its parent, at ``depth``, is taken once reached."""
        return min(1.0, claimed * self.factor(depth))

    def record(self, depth: int, claimed: float, accepted: bool) -> None:
        self.taken[min(depth, 3)].add(float(accepted), weight=claimed)
