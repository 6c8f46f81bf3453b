"""One scale for every drafter: how often the target accepts a node a drafter scored at probability p.

Drafters' scores are not comparable as they are (a lookup's counts, a network's softmax,
a pool's shares), so a mix compares them after calibration: per drafter (a mix keys it by
how the claim stands among the other drafters' too), per depth (1, 2, 3 or deeper) and per
band of claimed probability, the share of such nodes the target
took when it reached their parent. Each band starts from its own claim (a Beta prior worth
two observations, the uniform prior's weight), so that a band learns from its first few verdicts.
How a drafter's claims fare is a property of the drafter and the target more than of one
prompt, so a mix keeps its calibration across generations, and every verdict counts alike:
neither fading old evidence nor optimism about rarely tried bands paid for itself
(docs/results.md, "Every knob against its neutral setting"). A drafter whose scores are such
estimates already (``Drafter.calibrated``) is not calibrated again where its claim stands alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable

from specmix.sizing.estimate import BetaOdds

EDGES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85)
"""Upper edges of the bands of claimed probability (the last band runs to 1)."""


class Calibration:
    def __init__(self) -> None:
        self.odds = BetaOdds()

    @staticmethod
    def _key(drafter: Hashable, depth: int, claimed: float) -> tuple[Hashable, int, int]:
        return drafter, min(depth, 3), bisect.bisect_left(EDGES, claimed)

    def estimate(self, drafter: Hashable, depth: int, claimed: float) -> float:
        """The calibrated chance that a node ``drafter`` claims ``claimed`` for, at ``depth``, is accepted once reached."""
        return self.odds.estimate(self._key(drafter, depth, claimed), prior=claimed)

    def record(self, drafter: Hashable, depth: int, claimed: float, accepted: bool) -> None:
        self.odds.record(self._key(drafter, depth, claimed), accepted)
