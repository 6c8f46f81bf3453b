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

from specmix.errors import ConfigurationError
from specmix.sizing.cost import CostCurve
from specmix.sizing.estimate import DecayingAverage

WEIGHT = 0.1
"""Each step's weight in its size's running ratio (about the last ten steps of that size count)."""
LOWEST, HIGHEST = 0.5, 4.0
"""Bounds on one step's ratio: a step interrupted by other work on the machine moves the estimate this far at most."""


class StepCosts:
    """Running ratios of what steps took to the curve's price, per measured size of the curve.

    A step of ``n`` positions counts for the smallest measured size at or above ``n``
    (the last size past it). A size without steps takes the ratio of the nearest smaller
    one that has them, since running over the curve grows with the rows; sizes below every
    observed one keep the curve's price. Each size's ratio starts at 1, a prior that fades
    like one more step (so a step moves it by ``weight``, as an exponential average).
    """

    def __init__(self, weight: float | None = WEIGHT, lowest: float = LOWEST, highest: float = HIGHEST):
        if weight is not None and not 0 < weight <= 1:
            raise ConfigurationError(f"a step's weight lies in (0, 1]; got {weight}")
        self.memory = None if weight is None else 1.0 / weight
        self.lowest, self.highest = lowest, highest
        self._by_size: dict[int, DecayingAverage] = {}

    @property
    def ratios(self) -> dict[int, float]:
        """Per measured size with steps, the running ratio of what its steps took to its price."""
        return {size: average.backed_mean for size, average in self._by_size.items()}

    def record(self, positions: int, seconds: float, curve: CostCurve) -> None:
        """A step verified ``positions`` (as run, padding included) in ``seconds``, which ``curve``, the unscaled
        curve at the step's context, prices at ``curve.time_at(positions)``."""
        ratio = min(max(seconds / curve.time_at(positions), self.lowest), self.highest)
        size = _bucket(curve.sizes, positions)
        if size not in self._by_size:
            self._by_size[size] = DecayingAverage(self.memory, prior=(1.0, self.memory or 1.0), fading_prior=True)
        self._by_size[size].add(ratio)

    def scaled(self, curve: CostCurve) -> CostCurve:
        """``curve`` with each measured size's time scaled by its running ratio."""
        ratios = self.ratios
        if not ratios:
            return curve
        factors, factor = [], 1.0
        for size in curve.sizes:
            factor = ratios.get(size, factor)
            factors.append(factor)
        return CostCurve(sizes=curve.sizes, seconds=[t * f for t, f in zip(curve.seconds, factors)],
                         context=curve.context)


def _bucket(sizes: tuple[int, ...], positions: int) -> int:
    return sizes[min(bisect.bisect_left(sizes, positions), len(sizes) - 1)]
