"""Which drafters pay for themselves: each is asked to draft only while its tokens cost less than the step's.

In a composition that sizes its work by the cost curve (alone or in a mix), the selector
prices the nodes it verifies; what it does not price is each drafter's own pass (propose,
build and observe) and the forward time its riders add on the curve. Those are a drafter's
cost (alone, a drafter answers for the selector's time over its tree as well, and one whose
scores are its own claims for all that verifying takes beyond a one-token step too:
:class:`specmix.sizing.mixing.Solo`), and its gain is what the step would lose without it: the
accepted tokens only it proposed (a mix credits a token several proposed to the cheapest
of them). Adding a drafter speeds
decoding up exactly when its tokens per second beat the step's own rate (alone: plain
decoding's), so a drafter is asked while its recent gain per second, times ``optimism``
(none by default: the costs above leave some out, such as the head's rows for riders), is
at least the recent tokens per second of the whole step. Both are ratios of discounted
sums, so steps where a drafter proposes nothing (and costs next to nothing) barely move
its ratio, and a drafter whose recent cost is below ``free`` of a step (a lookup that
finds nothing) is always asked: it cannot slow a step by more than noise. One that falls
below sits steps out (its state still learns from every verdict); after ``revisit`` steps
out it is asked again for a trial of ``trial`` steps, measured afresh, so that a bad
stretch never switches it off for good. Each trial that begins doubles the wait before the next (up to
``longest`` steps) until the drafter pays outside a trial, which brings the wait back to
``revisit``: on a CPU where a drafter never pays, its trials cost ever less. Every
drafter starts each generation on a trial; the wait it has earned is kept across them.

A drafter is measured in *slots*, one per situation it can be asked in, each with its own
gain, cost, trials and wait; a slot not in play in a step is left as it is. A mix puts a
drafter in one of two slots, by whether the drafters before it already expect tokens
(:mod:`specmix.sizing.mixing`): a second drafter is often worth its pass where the lookup has
nothing, and not beside a lookup match.
"""

from __future__ import annotations

from collections.abc import Mapping

from specmix.sizing.estimate import DecayingAverage
from specmix.sizing.step_rate import StepRate


class DrafterPayoff:
    def __init__(self, slots: int, memory: float | None = 24.0, revisit: int = 16, trial: int = 3, optimism: float = 1.0,
                 free: float = 0.02, longest: int = 256):
        if (slots < 1 or (memory is not None and memory < 1) or revisit < 1 or trial < 1 or optimism < 1 or not 0 <= free < 1
                or longest < revisit):
            raise ValueError("a payoff needs at least one slot, memory, revisit and trial >= 1, optimism >= 1, "
                             "free in [0, 1) and longest >= revisit")
        self.slots, self.memory, self.revisit, self.trial, self.optimism = slots, memory, revisit, trial, optimism
        self.free, self.longest = free, longest
        self.wait = [revisit] * slots  # steps out before the next trial
        self.reset()

    def reset(self) -> None:
        count = self.slots
        self.gain = [DecayingAverage(self.memory) for _ in range(count)]  # tokens only its drafter proposed, per step
        self.spend = [DecayingAverage(self.memory) for _ in range(count)]  # seconds its drafter added, per step
        self.idle = [0] * count  # steps sat out in a row
        self.trial_left = [self.trial] * count
        self.recent = StepRate(self.memory)  # the whole step's tokens per second, this generation

    def rate(self) -> float:
        """The whole step's recent tokens per second (0 before the first step)."""
        return self.recent.rate or 0.0

    def cost(self, slot: int) -> float:
        """The seconds ``slot``'s drafter recently added to a step (0 before it was measured)."""
        return self.spend[slot].mean or 0.0

    def pays(self, slot: int) -> bool:
        """Whether ``slot``'s drafter costs next to nothing there, or its recent tokens per second, with optimism,
        reach the step's."""
        cost, step = self.cost(slot), self.recent.step_seconds
        if step is not None and cost <= self.free * step:
            return True
        return self.optimism * (self.gain[slot].mean or 0.0) >= self.rate() * cost

    def ask(self, slot: int) -> bool:
        """Whether the drafter measured in ``slot`` drafts this step: it is on trial, or it pays."""
        if self.idle[slot] >= self.wait[slot]:  # a trial begins, measured afresh
            self.trial_left[slot] = self.trial
            self.gain[slot], self.spend[slot] = DecayingAverage(self.memory), DecayingAverage(self.memory)
            self.wait[slot] = min(2 * self.wait[slot], self.longest)
        if self.trial_left[slot] > 0:
            return True
        pays = self.pays(slot)
        if pays:
            self.wait[slot] = self.revisit
        return pays

    def record(self, played: Mapping[int, tuple[bool, float, float]], committed: int, seconds: float) -> None:
        """One step: per slot in play, whether its drafter was asked, the tokens only it proposed and the seconds it
        added; the tokens the step committed and the seconds it took. Slots not in play are left as they are."""
        self.recent.record(committed, seconds)
        for slot, (asked, gain, cost) in played.items():
            if not asked:
                self.idle[slot] += 1
                continue
            self.idle[slot] = 0
            self.gain[slot].add(gain)
            self.spend[slot].add(cost)
            self.trial_left[slot] = max(self.trial_left[slot] - 1, 0)
