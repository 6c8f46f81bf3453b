"""The hardware cost curve T(N): the target's forward time for N new tokens, measured on the device in use."""

from __future__ import annotations

import bisect
import functools
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import attrs
import torch

from specmix.errors import ConfigurationError, SpecmixWarning
from specmix.identity import measured_name
from specmix.paths import cache_dir, write_atomically
from specmix.target import Target
from specmix.tree import TokenTree

# Dense at the small end, where CPU forward time jumps between neighbouring sizes (3 -> 4 here).
DEFAULT_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
CONTEXT, LONGER_CONTEXT = 256, 1024
"""The cache lengths curves are measured over: long prompts cost more per position."""


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

    sizes: tuple[int, ...] = attrs.field(converter=tuple)
    seconds: tuple[float, ...] = attrs.field(converter=tuple, validator=_check_curve)
    context: int | None = None
    """The cache length ``seconds`` were measured over (None: not recorded)."""
    longer: tuple[float, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple),
                                                   validator=_check_longer)
    """Seconds at the same sizes over a cache of ``longer_context`` tokens (None: measured over one length)."""
    longer_context: int | None = None

    def at(self, context: int) -> CostCurve:
        """The curve over a cache of ``context`` tokens: this one if it was measured over a single length,
        else interpolated (and past either length, extrapolated) linearly between the two, never below a
        quarter of the shorter's times."""
        if self.longer is None:
            return self
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

    def best_size(self, gains: Sequence[float], extra_tokens: int = 0, limit: int | None = None,
                  rate: float | None = None) -> int:
        """How many of ``gains`` (expected accepted tokens per node, best first) to verify, over ``0 <= n <= limit``.

        Without ``rate``, maximises this step's expected tokens per second,
        ``(1 + sum(gains[:n])) / T(1 + n + extra_tokens)``; the 1 is the bonus token and the root occupies a slot.
        With ``rate``, the tokens per second steps bring overall (:mod:`specmix.step_rate`), maximises the step's
        surplus at that rate, ``1 + sum(gains[:n]) - rate * T(1 + n + extra_tokens)``, which over many steps
        gives more tokens per second than each step's own best ratio.
        """
        count = len(gains) if limit is None else min(limit, len(gains))
        worth = (lambda tokens, seconds: tokens / seconds) if rate is None else (
            lambda tokens, seconds: tokens - rate * seconds)
        best, best_worth, total = 0, worth(1.0, self.time(1 + extra_tokens)), 1.0
        for n in range(1, count + 1):
            total += gains[n - 1]
            value = worth(total, self.time(1 + n + extra_tokens))
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


def measure(target: Target, sizes: Sequence[int] = DEFAULT_SIZES, context: int = CONTEXT, repeats: int = 7,
            longer: int | None = LONGER_CONTEXT) -> CostCurve:
    """Fastest of ``repeats`` forward times of a causal chain of N new tokens over a ``context``-token cache,
    and over a ``longer`` one too where the model's context has room (None: over one length only).

    The fastest, not the median: other work on the machine only ever adds time. Each is a
    tree forward whose root's argmax is then read, as in a step that accepts nothing: where
    the target applies its LM head only to the rows a walk reads (:attr:`Target.lazy_head`),
    the head runs on that row alone (or is screened, :attr:`Target.screen`).
    """
    sizes = _measurable(target, sizes)
    context, longer = _contexts(target, sizes, context, longer)
    short = _times(target, sizes, context, repeats)
    if longer is None:
        return CostCurve(sizes=sizes, seconds=short, context=context)
    return CostCurve(sizes=sizes, seconds=short, context=context, longer=_times(target, sizes, longer, repeats),
                     longer_context=longer)


def _contexts(target: Target, sizes: Sequence[int], context: int, longer: int | None) -> tuple[int, int | None]:
    """The cache lengths that fit beside the largest size (the longer one None where it would not be longer)."""
    room = target.max_length - sizes[-1] - 1
    context = max(1, min(context, room))
    return context, None if longer is None or min(longer, room) <= context else min(longer, room)


