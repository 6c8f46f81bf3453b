"""Typed attrs converters that keep a field's values as a tuple (mypy reads ``converter=tuple`` as untyped)."""

from collections.abc import Iterable


def ints(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def floats(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(values)
