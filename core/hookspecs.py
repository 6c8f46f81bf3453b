"""The extension manual: every hook specmix calls, read top to bottom.

A plugin is a module (or object) with functions marked ``@specmix.hookimpl`` and named
after the hooks below, declared in its distribution's entry points::

    [project.entry-points.specmix]
    ngram = "specmix_ngram.plugin"

Each hook receives a ``register`` callback and calls it once per component:
``register(name, factory)``, where ``factory(**options)`` returns an instance of the
matching interface from :mod:`specmix.interfaces` (usually ``factory`` is the class).
Names are global per kind: two plugins registering the same name is an error that
names both. A hook implementation that matches no hook below is an error too. Set
``SPECMIX_DISABLE_PLUGINS=name,other`` to keep named plugins from loading.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from specmix.composition import Method
from specmix.interfaces import Baseline, Drafter, Selector, Trainer, TreeBuilder, Verifier

hookspec = pluggy.HookspecMarker("specmix")
hookimpl = pluggy.HookimplMarker("specmix")


@hookspec
def register_drafters(register: Callable[[str, Callable[..., Drafter]], None]) -> None:
    """Register :class:`~specmix.interfaces.Drafter` factories: ``register("ngram", NgramDrafter)``."""


@hookspec
def register_tree_builders(register: Callable[[str, Callable[..., TreeBuilder]], None]) -> None:
    """Register :class:`~specmix.interfaces.TreeBuilder` factories: ``register("chain", ChainBuilder)``."""


@hookspec
def register_selectors(register: Callable[[str, Callable[..., Selector]], None]) -> None:
    """Register :class:`~specmix.interfaces.Selector` factories: ``register("budget", BudgetSelector)``."""


@hookspec
def register_verifiers(register: Callable[[str, Callable[..., Verifier]], None]) -> None:
    """Register :class:`~specmix.interfaces.Verifier` factories: ``register("tree", TreeVerifier)``."""


@hookspec
def register_methods(register: Callable[[Method], None]) -> None:
    """Register named presets: ``register(specmix.Method(name="vanilla", drafter="none", ...))``.

    A method names one component of each kind and their options; components may come
    from other plugins, and the composition is checked when the method is used. A method
    offered as ``default`` (a rank; ``True`` is the fallback rank the built-in ``vanilla``
    has) runs when a caller names none, the highest-ranked one where several are offered.
    """


@hookspec
def register_trainers(register: Callable[[str, type[Trainer]], None]) -> None:
    """Register training recipes, run as ``specmix train NAME``: ``register("diffusion", DiffusionTrainer)``.

    A :class:`~specmix.interfaces.Trainer` subclass, built without arguments, with a
    ``description``, ``add_arguments(parser)`` (an argparse parser) and ``run(args) -> int``.
    Recipes must be resumable: a second run with the same output directory continues
    where the first stopped.
    """


@hookspec
def register_baselines(register: Callable[[str, Callable[..., Baseline]], None]) -> None:
    """Register other implementations to time beside specmix's methods in ``specmix bench``, as ``hf`` is:
    ``register("dflash-ref", DFlashReference)``.

    ``factory(model, tokenizer, settings, options)`` builds a :class:`~specmix.interfaces.Baseline`
    for the loaded target, the run's ``DecodeSettings`` and the options given in brackets
    (``dflash-ref[drafter.weights=DIR]`` gives ``{"drafter": {"weights": DIR}}``); a
    problem (a package missing) is a ``ConfigurationError`` saying what to install.
    """
