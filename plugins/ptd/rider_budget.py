"""How many riders PTD sends: as many as pay for themselves, measured as it goes.

Riders cost every step (a larger forward) and pay later (the candidates they grow), so no
single step says whether they pay. Each rider count is an arm: a step's payoff is the
tokens it committed per second of forward time on the measured cost curve, and an arm's
value is the decaying mean of its payoffs over about its last ``window`` steps. Every arm is tried for ``window`` steps
first, from the fewest riders that send any up to the most, and none last: on a CPU a couple
of riders add next to nothing to the forward, so a PTD whose riders do not pay yet costs
little while it finds out, and the pool its first riders grow is what later counts earn
from. Then the best runs for the rest of the answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from specmix.sizing.cost import CostCurve
from specmix.sizing.estimate import DecayingAverage


class RiderBudget:
    def __init__(self, arms: Iterable[int], window: int = 4) -> None:
        self.arms = tuple(sorted(set(arms), key=lambda arm: (arm == 0, arm)))  # the order trials go in
        self.window = window
        self.reset()

    def reset(self) -> None:
        self.payoffs = {arm: DecayingAverage(self.window) for arm in self.arms}
        self.tries = dict.fromkeys(self.arms, 0)

    def value(self, arm: int) -> float:
        mean = self.payoffs[arm].mean
        return float("inf") if mean is None else mean

    def choose(self) -> int:
        """The rider count for this step: the first arm not yet tried ``window`` times, else the best."""
        untried = [arm for arm in self.arms if self.tries[arm] < self.window]
        if untried:
            return untried[0]
        return max(self.arms, key=self.value)

    def record(self, arm: int, tokens: int, forward_size: int, cost: CostCurve) -> None:
        """What a step with ``arm`` riders committed, and the size of its forward."""
        self.payoffs[arm].add(tokens / cost.time(forward_size))
        self.tries[arm] += 1
