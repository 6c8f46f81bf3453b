"""Plugin loading and the registry that resolves names to components."""

from __future__ import annotations

import difflib
import inspect
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping
from importlib import metadata

import attrs
import pluggy

from specmix import hookspecs
from specmix.capabilities import capabilities
from specmix.composition import KINDS, Composition, Method, Slot
from specmix.errors import CompositionError, ConfigurationError, PluginError, UnknownComponentError
from specmix.interfaces import Drafter, Selector, Trainer, TreeBuilder, Verifier

ENTRY_POINT_GROUP = "specmix"
DISABLE_VARIABLE = "SPECMIX_DISABLE_PLUGINS"
HOOKS = {
    "drafter": "register_drafters",
    "builder": "register_tree_builders",
    "selector": "register_selectors",
    "verifier": "register_verifiers",
}
INTERFACES = {"drafter": Drafter, "builder": TreeBuilder, "selector": Selector, "verifier": Verifier}


@attrs.frozen
class Registration:
    """A component factory (or a :class:`Method`) and the plugin that registered it."""

    kind: str
    name: str
    factory: object = attrs.field(eq=False)
    plugin: str


@attrs.frozen
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    registrations: tuple[Registration, ...]


def plugin_manager(extra_plugins: Iterable[object] = (), entry_points: bool = True) -> pluggy.PluginManager:
    """A manager with the hookspecs, installed entry points (unless disabled) and ``extra_plugins``."""
    manager = pluggy.PluginManager("specmix")
    manager.add_hookspecs(hookspecs)
    manager.distributions = {}
    for name in filter(None, (n.strip() for n in os.environ.get(DISABLE_VARIABLE, "").split(","))):
        manager.set_blocked(name)
    if entry_points:
        _load_entry_points(manager)
    for plugin in extra_plugins:
        manager.register(plugin, name=getattr(plugin, "__name__", None) or type(plugin).__name__)
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        name = manager.get_name(exc.plugin) or repr(exc.plugin)
        raise PluginError(f"plugin '{name}' has a hook implementation that matches no hook: {exc}",
                          plugin=name, component="") from exc
    return manager


def _load_entry_points(manager: pluggy.PluginManager) -> None:
    for dist in metadata.distributions():
        for entry_point in dist.entry_points:
            if entry_point.group != ENTRY_POINT_GROUP:
                continue
            if manager.is_blocked(entry_point.name) or manager.has_plugin(entry_point.name):
                continue
            try:
                plugin = entry_point.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin '{entry_point.name}' from {dist.metadata['Name']} failed to load: {exc}"
                    f" (set {DISABLE_VARIABLE}={entry_point.name} to skip it)",
                    plugin=entry_point.name,
                    component="",
                ) from exc
            manager.register(plugin, name=entry_point.name)
            manager.distributions[entry_point.name] = (dist.metadata["Name"], dist.version)


def _check_capabilities(component, owner: str, plugin: str, name: str) -> None:
    """Every capability a component (class or instance) declares must be one specmix knows."""
    for declaration in ("consumes", "produces", "uses"):
        try:
            capabilities(getattr(component, declaration), f"{owner} in {declaration}")
        except ValueError as exc:
            raise PluginError(str(exc), plugin=plugin, component=name) from None


