"""The knobs of the sizing parts the engine builds itself, set per decoder: ``Decoder(..., sizing={...})``.

Each part keeps its knobs, with their defaults, as its constructor's parameters; this
module only checks a decoder's settings against them and builds the parts. A part that can
be switched off takes ``False`` (the engine then does without it), one left out is built
with its defaults. On the command line and in ``specmix bench`` they are written
``sizing.PART.KNOB=VALUE`` and ``sizing.PART=false``, e.g. ``mix[sizing.payoff.trial=1]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from specmix.errors import ConfigurationError
from specmix.options import check_option_types

P = TypeVar("P")

PARTS = ("calibration", "mix", "payoff", "step_costs", "step_rate")
"""The parts, by the name their knobs go under: :class:`~.calibration.Calibration`, :class:`~.mixing.Mix`,
:class:`~.payoff.DrafterPayoff`, :class:`~.step_costs.StepCosts` and :class:`~.step_rate.StepRate`."""
SWITCHED = frozenset({"payoff", "step_costs", "step_rate"})
"""The parts a decoder can do without."""


class Sizing:
    """A decoder's sizing settings, checked: per part, its knobs, or None where it is switched off."""

    def __init__(self, settings: Mapping[str, Mapping[str, Any] | bool] | None = None):
        self.knobs: dict[str, dict[str, Any] | None] = {}
        for part, value in (settings or {}).items():
            if part not in PARTS:
                raise ConfigurationError(f"sizing has no part {part!r}; its parts are {', '.join(PARTS)}")
            if value is False and part not in SWITCHED:
                raise ConfigurationError(f"sizing.{part} cannot be switched off; those that can are "
                                         f"{', '.join(sorted(SWITCHED))}")
            self.knobs[part] = (None if value is False else {}) if isinstance(value, bool) else dict(value)

    @classmethod
    def from_assignments(cls, assignments: Mapping[str, object]) -> Sizing:
        """From ``{"payoff.trial": 1, "step_rate": False}``, the keys as written after ``sizing.``."""
        settings: dict[str, Any] = {}
        for key, value in assignments.items():
            part, _, knob = key.partition(".")
            current = settings.setdefault(part, {})
            if not knob:
                if not isinstance(value, bool):
                    raise ConfigurationError(f"sizing.{part} takes true or false, got {value!r}; a knob is "
                                             f"sizing.{part}.KNOB=VALUE")
                settings[part] = value if value is False or not current else current
            elif current is False:
                raise ConfigurationError(f"sizing.{part} is switched off and given knobs")
            else:
                current[knob] = value
        return cls(settings)

    def build(self, part: str, factory: Callable[..., P], *args: Any) -> P | None:
        """``factory(*args)`` with the part's knobs, or None where it is switched off."""
        knobs = self.knobs.get(part, {})
        if knobs is None:
            return None
        check_option_types(factory, knobs, f"sizing.{part}")
        try:
            return factory(*args, **knobs)
        except TypeError as exc:
            raise ConfigurationError(f"sizing.{part}: {exc}") from None
