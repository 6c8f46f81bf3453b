"""The hardware cost curve T(N) as a value: the target's forward time for N new tokens (measured in :mod:`.measure`)."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

import attrs

from specmix.converters import floats, ints
from specmix.errors import ConfigurationError


def _check_curve(instance, attribute, value):
    sizes = instance.sizes
    if len(sizes) < 1 or len(sizes) != len(instance.seconds):
        raise ConfigurationError("a cost curve needs one time per size, and at least one size")
    if any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
        raise ConfigurationError(f"cost-curve sizes must be increasing positive integers, got {sizes}")
    if any(not s > 0 for s in instance.seconds):
        raise ConfigurationError("cost-curve times must be positive")


def _check_longer(instance, attribute, value):
    if value is None:
        return
    if len(value) != len(instance.sizes) or any(not s > 0 for s in value):
        raise ConfigurationError("a cost curve's times over the longer context need one positive time per size")
    if instance.context is None or instance.longer_context is None or instance.longer_context <= instance.context:
        raise ConfigurationError("a cost curve with times over a longer context needs both context lengths, "
                                 "the longer one larger")


@attrs.frozen
class CostCurve:
    """Measured forward seconds at increasing token counts, linearly interpolated between them.

    Attention reads the whole cache, so a forward costs more over a longer one. A curve
    measured over two cache lengths (``seconds`` over ``context`` tokens, ``longer`` over
    ``longer_context``) gives the curve over any other by :meth:`at`, linearly in the cache
    length; the engine hands selectors the curve for each step's context.
    """

    sizes: tuple[int, ...] = attrs.field(converter=ints)
    seconds: tuple[float, ...] = attrs.field(converter=floats, validator=_check_curve)
    context: int | None = None
    """The cache length ``seconds`` were measured over (None: not recorded)."""
    longer: tuple[float, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(floats),
                                                   validator=_check_longer)
    """Seconds at the same sizes over a cache of ``longer_context`` tokens (None: measured over one length)."""
    longer_context: int | None = None

    def at(self, context: int) -> CostCurve:
        """The curve over a cache of ``context`` tokens: this one if it was measured over a single length,
        else interpolated (and past either length, extrapolated) linearly between the two, never below a
        quarter of the shorter's times."""
        if self.longer is None:
            return self
        assert self.context is not None and self.longer_context is not None, "checked with longer"
        share = (context - self.context) / (self.longer_context - self.context)
        return CostCurve(sizes=self.sizes, seconds=[max(a + (b - a) * share, a / 4)
                                                    for a, b in zip(self.seconds, self.longer)])

    def time(self, n: int) -> float:
        """Forward seconds for ``n`` new tokens: at ``n`` itself or padded to a cheaper larger size (see
        :meth:`padded_size`), whichever costs less; so never less than for fewer tokens."""
        return self._cheapest(n)[0]

    def padded_size(self, n: int) -> int:
        """How many tokens a forward of ``n`` runs at: ``n``, or a larger measured size that costs less.

        On some CPUs a matrix product over a few rows takes longer than over a few more (on
        one two-core machine 2 to 4 new tokens cost more than 5); padding such a forward with
        tokens that see only themselves, dropped afterwards, buys the cheaper size.
        """
        return self._cheapest(n)[1]

    def _cheapest(self, n: int) -> tuple[float, int]:
        own = (self.time_at(n), n)
        first_larger = bisect.bisect_right(self.sizes, n)
        if first_larger == len(self.sizes):
            return own
        larger = self._cheapest_from[first_larger]
        return larger if larger[0] < own[0] else own  # padding only for less time

    @functools.cached_property
    def _cheapest_from(self) -> list[tuple[float, int]]:
        """For each measured size, the fastest (seconds, size) at it or larger, the smaller size of equals."""
        cheapest, best = [], (float("inf"), 0)
        for size, seconds in reversed(list(zip(self.sizes, self.seconds))):
            best = min(best, (seconds, size))
            cheapest.append(best)
        return cheapest[::-1]

    def time_at(self, n: int) -> float:
        """Forward seconds at exactly ``n`` new tokens, unpadded: linear between measured sizes (and past the last)."""
        sizes, seconds = self.sizes, self.seconds
        if n <= sizes[0] or len(sizes) == 1:
            return seconds[0] if n <= sizes[0] else seconds[0] * n / sizes[0]
        for (a, ta), (b, tb) in zip(zip(sizes, seconds), zip(sizes[1:], seconds[1:])):
            if n <= b:
                return ta + (tb - ta) * (n - a) / (b - a)
        a, b, ta, tb = sizes[-2], sizes[-1], seconds[-2], seconds[-1]
        return tb + max(tb - ta, 0.0) * (n - b) / (b - a)

    def best_size(self, gains: Sequence[float], extra_tokens: int = 0, limit: int | None = None) -> int:
        """How many of ``gains`` (expected accepted tokens per node, best first) to verify, over ``0 <= n <= limit``:
        the ``n`` that maximises this step's expected tokens per second, ``(1 + sum(gains[:n])) / T(1 + n +
        extra_tokens)``; the 1 is the bonus token and the root occupies a slot."""
        count = len(gains) if limit is None else min(limit, len(gains))
        best, best_worth, total = 0, 1.0 / self.time(1 + extra_tokens), 1.0
        for n in range(1, count + 1):
            total += gains[n - 1]
            value = total / self.time(1 + n + extra_tokens)
            if value > best_worth:
                best, best_worth = n, value
        return best

    def to_json(self) -> dict:
        data = {"sizes": list(self.sizes), "seconds": list(self.seconds), "context": self.context}
        if self.longer is not None:
            data.update(longer=list(self.longer), longer_context=self.longer_context)
        return data

    @classmethod
    def from_json(cls, data: dict) -> CostCurve:
        return cls(sizes=data["sizes"], seconds=data["seconds"], context=data.get("context"),
                   longer=data.get("longer"), longer_context=data.get("longer_context"))
