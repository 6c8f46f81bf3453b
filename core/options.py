"""Component choices and options written as text: ``selector=budget`` and ``selector.budget=8``."""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping

from specmix.composition import KINDS
from specmix.errors import ConfigurationError

_PLAIN = {int: "int", float: "float", bool: "bool", str: "str", type(None): "None"}


PYTHON_CONSTANTS = {"None": None, "True": True, "False": False}
"""Python's spellings, which users type as often as JSON's null, true and false."""


def parse_value(raw: str) -> object:
    """An option's value: JSON when it parses (numbers, true, null, lists), None/True/False, else the text itself."""
    if raw in PYTHON_CONSTANTS:
        return PYTHON_CONSTANTS[raw]
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


def _accepts(kind: type, value: object) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_option_types(factory: Callable[..., object], options: Mapping[str, object], owner: str) -> None:
    """Options against the plain types (int, float, bool, str, None) ``factory`` annotates its parameters with.

    A parameter with any other annotation, or none, takes what it is given.
    """
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # annotations that do not evaluate here: nothing to check against
        return
    for key, value in options.items():
        hint = hints.get(key)
        union = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        if not union or not all(kind in _PLAIN for kind in union):
            continue
        if not any(_accepts(kind, value) for kind in union):
            expected = " or ".join(_PLAIN[kind] for kind in union)
            raise ConfigurationError(f"{owner} option {key} expects {expected}, got {value!r} ({type(value).__name__})")
