"""How many riders PTD sends: as many as pay for themselves, measured as it goes.

Riders cost every step (a larger forward) and pay later (the candidates they grow), so no
single step says whether they pay. Each rider count is an arm: a step's payoff is the
tokens it committed per second of forward time on the measured cost curve, and an arm's
value is the decaying mean of its payoffs over about its last ``window`` steps. Every arm is tried for ``window`` steps
first, from the fewest riders that send any up to the most, and none last: on a CPU a couple
of riders add next to nothing to the forward, so a PTD whose riders do not pay yet costs
little while it finds out, and the pool its first riders grow is what later counts earn
from. Then the best runs, and an arm last measured ``revisit`` steps ago is tried again for
``window`` steps, so that a count switched off early gets another chance (with four arms
and the defaults, about one step in eight explores).
"""

from __future__ import annotations

from collections.abc import Iterable

from specmix.sizing.cost import CostCurve
from specmix.sizing.estimate import DecayingAverage


class RiderBudget:
    def __init__(self, arms: Iterable[int], window: int = 4, revisit: int = 96) -> None:
        self.arms = tuple(sorted(set(arms), key=lambda arm: (arm == 0, arm)))  # the order trials go in
        self.window, self.revisit = window, revisit
        self.reset()

    def reset(self) -> None:
        self.payoffs = {arm: DecayingAverage(self.window) for arm in self.arms}
        self.tries = dict.fromkeys(self.arms, 0)
        self.last_tried = {arm: -1 for arm in self.arms}
        self.trial: int | None = None
        self.trial_left, self.step = 0, 0

    def value(self, arm: int) -> float:
        mean = self.payoffs[arm].mean
        return float("inf") if mean is None else mean

    def choose(self) -> int:
        """The rider count for this step."""
        if self.trial_left == 0:
            untried = [arm for arm in self.arms if self.tries[arm] < self.window]
            if untried:
                self.trial, self.trial_left = untried[0], self.window - self.tries[untried[0]]
            elif self.step - min(self.last_tried.values()) >= self.revisit:
                oldest = min(self.arms, key=lambda arm: self.last_tried[arm])
                self.trial, self.trial_left = oldest, self.window
            else:
                self.trial = None
        if self.trial is not None:
            return self.trial
        return max(self.arms, key=self.value)

    def record(self, arm: int, tokens: int, forward_size: int, cost: CostCurve) -> None:
        """What a step with ``arm`` riders committed, and the size of its forward."""
        self.payoffs[arm].add(tokens / cost.time(forward_size))
        self.tries[arm] += 1
        self.last_tried[arm] = self.step
        self.step += 1
        if self.trial is not None and self.trial_left > 0:
            self.trial_left -= 1