class Registry:
    """Every registered component and method, by kind and name."""

    def __init__(self, manager: pluggy.PluginManager):
        self.manager = manager
        self.entries: dict[str, dict[str, Registration]] = {kind: {} for kind in (*KINDS, "method", "trainer")}
        for kind, hook in (*HOOKS.items(), ("method", "register_methods"), ("trainer", "register_trainers")):
            for impl in getattr(manager.hook, hook).get_hookimpls():
                self._collect(kind, impl)

    @classmethod
    def load(cls, extra_plugins: Iterable[object] = (), entry_points: bool = True) -> Registry:
        return cls(plugin_manager(extra_plugins, entry_points))

    def _collect(self, kind: str, impl) -> None:
        plugin = impl.plugin_name
        check = {"method": self._method_registration, "trainer": self._trainer_registration}.get(
            kind, self._component_registration)

        def register(name, factory=None):
            self._add(check(kind, plugin, name, factory))

        try:
            impl.function(register=register)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin '{plugin}' failed in {impl.function.__name__}(): {type(exc).__name__}: {exc}",
                              plugin=plugin, component="") from exc

    @staticmethod
    def _method_registration(kind: str, plugin: str, method, _unused) -> Registration:
        if not isinstance(method, Method):
            raise PluginError(f"plugin '{plugin}' registered {method!r} as a method; expected specmix.Method",
                              plugin=plugin, component=str(method))
        return Registration(kind, method.name, method, plugin)

    @staticmethod
    def _trainer_registration(kind: str, plugin: str, name, factory) -> Registration:
        if not (isinstance(name, str) and name and inspect.isclass(factory) and issubclass(factory, Trainer)):
            raise PluginError(f"plugin '{plugin}' registered trainer {name!r} with {factory!r}; "
                              "expected a name and a subclass of specmix.Trainer", plugin=plugin, component=str(name))
        return Registration(kind, name, factory, plugin)

    @staticmethod
    def _component_registration(kind: str, plugin: str, name, factory) -> Registration:
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin '{plugin}' registered a {kind} without a name", plugin=plugin, component="")
        interface = INTERFACES[kind]
        if not callable(factory) or (inspect.isclass(factory) and not issubclass(factory, interface)):
            raise PluginError(f"plugin '{plugin}' registered {kind} '{name}' with {factory!r}; "
                              f"expected a subclass of {interface.__name__} or a factory returning one",
                              plugin=plugin, component=name)
        if inspect.isclass(factory):
            _check_capabilities(factory, f"{kind} '{name}' from plugin '{plugin}'", plugin, name)
        return Registration(kind, name, factory, plugin)

    def _add(self, registration: Registration) -> None:
        existing = self.entries[registration.kind].get(registration.name)
        if existing is not None:
            raise PluginError(
                f"{registration.kind} '{registration.name}' is registered by both plugin '{existing.plugin}' "
                f"and plugin '{registration.plugin}'",
                plugin=registration.plugin,
                component=registration.name,
            )
        self.entries[registration.kind][registration.name] = registration

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries[kind])

    def get(self, kind: str, name: str) -> Registration:
        try:
            return self.entries[kind][name]
        except KeyError:
            known = self.names(kind)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UnknownComponentError(
                f"no {kind} named '{name}' is installed.{hint} Installed: {', '.join(known) or 'none'}"
            ) from None

    def method(self, name: str) -> Method:
        return self.get("method", name).factory

    def default_method(self) -> str:
        """The name of the method that runs when a caller names none: the one a plugin marks ``default``."""
        marked = [r for r in self.entries["method"].values() if r.factory.default]
        if len(marked) != 1:
            found = ", ".join(f"'{r.name}' (plugin '{r.plugin}')" for r in marked) or "none"
            raise ConfigurationError(f"exactly one installed method must be marked default, found {found}; "
                                     "name a method or its components")
        return marked[0].name

    def trainer(self, name: str) -> Trainer:
        """The training recipe ``name``, ready to add its arguments and run."""
        return self.get("trainer", name).factory()

    def create(self, kind: str, name: str, options: Mapping | None = None) -> Slot:
        """Instantiate one component with keyword ``options``."""
        registration = self.get(kind, name)
        options = dict(options or {})
        try:
            inspect.signature(registration.factory).bind(**options)
        except TypeError as exc:
            raise ConfigurationError(f"{kind} '{name}' does not accept options {sorted(options)}: {exc}") from None
        try:
            component = registration.factory(**options)
        except Exception as exc:
            raise PluginError(f"{kind} '{name}' from plugin '{registration.plugin}' failed to start: "
                              f"{type(exc).__name__}: {exc}", plugin=registration.plugin, component=name) from exc
        if not isinstance(component, INTERFACES[kind]):
            raise PluginError(f"{kind} '{name}' from plugin '{registration.plugin}' built {component!r}, "
                              f"not a {INTERFACES[kind].__name__}", plugin=registration.plugin, component=name)
        _check_capabilities(component, f"{kind} '{name}' from plugin '{registration.plugin}'", registration.plugin, name)
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
        """Resolve a method and/or explicit components (explicit ones win) and check that they fit."""
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
        slots = {kind: self.create(kind, chosen[kind], merged[kind]) for kind in KINDS}
        return Composition(**slots)

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
        """Installed plugins with their distribution, version and what each registered."""
        by_plugin: dict[str, list[Registration]] = {}
        for entries in self.entries.values():
            for registration in entries.values():
                by_plugin.setdefault(registration.plugin, []).append(registration)
        infos = []
        for name, plugin in self.manager.list_name_plugin():
            if plugin is None:  # blocked
                continue
            distribution, version = self.manager.distributions.get(name, (None, None))
            infos.append(PluginInfo(name, distribution, version, tuple(by_plugin.get(name, ()))))
        return sorted(infos, key=lambda info: info.name)
