"""Decode settings, validated when made."""

from __future__ import annotations

import attrs

from specmix.errors import ConfigurationError


def _check(condition: bool, message: str):
    if not condition:
        raise ConfigurationError(message)


def _stop_ids(value):
    return None if value is None else tuple(int(v) for v in value)


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

    def __attrs_post_init__(self):
        _check(isinstance(self.max_new_tokens, int) and self.max_new_tokens > 0,
               f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        _check(self.temperature >= 0, f"temperature must be >= 0 (0 is greedy), got {self.temperature!r}")
        _check(self.top_k is None or (isinstance(self.top_k, int) and self.top_k >= 1),
               f"top_k must be a positive integer or None, got {self.top_k!r}")
        _check(self.top_p is None or 0 < self.top_p <= 1, f"top_p must lie in (0, 1] or be None, got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0
