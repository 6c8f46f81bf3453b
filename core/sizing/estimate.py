"""The estimator every online estimate in sizing is built from, and the fading sums beneath it.

:class:`BetaOdds` is the chance of a success per key: the share of successes under a Beta
prior, optionally fading (about ``memory`` recent observations count) and optimistic
(``explore`` standard deviations that shrink as evidence grows). :class:`DecayingAverage` is
its fading sums: each observation adds an amount and a weight, and older ones fade by
``1 - 1/memory`` per new one.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from specmix.errors import ConfigurationError


class DecayingAverage:
    """``sum(amounts) / sum(weights)`` over fading observations (``memory`` None: none fade)."""

    def __init__(self, memory: float | None = None):
        if memory is not None and memory < 1:
            raise ConfigurationError(f"memory is a number of observations, at least 1; got {memory}")
        self.keep = 1.0 if memory is None else 1.0 - 1.0 / memory
        self.amount, self.weight = 0.0, 0.0

    def add(self, amount: float, weight: float = 1.0) -> None:
        """One observation: ``amount`` over ``weight`` (a plain value is ``add(value)``)."""
        self.amount = self.amount * self.keep + amount
        self.weight = self.weight * self.keep + weight

    def fade(self) -> None:
        """Fade by one observation's worth with no new one."""
        self.amount *= self.keep
        self.weight *= self.keep

    @property
    def mean(self) -> float | None:
        """The estimate (None before the first observation)."""
        return self.amount / self.weight if self.weight > 0 else None


class BetaOdds:
    """Per key, the chance of a success: the decaying share of successes under a Beta prior worth ``weight``
    observations, plus ``explore`` posterior standard deviations, kept within ``[1e-6, 1]``.

    The prior's mean is given where the odds are read (a drafter's claim for that node, or a key's own prior).
    """

    def __init__(self, weight: float = 2.0, explore: float = 0.0, memory: float | None = None):
        if weight <= 0 or explore < 0:
            raise ConfigurationError(f"weight must be positive and explore >= 0, got {weight} and {explore}")
        self.weight, self.explore, self.memory = weight, explore, memory
        self.reset()

    def reset(self) -> None:
        """Forget all evidence."""
        self.counts: dict[Hashable, DecayingAverage] = {}

    def _average(self, key: Hashable) -> DecayingAverage:
        if key not in self.counts:
            self.counts[key] = DecayingAverage(self.memory)
        return self.counts[key]

    def evidence(self, key: Hashable) -> tuple[float, float]:
        """The fading count of successes under ``key`` and of tries."""
        counts = self.counts.get(key)
        return (0.0, 0.0) if counts is None else (counts.amount, counts.weight)

    def estimate(self, key: Hashable, prior: float) -> float:
        """The chance of a success under ``key``, from a prior mean of ``prior``."""
        successes, tries = self.evidence(key)
        seen = tries + self.weight
        mean = (successes + prior * self.weight) / seen
        return min(1.0, max(1e-6, mean + self.explore * math.sqrt(mean * (1 - mean) / (seen + 1))))

    def record(self, key: Hashable, success: bool) -> None:
        self._average(key).add(float(success))

    def fade(self) -> None:
        """Every key's evidence fades by one observation's worth (a step with nothing to observe)."""
        for counts in self.counts.values():
            counts.fade()
