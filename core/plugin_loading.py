"""Finding and loading plugins: entry points in group ``specmix``, plugin objects given by code,
and what became of each (loaded, disabled by the user, or broken and skipped).

A plugin that fails to import, or whose hooks do not match the hookspecs, is skipped
with one warning naming it, its distribution and the switch that silences it; every
other plugin still loads. In ``strict`` mode (tests, the conformance kit) it is an error.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from importlib import metadata

import attrs
import pluggy

from specmix import hookspecs
from specmix.errors import PluginError, SpecmixWarning

ENTRY_POINT_GROUP = "specmix"
DISABLE_VARIABLE = "SPECMIX_DISABLE_PLUGINS"


@attrs.frozen
class Origin:
    """Where a plugin came from: its distribution and version (None for one registered by code)."""

    distribution: str | None = None
    version: str | None = None

    def describe(self) -> str:
        return f"{self.distribution} {self.version}" if self.distribution else "registered at run time"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager with specmix's hookspecs, and a record of every plugin's origin and fate."""

    def __init__(self, strict: bool):
        super().__init__("specmix")
        self.add_hookspecs(hookspecs)
        self.strict = strict
        self.origins: dict[str, Origin] = {}
        self.disabled: dict[str, Origin] = {}
        self.broken: dict[str, str] = {}  # plugin name -> why it was skipped

    def skip(self, name: str, reason: str, plugin: object | None = None) -> None:
        """Give up on plugin ``name`` (unregistering it): an error in strict mode, else one warning."""
        if plugin is not None and self.is_registered(plugin):
            self.unregister(plugin)
        origin = self.origins.get(name, Origin())
        if self.strict:
            raise PluginError(f"plugin '{name}' {reason} ({origin.describe()})", plugin=name, component="")
        self.broken[name] = reason
        warnings.warn(f"plugin '{name}' {reason} ({origin.describe()}); it was skipped, and the other plugins work "
                      f"(set {DISABLE_VARIABLE}={name} to leave it out)", SpecmixWarning, stacklevel=2)


def plugin_manager(extra_plugins: Iterable[object] = (), entry_points: bool = True, strict: bool = False) -> PluginManager:
    """A manager with the installed entry points (unless ``entry_points`` is False) and ``extra_plugins``."""
    manager = PluginManager(strict)
    blocked = {name.strip() for name in os.environ.get(DISABLE_VARIABLE, "").split(",") if name.strip()}
    for name in blocked:
        manager.set_blocked(name)
    if entry_points:
        _load_entry_points(manager)
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        manager.origins[name] = Origin()
        _register(manager, plugin, name)
    _drop_unmatched_hooks(manager)
    unknown = sorted(blocked - set(manager.disabled))
    if unknown and entry_points:
        installed = ", ".join(sorted(set(manager.origins) | set(manager.disabled))) or "none"
        warnings.warn(f"{DISABLE_VARIABLE} names {', '.join(map(repr, unknown))}, but no installed plugin is called "
                      f"that (installed: {installed})", SpecmixWarning, stacklevel=2)
    return manager


def _load_entry_points(manager: PluginManager) -> None:
    for dist in metadata.distributions():
        for entry_point in dist.entry_points:
            if entry_point.group != ENTRY_POINT_GROUP or entry_point.name in manager.origins:
                continue
            origin = Origin(dist.metadata["Name"], dist.version)
            if manager.is_blocked(entry_point.name):
                manager.disabled[entry_point.name] = origin
                continue
            manager.origins[entry_point.name] = origin
            try:
                plugin = entry_point.load()
            except Exception as exc:
                manager.skip(entry_point.name, f"failed to import: {type(exc).__name__}: {exc}")
                continue
            _register(manager, plugin, entry_point.name)


def _register(manager: PluginManager, plugin: object, name: str) -> None:
    try:
        manager.register(plugin, name=name)
    except (ValueError, pluggy.PluginValidationError) as exc:
        manager.skip(name, f"could not be registered: {exc}")


def _drop_unmatched_hooks(manager: PluginManager) -> None:
    """A hook implementation that matches no hookspec is a typo; its plugin is dropped."""
    while True:
        try:
            manager.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = manager.get_name(exc.plugin) or repr(exc.plugin)
            manager.skip(name, f"has a hook implementation that matches no hook: {exc}", exc.plugin)