def _times(target: Target, sizes: Sequence[int], context: int, repeats: int) -> list[float]:
    generator = torch.Generator().manual_seed(0)
    target.reset()
    target.prefill(torch.randint(target.vocab_size, (context,), generator=generator))
    chains = [torch.randint(target.vocab_size, (n,), generator=generator).tolist() for n in sizes]
    trees = [TokenTree.from_paths(chain[0], [chain[1:]] if len(chain) > 1 else [], target.vocab_size)
             for chain in chains]
    samples = [[] for _ in sizes]
    padding, target.pad_to = target.pad_to, None  # each size at its own
    # Rounds over every size, not every repeat of one size in a row: a stretch of other work on the machine
    # then slows one round of all sizes, which the fastest of the rounds leaves out, instead of every sample
    # of one size: a false dip or step the selector would chase. A size faster than a smaller one is kept as
    # measured (matrix kernels change with the row count); forwards are then padded up to it.
    for round_ in range(repeats + 1):  # the first round warms up
        for samples_of, tree in zip(samples, trees):
            start = time.perf_counter()
            target.forward_tree(tree).node_logits.argmax(0)  # what a step that accepts nothing pays
            if round_:
                samples_of.append(time.perf_counter() - start)
            target.compact(torch.arange(0))
    target.reset()
    target.pad_to = padding
    return [min(times) for times in samples]


def _measurable(target: Target, sizes: Sequence[int]) -> list[int]:
    return [n for n in sizes if n + 2 <= target.max_length]


def _cache_file(target: Target, cache=None) -> Path:
    """Where this target's curve is kept: named by what determines it (the model's architecture and
    weights, the device (a CPU by its kind), dtype, thread count, torch version, and whether the LM head runs on every
    row), not by where the model was loaded from."""
    # Measured with the LM head on a row, not on every token, and its argmax screened in float16 where it is.
    head = ("-rowhead" if target.lazy_head else "") + ("-screened" if target.screen is not None else "")
    # "rounds": measured in rounds over all sizes; "raw": each size's own time, not raised to a smaller size's
    # (such a curve never pads); a curve measured otherwise is measured again.
    # Forwards over its own choice of matrix kernels (specmix.row_kernels), named by that choice.
    name = f"{measured_name(target.model)}{head}{target.kernels_name}-rounds-raw"
    return cache_dir(cache) / "cost-curves" / f"{name}-torch{torch.__version__}.json"


def _cached(path: Path, sizes: list[int], longer: int | None) -> CostCurve | None:
    """The curve stored at ``path`` if it is readable and measured at ``sizes`` (and over a longer cache when
    ``longer`` says one fits); a damaged file is reported once."""
    if not path.exists():
        return None
    try:
        curve = CostCurve.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and ConfigurationError are ValueErrors
        warnings.warn(f"the cost curve cached in {path} is unreadable ({exc}); measuring it again", SpecmixWarning,
                      stacklevel=3)
        return None
    if list(curve.sizes) != sizes or (curve.longer is None and longer is not None):
        return None  # measured at other sizes, or over one cache length where two fit
    return curve


def cost_curve_for(target: Target, cache=None, remeasure: bool = False) -> CostCurve:
    """The cached curve for this model, device and dtype, measured and saved on first use.

    Curves live in ``cost-curves/`` under the cache directory (``cache``, else
    ``$SPECMIX_CACHE_DIR``, else ``~/.cache/specmix``). A curve measured at other sizes
    than today's defaults, or a damaged file, is measured again; files are replaced
    atomically, so an interrupted measurement never leaves half a file.
    """
    path = _cache_file(target, cache)
    sizes = _measurable(target, DEFAULT_SIZES)
    curve = None if remeasure else _cached(path, sizes, _contexts(target, sizes, CONTEXT, LONGER_CONTEXT)[1])
    if curve is not None:
        return curve
    print(f"specmix: measuring this model's forward time T(N) on {target.device.type} (once; cached in {path.parent})",
          file=sys.stderr, flush=True)
    curve = measure(target)
    write_atomically(path, json.dumps(curve.to_json(), indent=1))
    return curve
