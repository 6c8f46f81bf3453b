"""Plugin loading and the registry that resolves names to components."""

from __future__ import annotations

import difflib
import inspect
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import cast

import attrs
import pluggy

from specmix.capabilities import capabilities
from specmix.composition import KINDS, Composition, Method, Slot
from specmix.errors import CompositionError, ConfigurationError, PluginError, UnknownComponentError
from specmix.interfaces import Drafter, Selector, Trainer, TreeBuilder, Verifier
from specmix.options import check_option_types
from specmix.plugin_loading import DISABLE_VARIABLE, PluginManager, plugin_manager

HOOKS = {
    "drafter": "register_drafters",
    "builder": "register_tree_builders",
    "selector": "register_selectors",
    "verifier": "register_verifiers",
}
INTERFACES = {"drafter": Drafter, "builder": TreeBuilder, "selector": Selector, "verifier": Verifier}
EXTRA_HOOKS = {"method": "register_methods", "trainer": "register_trainers", "baseline": "register_baselines"}


@attrs.frozen
class Registration:
    """A component factory (or a :class:`Method`) and the plugin that registered it."""

    kind: str
    name: str
    factory: object = attrs.field(eq=False)
    plugin: str


@attrs.frozen
class PluginInfo:
    """A plugin, where it came from, and what it registered; or why it is not there (``status``)."""

    name: str
    distribution: str | None
    version: str | None
    registrations: tuple[Registration, ...]
    status: str = "loaded"
    """``loaded``, ``broken`` (skipped: ``reason`` says why) or ``disabled`` (by ``SPECMIX_DISABLE_PLUGINS``)."""
    reason: str = ""


def _capability_problem(component: object, owner: str) -> str | None:
    """What is wrong with the capabilities a component (class or instance) declares, if anything.

    ``owner`` names the component with a ``{declaration}`` placeholder: ``"has drafter 'x' whose {declaration}"``.
    """
    for declaration in ("consumes", "produces", "uses"):
        try:
            capabilities(getattr(component, declaration), owner.format(declaration=declaration))
        except ValueError as exc:
            return str(exc)
    return None


def _rank(registration: Registration) -> int:
    """The rank at which a method's registration offers it as the default (0: not offered)."""
    return cast(Method, registration.factory).default


class _Refused(Exception):
    """A registration a plugin made that cannot be accepted; the message says what it registered."""


def _route(kind: str, names: list[str], options: dict) -> list[tuple[str, dict]]:
    """Each component's options: all of them for a lone one; ``NAME.key`` ones for a component among several."""
    if len(names) == 1:
        return [(names[0], options)]
    routed: dict[str, dict] = {name: {} for name in names}
    for key, value in options.items():
        name, dot, option = key.partition(".")
        if not dot or name not in routed:
            raise ConfigurationError(f"{kind} option {key!r}: with several {kind}s ({', '.join(names)}), name the one it "
                                     f"is for, e.g. {kind}.{names[0]}.{key.split('.')[-1]}=...")
        routed[name][option] = value
    return [(name, routed[name]) for name in names]


