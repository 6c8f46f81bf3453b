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
import math
from collections import defaultdict
from collections.abc import Hashable

EDGES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85)
"""Upper edges of the bands of claimed probability (the last band runs to 1)."""


class Calibration:
    def __init__(self, memory: float = 256.0, explore: float = 0.25, weight: float = 2.0):
        self.keep, self.explore, self.weight = 1.0 - 1.0 / memory, explore, weight
        self.reset()

    def reset(self) -> None:
        self.counts: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])  # key -> [accepted, tried]

    @staticmethod
    def _key(drafter: Hashable, depth: int, claimed: float) -> tuple[Hashable, int, int]:
        return drafter, min(depth, 3), bisect.bisect_left(EDGES, claimed)

    def estimate(self, drafter: Hashable, depth: int, claimed: float) -> float:
        """The calibrated chance that a node ``drafter`` claims ``claimed`` for, at ``depth``, is accepted once reached."""
        accepted, tried = self.counts[self._key(drafter, depth, claimed)]
        seen = tried + self.weight
        mean = (accepted + claimed * self.weight) / seen
        return min(1.0, max(1e-6, mean + self.explore * math.sqrt(mean * (1 - mean) / (seen + 1))))

    def record(self, drafter: Hashable, depth: int, claimed: float, accepted: bool) -> None:
        counts = self.counts[self._key(drafter, depth, claimed)]
        counts[0] = counts[0] * self.keep + accepted
        counts[1] = counts[1] * self.keep + 1


class DepthScale:
    """Claims scaled by one factor per depth (1, 2, 3 or deeper): the tokens the target took over those claimed.

    Scaling keeps the order of the claims at a depth, and sizes trees on what was taken.
    Deeper claims get their own factor because a drafter's deeper guesses lean on its own
    earlier ones (a diffusion drafter's marginals are not conditioned on the tokens above
    them at all). Each factor starts at 1, held there by ``weight`` claimed tokens' worth
    of evidence, and keeps about ``memory`` recent verdicts.
    """

    def __init__(self, memory: float = 256.0, weight: float = 2.0):
        self.keep, self.weight = 1.0 - 1.0 / memory, weight
        self.reset()

    def reset(self) -> None:
        self.sums: dict[int, tuple[float, float]] = {}  # depth -> (tokens taken, tokens claimed), fading

    def factor(self, depth: int) -> float:
        taken, claimed = self.sums.get(min(depth, 3), (0.0, 0.0))
        return (taken + self.weight) / (claimed + self.weight)

    def estimate(self, depth: int, claimed: float) -> float:
        """The chance that a node claimed at ``claimed`` to follow its parent, at ``depth``, is taken once reached."""
        return min(1.0, claimed * self.factor(depth))

    def record(self, depth: int, claimed: float, accepted: bool) -> None:
        band = min(depth, 3)
        taken, claims = self.sums.get(band, (0.0, 0.0))
        self.sums[band] = (taken * self.keep + accepted, claims * self.keep + claimed)
