"""Entry point ``ptd``: the ``ptd`` drafter and the ``ptd`` and ``ptd-branches`` methods."""

from collections.abc import Callable

from specmix import Drafter, Method, hookimpl
from specmix.plugins.ptd.drafter import PTDDrafter


@hookimpl
def register_drafters(register: Callable[[str, Callable[..., Drafter]], None]) -> None:
    register("ptd", PTDDrafter)


@hookimpl
def register_methods(register: Callable[[Method], None]) -> None:
    register(Method(
        name="ptd",
        drafter="ptd",
        builder="drafted",
        selector="budget",
        verifier="tree",
        description="Progressive Tree Drafting: the target drafts for itself in its own verification pass.",
    ))
    register(Method(
        name="ptd-branches",
        drafter="ptd",
        builder="drafted",
        selector="budget",
        verifier="tree",
        options={"drafter": {"linked_spine": False, "max_children": 1}},
        description="PTD's ablation: independent linear branches (Self-Draft / lookahead-like) instead of a tree.",
    ))
