"""Resolved components, the check that they fit, and named presets of them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

import attrs

from specmix.errors import CompositionError, ConfigurationError, PluginError
from specmix.interfaces import Component, Drafter, Selector, TreeBuilder, Verifier

KINDS = ("drafter", "builder", "selector", "verifier")
C = TypeVar("C", bound=Component, covariant=True)


def _options(value: Mapping[str, Mapping]) -> dict[str, dict]:
    return {kind: dict(value.get(kind, {})) for kind in KINDS if value.get(kind)}


FALLBACK_RANK = 1
"""The default rank of a method that runs only where no installed method is offered higher (``default=True``)."""


@attrs.frozen
class Method:
    """A named preset: one component of each kind, with options per kind.

    ``default`` offers the method as the one that runs when a caller names none, at a rank:
    0 (or False) not at all; of the installed methods offered, the highest rank runs. The
    built-in ``vanilla`` is offered at :data:`FALLBACK_RANK` (True), so a plugin that offers a
    method at a higher rank replaces plain decoding as the default while it is installed.
    """

    name: str
    drafter: str
    builder: str
    selector: str
    verifier: str
    options: Mapping[str, Mapping] = attrs.field(factory=dict, converter=_options, eq=False)
    description: str = ""
    default: int = attrs.field(default=0, converter=int, validator=attrs.validators.ge(0))

    def __attrs_post_init__(self) -> None:
        unknown = set(self.options) - set(KINDS)
        if unknown:
            raise ConfigurationError(f"method '{self.name}' has options for unknown kinds {sorted(unknown)}")


@attrs.frozen
class Slot(Generic[C]):
    """One component in a composition, with the names an error message needs."""

    kind: str
    name: str
    plugin: str
    component: C = attrs.field(eq=False)

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


Slots = Slot[C] | tuple[Slot[C], ...] | list[Slot[C]]


def _slots(value: Slots[C]) -> tuple[Slot[C], ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _drafters(value: Slots[Drafter]) -> tuple[Slot[Drafter], ...]:
    return _slots(value)


def _builders(value: Slots[TreeBuilder]) -> tuple[Slot[TreeBuilder], ...]:
    return _slots(value)


@attrs.frozen
class Composition:
    """Drafters, a builder for each, a selector and a verifier that fit together (checked on construction).

    Most compositions have one drafter; with several, their trees are merged into one
    before selection (:mod:`specmix.sizing.mixing`).
    """

    drafters: tuple[Slot[Drafter], ...] = attrs.field(converter=_drafters)
    builders: tuple[Slot[TreeBuilder], ...] = attrs.field(converter=_builders)
    selector: Slot[Selector]
    verifier: Slot[Verifier]

    def __attrs_post_init__(self) -> None:
        if not self.drafters or len(self.drafters) != len(self.builders):
            raise CompositionError(f"a composition needs a builder for each drafter; got {len(self.drafters)} drafters "
                                   f"and {len(self.builders)} builders")
        check_fit(self)

    @property
    def drafter(self) -> Slot[Drafter]:
        """The (first) drafter."""
        return self.drafters[0]

    @property
    def builder(self) -> Slot[TreeBuilder]:
        """The (first) drafter's builder."""
        return self.builders[0]

    @property
    def slots(self) -> tuple[Slot[Component], ...]:
        return (*self.drafters, *self.builders, self.selector, self.verifier)

    @property
    def label(self) -> str:
        names = [" & ".join(slot.name for slot in group) for group in (self.drafters, self.builders)]
        if len(self.drafters) > 1:
            names = [f"({name})" for name in names]
        return "+".join([*names, self.selector.name, self.verifier.name])

    @property
    def needs_cost_curve(self) -> bool:
        return any(slot.component.needs_cost_curve for slot in self.slots)


def check_fit(composition: Composition) -> None:
    """Each component consumes only what a component before it in the step produces.

    A drafter comes first, and consumes what the verifier produced on the step before;
    each builder reads its own drafter; the selector and verifier read what any drafter
    and builder produced.
    """
    verifier = composition.verifier
    upstreams: list[tuple[Slot[Component], list[Slot[Component]]]] = [(drafter, [verifier]) for drafter in composition.drafters]
    upstreams += [(builder, [drafter]) for drafter, builder in zip(composition.drafters, composition.builders)]
    ahead = [*composition.drafters, *composition.builders]
    upstreams += [(composition.selector, ahead), (verifier, [*ahead, composition.selector])]
    for slot, upstream in upstreams:
        available = set().union(*(s.component.produces for s in upstream))
        missing = set(slot.component.consumes) - available
        if missing:
            offers = "; ".join(f"{s.describe()} produces {_names(s.component.produces) or 'nothing'}" for s in upstream)
            raise CompositionError(f"{slot.describe()} needs {_names(missing)}, which nothing before it provides "
                                   f"({offers})")


def _names(capabilities: Iterable[object]) -> list[str]:
    return sorted(str(c) for c in capabilities)
