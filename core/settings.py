"""Decode settings, validated when made."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import attrs

from specmix.errors import ConfigurationError


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigurationError(message)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def _stop_ids(value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not all(_is_int(v) for v in value):
        raise ConfigurationError(f"stop_ids must be a sequence of token ids, e.g. (2,) or [], got {_shown(value)}")
    return tuple(int(v) for v in value)


@attrs.frozen
class DecodeSettings:
    """How to decode: length, sampling, seed and stop tokens.

    ``temperature == 0`` means greedy. ``top_k`` and ``top_p`` shape the sampling
    distribution exactly as transformers' warpers do. ``stop_ids=None`` stops on the
    model's own EOS ids; an explicit tuple replaces them (``()`` never stops early).
    """

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop_ids: tuple[int, ...] | None = attrs.field(default=None, converter=_stop_ids)

    def __attrs_post_init__(self) -> None:
        _check(_is_int(self.max_new_tokens) and self.max_new_tokens > 0,
               f"max_new_tokens must be a positive integer, got {_shown(self.max_new_tokens)}")
        _check(_is_real(self.temperature) and self.temperature >= 0,
               f"temperature must be a finite number >= 0 (0 is greedy), got {_shown(self.temperature)}")
        _check(self.top_k is None or (_is_int(self.top_k) and self.top_k >= 1),
               f"top_k must be a positive integer or None, got {_shown(self.top_k)}")
        _check(self.top_p is None or (_is_real(self.top_p) and 0 < self.top_p <= 1),
               f"top_p must lie in (0, 1] or be None, got {_shown(self.top_p)}")
        _check(self.seed is None or _is_int(self.seed), f"seed must be an integer or None, got {_shown(self.seed)}")
        _check(all(token >= 0 for token in self.stop_ids or ()), f"stop ids must be >= 0, got {self.stop_ids}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
