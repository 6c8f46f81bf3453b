"""Entry point ``retrieval``: the ``corpus`` drafter, the ``corpus`` method, and its recipe ``specmix train corpus``."""

from collections.abc import Callable

from specmix import Drafter, Method, Trainer, hookimpl
from specmix.plugins.retrieval.drafter import CorpusDrafter
from specmix.plugins.retrieval.recipe import CorpusTrainer


@hookimpl
def register_drafters(register: Callable[[str, Callable[..., Drafter]], None]) -> None:
    register("corpus", CorpusDrafter)


@hookimpl
def register_methods(register: Callable[[Method], None]) -> None:
    register(Method(
        name="corpus",
        drafter="corpus",
        builder="drafted",
        selector="budget",
        verifier="tree",
        description="Retrieval: what followed the context's longest match in the target's own earlier answers, "
                    "cut by the cost curve.",
    ))


@hookimpl
def register_trainers(register: Callable[[str, type[Trainer]], None]) -> None:
    register("corpus", CorpusTrainer)
