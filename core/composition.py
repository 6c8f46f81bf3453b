"""Resolved components, the check that they fit, and named presets of them."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from specmix.errors import CompositionError, ConfigurationError, PluginError
from specmix.interfaces import ENGINE_PROVIDES, Component

KINDS = ("drafter", "builder", "selector", "verifier")


def _options(value) -> Mapping:
    return {kind: dict(value.get(kind, {})) for kind in KINDS if value.get(kind)}


@attrs.frozen
class Method:
    """A named preset: one component of each kind, with options per kind."""

    name: str
    drafter: str
    builder: str
    selector: str
    verifier: str
    options: Mapping[str, Mapping] = attrs.field(factory=dict, converter=_options, eq=False)
    description: str = ""

    def __attrs_post_init__(self):
        unknown = set(self.options) - set(KINDS)
        if unknown:
            raise ConfigurationError(f"method '{self.name}' has options for unknown kinds {sorted(unknown)}")


@attrs.frozen
class Slot:
    """One component in a composition, with the names an error message needs."""

    kind: str
    name: str
    plugin: str
    component: Component = attrs.field(eq=False)

    def call(self, method: str, *args):
        """Call ``component.method(*args)``; an exception reaches the user with this plugin's name."""
        try:
            return getattr(self.component, method)(*args)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"{self.kind} '{self.name}' from plugin '{self.plugin}' failed in {method}(): "
                f"{type(exc).__name__}: {exc}",
                plugin=self.plugin,
                component=self.name,
            ) from exc

    def describe(self) -> str:
        return f"{self.kind} '{self.name}'"


@attrs.frozen
class Composition:
    """A drafter, builder, selector and verifier that fit together (checked on construction)."""

    drafter: Slot
    builder: Slot
    selector: Slot
    verifier: Slot

    def __attrs_post_init__(self):
        check_fit(self.slots)

    @property
    def slots(self) -> tuple[Slot, Slot, Slot, Slot]:
        return (self.drafter, self.builder, self.selector, self.verifier)

    @property
    def label(self) -> str:
        return "+".join(slot.name for slot in self.slots)

    def consumes(self, capability: str) -> bool:
        return any(capability in slot.component.consumes for slot in self.slots)


def check_fit(slots: tuple[Slot, ...]) -> None:
    """Each component consumes only what a component before it in the step produces.

    The drafter comes first, and consumes what the verifier produced on the step before.
    """
    drafter, *rest = slots
    verifier = slots[-1]
    for position, slot in enumerate(slots):
        upstream = [verifier] if slot is drafter else list(slots[:position])
        available = set(ENGINE_PROVIDES).union(*(s.component.produces for s in upstream))
        missing = set(slot.component.consumes) - available
        if missing:
            offers = "; ".join(f"{s.describe()} produces {sorted(s.component.produces) or 'nothing'}" for s in upstream)
            raise CompositionError(
                f"{slot.describe()} needs {sorted(missing)}, which nothing before it provides ({offers})"
            )

