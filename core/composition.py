"""Resolved components, the check that they fit, and named presets of them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import attrs

from specmix.errors import CompositionError, ConfigurationError, PluginError
from specmix.interfaces import Component, Drafter, Selector, TreeBuilder, Verifier

KINDS = ("drafter", "builder", "selector", "verifier")


def _options(value) -> Mapping:
    return {kind: dict(value.get(kind, {})) for kind in KINDS if value.get(kind)}


@attrs.frozen
class Method:
    """A named preset: one component of each kind, with options per kind.

    ``default`` marks the method that runs when a caller names none (one per installation).
    """

    name: str
    drafter: str
    builder: str
    selector: str
    verifier: str
    options: Mapping[str, Mapping] = attrs.field(factory=dict, converter=_options, eq=False)
    description: str = ""
    default: bool = False

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

    @contextlib.contextmanager
    def blame(self, call: str) -> Iterator[None]:
        """Run a call into this component: an exception reaches the user with this plugin's name."""
        try:
            yield
        except PluginError:
            raise
        except Exception as exc:
            raise self.error(f"failed in {call}(): {type(exc).__name__}: {exc}") from exc

    def error(self, problem: str) -> PluginError:
        """A :class:`PluginError` saying that this component ``problem``."""
        return PluginError(f"{self.describe()} from plugin '{self.plugin}' {problem}", plugin=self.plugin,
                           component=self.name)

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

    @property
    def needs_cost_curve(self) -> bool:
        return any(slot.component.needs_cost_curve for slot in self.slots)

    @property
    def parts(self) -> tuple[Drafter, TreeBuilder, Selector, Verifier]:
        """The components themselves, in step order."""
        return tuple(slot.component for slot in self.slots)


def check_fit(slots: tuple[Slot, ...]) -> None:
    """Each component consumes only what a component before it in the step produces.

    The drafter comes first, and consumes what the verifier produced on the step before.
    """
    drafter, *rest = slots
    verifier = slots[-1]
    for position, slot in enumerate(slots):
        upstream = [verifier] if slot is drafter else list(slots[:position])
        available = set().union(*(s.component.produces for s in upstream))
        missing = set(slot.component.consumes) - available
        if missing:
            offers = "; ".join(f"{s.describe()} produces {_names(s.component.produces) or 'nothing'}" for s in upstream)
            raise CompositionError(
                f"{slot.describe()} needs {_names(missing)}, which nothing before it provides ({offers})"
            )


def _names(capabilities) -> list[str]:
    return sorted(str(c) for c in capabilities)
