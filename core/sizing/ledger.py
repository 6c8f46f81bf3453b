"""What steps cost and bring, learnt as decoding goes: one object, fed once per step after commit.

It prices each step (the cost curve at the step's context, scaled by what steps of each
size have taken against it, :mod:`~specmix.sizing.step_costs`), knows the tokens per second
steps bring (:mod:`~specmix.sizing.step_rate`), and tells the drafters' policy what each
drafter gained and cost (:mod:`~specmix.sizing.payoff`, through :class:`~specmix.sizing.mixing.Drafters`).
"""

from __future__ import annotations

from specmix.sizing.cost import CostCurve
from specmix.sizing.mixing import Drafters
from specmix.sizing.step_costs import StepCosts
from specmix.sizing.step_rate import StepRate
from specmix.sizing.tuning import Sizing
from specmix.step_timer import StepTimer
from specmix.target import TreeForward
from specmix.values import Verdict


class Ledger:
    """Prices steps and learns from them. ``learn``: scale the curve by what steps take and size trees against the
    decoder's own rate, both kept across generations (each unless ``sizing`` switches it off); off, each step is priced
    on the curve as it is."""

    def __init__(self, drafters: Drafters, learn: bool, sizing: Sizing | None = None):
        self.drafters, sizing = drafters, sizing or Sizing()
        self.step_costs = sizing.build("step_costs", StepCosts) if learn else None
        self.step_rate = sizing.build("step_rate", StepRate) if learn else None
        self._unscaled: CostCurve | None = None  # the curve at the current step's context

    def price(self, curve: CostCurve | None, context: int) -> tuple[CostCurve | None, float | None]:
        """The curve a step over ``context`` tokens is sized on, and the tokens per second a position must earn."""
        self._unscaled = None if curve is None else curve.at(context)
        if self._unscaled is None:
            return None, None
        rate = None if self.step_rate is None else self.step_rate.rate
        if self.step_costs is None:
            return self._unscaled, rate
        return self.step_costs.scaled(self._unscaled), rate

    def settle(self, verdict: Verdict, committed: int, timer: StepTimer, forward: TreeForward | None,
               priced: CostCurve | None) -> None:
        """One step is committed: learn its cost, its rate, and each drafter's payoff (on ``priced``, the curve the
        step was sized on)."""
        if self.step_costs is not None and self._unscaled is not None:
            seconds = timer.seconds["verify"] if forward is None or forward.seconds is None else forward.seconds
            positions = verdict.tree.size + _riders(verdict) if forward is None else forward.positions
            self.step_costs.record(positions, seconds, self._unscaled)
        self.drafters.settle(verdict, timer.spent, timer.seconds, committed, priced)
        if self.step_rate is not None:
            self.step_rate.record(committed, timer.total())


def _riders(verdict: Verdict) -> int:
    return 0 if verdict.rider_logits is None else verdict.rider_logits.shape[0]
