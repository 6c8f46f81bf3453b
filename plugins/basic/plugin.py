"""Entry point ``basic``: the shared components and the ``vanilla`` method."""

from collections.abc import Callable

from specmix import FALLBACK_RANK, Drafter, Method, Selector, TreeBuilder, Verifier, hookimpl
from specmix.plugins.basic.all_selector import AllSelector
from specmix.plugins.basic.best_first_builder import BestFirstBuilder
from specmix.plugins.basic.budget_selector import BudgetSelector
from specmix.plugins.basic.chain_builder import ChainBuilder
from specmix.plugins.basic.drafted_builder import DraftedTreeBuilder
from specmix.plugins.basic.none_drafter import NoDrafter
from specmix.plugins.basic.tree_verifier import TreeVerifier


@hookimpl
def register_drafters(register: Callable[[str, Callable[..., Drafter]], None]) -> None:
    register("none", NoDrafter)


@hookimpl
def register_tree_builders(register: Callable[[str, Callable[..., TreeBuilder]], None]) -> None:
    register("drafted", DraftedTreeBuilder)
    register("chain", ChainBuilder)
    register("best-first", BestFirstBuilder)


@hookimpl
def register_selectors(register: Callable[[str, Callable[..., Selector]], None]) -> None:
    register("all", AllSelector)
    register("budget", BudgetSelector)


@hookimpl
def register_verifiers(register: Callable[[str, Callable[..., Verifier]], None]) -> None:
    register("tree", TreeVerifier)


@hookimpl
def register_methods(register: Callable[[Method], None]) -> None:
    register(Method(
        name="vanilla",
        drafter="none",
        builder="drafted",
        selector="all",
        verifier="tree",
        description="One token per target forward through the full engine: the baseline for overhead.",
        default=FALLBACK_RANK,
    ))
