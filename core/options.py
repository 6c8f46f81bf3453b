"""Component choices and options written as text: ``selector=budget`` and ``selector.budget=8``."""

from __future__ import annotations

import json

from specmix.composition import KINDS
from specmix.errors import ConfigurationError


def parse_value(raw: str):
    """An option's value: JSON when it parses (numbers, true, null, lists), else the text itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_assignment(text: str) -> tuple[str, str | None, object]:
    """``kind=name`` as ``(kind, None, name)`` and ``kind.key=value`` as ``(kind, key, value)``."""
    path, equals, raw = text.partition("=")
    kind, _, key = path.partition(".")
    if not equals or not raw or not kind:
        raise ConfigurationError(f"{text!r}: expected kind=component or kind.key=value, e.g. selector.budget=8")
    if kind not in KINDS:
        raise ConfigurationError(f"{text!r}: {kind!r} is not a kind; kinds are {', '.join(KINDS)}")
    if not key:
        return kind, None, raw
    return kind, key, parse_value(raw)