class Registry:
    """Every registered component and method, by kind and name.

    A plugin whose registration hook raises, or registers something malformed or a name
    another plugin took first, is skipped as a whole (see :mod:`specmix.plugin_loading`);
    asking for one of its components then says so.
    """

    def __init__(self, manager: PluginManager):
        self.manager = manager
        self.entries: dict[str, dict[str, Registration]] = {kind: {} for kind in (*KINDS, *EXTRA_HOOKS)}
        self.lost: dict[tuple[str, str], str] = {}  # (kind, name) registered by a plugin skipped afterwards
        for kind, hook in (*HOOKS.items(), *EXTRA_HOOKS.items()):
            for impl in getattr(manager.hook, hook).get_hookimpls():
                if impl.plugin_name not in manager.broken:
                    self._collect(kind, impl)

    @classmethod
    def load(cls, extra_plugins: Iterable[object] = (), entry_points: bool = True, strict: bool = False) -> Registry:
        """The installed plugins (unless ``entry_points`` is False) and ``extra_plugins``; ``strict`` makes a
        broken plugin an error instead of a warning."""
        return cls(plugin_manager(extra_plugins, entry_points, strict))

    def _collect(self, kind: str, impl: pluggy.HookImpl) -> None:
        plugin = impl.plugin_name
        check = {"method": self._method_registration, "trainer": self._trainer_registration,
                 "baseline": self._baseline_registration}.get(kind, self._component_registration)

        def register(name: object, factory: object = None) -> None:
            self._add(check(kind, plugin, name, factory))

        try:
            impl.function(register=register)
        except _Refused as exc:
            self._give_up(plugin, impl.plugin, str(exc))
        except Exception as exc:
            self._give_up(plugin, impl.plugin, f"failed in {impl.function.__name__}(): {type(exc).__name__}: {exc}")

    def _give_up(self, name: str, plugin: object, reason: str) -> None:
        self._forget(name)
        self.manager.skip(name, reason, plugin)

    def _forget(self, plugin: str) -> None:
        """Remove what ``plugin`` registered before it failed, remembering the names for error messages."""
        for kind, entries in self.entries.items():
            for name in [name for name, registration in entries.items() if registration.plugin == plugin]:
                del entries[name]
                self.lost[(kind, name)] = plugin

    @staticmethod
    def _method_registration(kind: str, plugin: str, method: object, _unused: object) -> Registration:
        if not isinstance(method, Method):
            raise _Refused(f"registered {method!r} as a method; expected specmix.Method")
        return Registration(kind, method.name, method, plugin)

    @staticmethod
    def _trainer_registration(kind: str, plugin: str, name: object, factory: object) -> Registration:
        if not (isinstance(name, str) and name and inspect.isclass(factory) and issubclass(factory, Trainer)):
            raise _Refused(f"registered trainer {name!r} with {factory!r}; expected a name and a subclass of specmix.Trainer")
        return Registration(kind, name, factory, plugin)

    @staticmethod
    def _baseline_registration(kind: str, plugin: str, name: object, factory: object) -> Registration:
        if not (isinstance(name, str) and name and callable(factory)):
            raise _Refused(f"registered baseline {name!r} with {factory!r}; expected a name and a factory")
        return Registration(kind, name, factory, plugin)

    @staticmethod
    def _component_registration(kind: str, plugin: str, name: object, factory: object) -> Registration:
        if not isinstance(name, str) or not name:
            raise _Refused(f"registered a {kind} without a name")
        interface = INTERFACES[kind]
        if not callable(factory) or (inspect.isclass(factory) and not issubclass(factory, interface)):
            raise _Refused(f"registered {kind} '{name}' with {factory!r}; "
                           f"expected a subclass of {interface.__name__} or a factory returning one")
        problem = _capability_problem(factory, f"has {kind} '{name}' whose {{declaration}}") if inspect.isclass(factory) else None
        if problem:
            raise _Refused(problem)
        return Registration(kind, name, factory, plugin)

    def _add(self, registration: Registration) -> None:
        existing = self.entries[registration.kind].get(registration.name)
        if existing is not None:
            raise _Refused(f"registers {registration.kind} '{registration.name}', which plugin '{existing.plugin}' "
                           "registered first")
        self.entries[registration.kind][registration.name] = registration

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries[kind])

    def get(self, kind: str, name: str) -> Registration:
        try:
            return self.entries[kind][name]
        except KeyError:
            raise UnknownComponentError(self._missing(kind, name)) from None

    def _missing(self, kind: str, name: str) -> str:
        manager = self.manager
        if (kind, name) in self.lost:
            plugin = self.lost[(kind, name)]
            return f"{kind} '{name}' comes from plugin '{plugin}', which is broken: {manager.broken[plugin]}"
        if name in manager.broken:
            return f"{kind} '{name}' is not available: plugin '{name}' is broken: {manager.broken[name]}"
        if name in manager.disabled:
            return (f"{kind} '{name}' is not available: plugin '{name}' ({manager.disabled[name].describe()}) is "
                    f"disabled by {DISABLE_VARIABLE}")
        known = self.names(kind)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        absent = [f"{n} (broken)" for n in sorted(manager.broken)] + [f"{n} (disabled)" for n in sorted(manager.disabled)]
        elsewhere = f"; plugins not loaded: {', '.join(absent)}" if absent else ""
        return f"no {kind} named '{name}' is installed.{hint} Installed: {', '.join(known) or 'none'}{elsewhere}"

    def method(self, name: str) -> Method:
        return cast(Method, self.get("method", name).factory)

    def default_methods(self) -> list[str]:
        """The methods plugins offer as ``default``, highest rank first: the first that runs on a target is its
        default (one offered method per rank)."""
        offered = sorted((r for r in self.entries["method"].values() if _rank(r)), key=lambda r: -_rank(r))
        if not offered:
            raise ConfigurationError("no installed method is offered as the default; name a method or its components")
        for rank, group in itertools.groupby(offered, key=_rank):
            same = list(group)
            if len(same) > 1:
                found = ", ".join(f"'{r.name}' (plugin '{r.plugin}')" for r in same)
                raise ConfigurationError(f"two installed methods are offered as the default at one rank: found "
                                         f"{found} at rank {rank}; name a method or its components")
        return [r.name for r in offered]

    def default_method(self) -> str:
        """The method that runs when a caller names none, where its components run on the target: the one offered
        as ``default`` at the highest rank."""
        return self.default_methods()[0]

    def trainer(self, name: str) -> Trainer:
        """The training recipe ``name``, ready to add its arguments and run."""
        return cast("type[Trainer]", self.get("trainer", name).factory)()

    def create(self, kind: str, name: str, options: Mapping | None = None) -> Slot:
        """Instantiate one component with keyword ``options``."""
        registration = self.get(kind, name)
        factory = cast("Callable[..., object]", registration.factory)
        options = dict(options or {})
        try:
            inspect.signature(factory).bind(**options)
        except TypeError as exc:
            raise ConfigurationError(f"{kind} '{name}' does not accept options {sorted(options)}: {exc}") from None
        check_option_types(factory, options, f"{kind} '{name}'")
        try:
            component = factory(**options)
        except Exception as exc:
            raise PluginError(f"{kind} '{name}' from plugin '{registration.plugin}' failed to start: "
                              f"{type(exc).__name__}: {exc}", plugin=registration.plugin, component=name) from exc
        if not isinstance(component, INTERFACES[kind]):
            raise PluginError(f"{kind} '{name}' from plugin '{registration.plugin}' built {component!r}, "
                              f"not a {INTERFACES[kind].__name__}", plugin=registration.plugin, component=name)
        owner = f"{kind} '{name}' from plugin '{registration.plugin}' has a {{declaration}} that"
        problem = _capability_problem(component, owner)
        if problem:
            raise PluginError(problem, plugin=registration.plugin, component=name)
        return Slot(kind, name, registration.plugin, component)

    def compose(
        self,
        method: str | None = None,
        *,
        drafter: str | None = None,
        builder: str | None = None,
        selector: str | None = None,
        verifier: str | None = None,
        options: Mapping[str, Mapping] | None = None,
    ) -> Composition:
        """Resolve a method and/or explicit components (explicit ones win) and check that they fit.

        ``drafter="ngram+diffusion"`` mixes drafters, with ``builder`` naming one builder for
        each (``"drafted+best-first"``) or one for all; an option for one of several
        components names it first: ``{"drafter": {"ngram.max_ngram": 4}}``.
        """
        chosen = {"drafter": drafter, "builder": builder, "selector": selector, "verifier": verifier}
        merged: dict[str, dict] = {kind: {} for kind in KINDS}
        if method is not None:
            preset = self.method(method)
            for kind in KINDS:
                if chosen[kind] is None or chosen[kind] == getattr(preset, kind):
                    chosen[kind] = getattr(preset, kind)
                    merged[kind].update(preset.options.get(kind, {}))
        for kind, extra in (options or {}).items():
            if kind not in merged:
                raise ConfigurationError(f"options given for unknown kind '{kind}'; kinds are {', '.join(KINDS)}")
            merged[kind].update(extra)
        missing = [kind for kind in KINDS if chosen[kind] is None]
        if missing:
            raise ConfigurationError(f"no {' or '.join(missing)} chosen: give a method or name each component")
        names = {kind: cast(str, chosen[kind]).split("+") for kind in KINDS}
        if len(names["builder"]) == 1:
            names["builder"] = names["builder"] * len(names["drafter"])
        for kind in ("selector", "verifier"):
            if len(names[kind]) > 1:
                raise ConfigurationError(f"a composition has one {kind}, not {chosen[kind]!r}")
        if len(set(names["drafter"])) < len(names["drafter"]):
            raise ConfigurationError(f"drafters {chosen['drafter']!r}: each drafter may appear once in a mix")
        slots = {kind: [self.create(kind, name, options) for name, options in _route(kind, names[kind], merged[kind])]
                 for kind in KINDS}
        return Composition(slots["drafter"], slots["builder"], slots["selector"][0], slots["verifier"][0])

    def compositions(self, options: Mapping[str, Mapping] | None = None, **fixed: str) -> Iterator[Composition]:
        """Every combination of registered components that fits; ``fixed`` pins kinds by name.

        ``options`` apply per kind, so give them only for pinned kinds.
        """
        pools = [[fixed[kind]] if fixed.get(kind) else self.names(kind) for kind in KINDS]
        for names in itertools.product(*pools):
            try:
                yield self.compose(options=options, **dict(zip(KINDS, names)))
            except CompositionError:
                continue

    def plugins(self) -> list[PluginInfo]:
        """Every plugin found: loaded ones with what they registered, broken and disabled ones with why."""
        by_plugin: dict[str, list[Registration]] = {}
        for entries in self.entries.values():
            for registration in entries.values():
                by_plugin.setdefault(registration.plugin, []).append(registration)
        manager, infos = self.manager, []
        for name, origin in manager.origins.items():
            status = "broken" if name in manager.broken else "loaded"
            infos.append(PluginInfo(name, origin.distribution, origin.version, tuple(by_plugin.get(name, ())), status,
                                    manager.broken.get(name, "")))
        for name, origin in manager.disabled.items():
            infos.append(PluginInfo(name, origin.distribution, origin.version, (), "disabled",
                                    f"disabled by {DISABLE_VARIABLE}"))
        return sorted(infos, key=lambda info: info.name)
