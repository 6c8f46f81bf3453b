"""What steps of each size cost inside decoding, against what the measured cost curve says.

The curve holds each size's fastest of several rounds of forwards, timed back to back.
Inside a generation the same forwards can take longer, and not by the same factor at
every size: on a two-core CPU, forwards of 9 to 13 new tokens took 1.3-1.4 times the
curve's price in decoding (median) while single tokens took about their price, so a
selector sizing trees on the curve alone verified more than paid, and drafters priced on
it drafted at a loss. The engine records each step's tree forward time (on the CPU; the
whole verification elsewhere, where a forward returns before its work is done) against the
curve's price for the forward it ran, as a running ratio per measured size, and hands
selectors and the drafter payoff the curve scaled by those ratios. The head rows a walk reads
after the forward are left out: they grow with what a step accepts, not with its size.
"""

from __future__ import annotations

import bisect

import attrs

from specmix.sizing.cost import CostCurve

WEIGHT = 0.1
"""Each step's weight in its size's running ratio (about the last ten steps of that size count)."""
LOWEST, HIGHEST = 0.5, 4.0
"""Bounds on one step's ratio: a step interrupted by other work on the machine moves the estimate this far at most."""


@attrs.define
class StepCosts:
    """Running ratios of what steps took to the curve's price, per measured size of the curve.

    A step of ``n`` positions counts for the smallest measured size at or above ``n``
    (the last size past it). A size without steps takes the ratio of the nearest smaller
    one that has them, since running over the curve grows with the rows; sizes below every
    observed one keep the curve's price.
    """

    weight: float = attrs.field(default=WEIGHT, validator=attrs.validators.and_(attrs.validators.gt(0.0),
                                                                                  attrs.validators.le(1.0)))
    ratios: dict[int, float] = attrs.field(factory=dict)

    def record(self, positions: int, seconds: float, curve: CostCurve) -> None:
        """A step verified ``positions`` (as run, padding included) in ``seconds``, which ``curve``, the unscaled
        curve at the step's context, prices at ``curve.time_at(positions)``."""
        ratio = min(max(seconds / curve.time_at(positions), LOWEST), HIGHEST)
        size = _bucket(curve.sizes, positions)
        old = self.ratios.get(size, 1.0)
        self.ratios[size] = old + self.weight * (ratio - old)

    def scaled(self, curve: CostCurve) -> CostCurve:
        """``curve`` with each measured size's time scaled by its running ratio."""
        if not self.ratios:
            return curve
        factors, factor = [], 1.0
        for size in curve.sizes:
            factor = self.ratios.get(size, factor)
            factors.append(factor)
        return CostCurve(sizes=curve.sizes, seconds=[t * f for t, f in zip(curve.seconds, factors)],
                         context=curve.context)


def _bucket(sizes: tuple[int, ...], positions: int) -> int:
    return sizes[min(bisect.bisect_left(sizes, positions), len(sizes) - 1)]
