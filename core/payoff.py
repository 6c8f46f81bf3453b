"""Which drafters pay for themselves: each is asked to draft only while its tokens cost less than the step's.

In a composition that sizes its work by the cost curve (alone or in a mix), the selector
prices the nodes it verifies; what it does not price is each drafter's own pass (propose
and build) and the forward time its riders add on the curve. Those are a drafter's cost,
and its gain is its share of the accepted tokens (a token two drafters proposed counts
half for each). Adding a drafter speeds decoding up exactly when its tokens per second
beat the step's own rate (alone: plain decoding's), so a drafter is asked while its
recent gain per second, with some optimism, is at least the recent tokens per second of
the whole step. Both are ratios of discounted sums, so steps where a drafter proposes
nothing (and costs next to nothing) barely move its ratio, and a drafter whose recent cost
is below ``free`` of a step (a lookup that finds nothing) is always asked: it cannot slow
a step by more than noise. One that falls below sits steps
out (its state still learns from every verdict); after ``revisit`` steps out it is asked
again for a trial of ``trial`` steps, measured afresh, so that a bad stretch never switches
it off for good. Every drafter starts on such a trial.
"""

from __future__ import annotations


class DrafterPayoff:
    def __init__(self, drafters: int, memory: float = 24.0, revisit: int = 16, trial: int = 3, optimism: float = 1.25,
                 free: float = 0.02):
        if drafters < 1 or memory < 1 or revisit < 1 or trial < 1 or optimism < 1 or not 0 <= free < 1:
            raise ValueError("a payoff needs at least one drafter, memory, revisit and trial >= 1, optimism >= 1 "
                             "and free in [0, 1)")
        self.drafters, self.memory, self.revisit, self.trial, self.optimism = drafters, memory, revisit, trial, optimism
        self.free = free
        self.reset()

    def reset(self) -> None:
        count = self.drafters
        self.gain, self.cost = [0.0] * count, [0.0] * count
        self.seen = [0] * count  # steps measured since the last trial began
        self.idle = [0] * count  # steps sat out in a row
        self.trial_left = [self.trial] * count
        self.tokens = self.seconds = self.steps = 0.0

    def rate(self) -> float:
        """The whole step's recent tokens per second (0 before the first step)."""
        return self.tokens / self.seconds if self.seconds else 0.0

    def pays(self, drafter: int) -> bool:
        """Whether ``drafter`` costs next to nothing, or its recent tokens per second, with optimism, reach the step's."""
        cost = self.cost[drafter]
        if self.steps and cost <= self.free * self.seconds / self.steps:
            return True
        return self.optimism * self.gain[drafter] >= self.rate() * cost

    def asks(self) -> list[bool]:
        """Which drafters draft this step: those on trial and those that pay."""
        asked = []
        for d in range(self.drafters):
            if self.idle[d] >= self.revisit:
                self.trial_left[d], self.seen[d] = self.trial, 0
            asked.append(self.trial_left[d] > 0 or self.pays(d))
        return asked

    def record(self, asked: list[bool], gains: list[float], costs: list[float], committed: int, seconds: float) -> None:
        """One step: per drafter whether it was asked, the tokens only it proposed and the seconds it added;
        the tokens the step committed and the seconds it took."""
        keep = 1.0 - 1.0 / self.memory
        self.tokens = self.tokens * keep + committed
        self.seconds = self.seconds * keep + seconds
        self.steps = self.steps * keep + 1
        for d in range(self.drafters):
            if not asked[d]:
                self.idle[d] += 1
                continue
            self.idle[d] = 0
            self.seen[d] += 1
            weight = max(1.0 / self.seen[d], 1.0 - keep)  # a plain mean over a fresh trial, then a moving one
            self.gain[d] += (gains[d] - self.gain[d]) * weight
            self.cost[d] += (costs[d] - self.cost[d]) * weight
            self.trial_left[d] = max(self.trial_left[d] - 1, 0)
