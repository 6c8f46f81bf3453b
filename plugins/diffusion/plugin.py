"""Entry point ``diffusion``: the ``diffusion`` drafter, the ``dflash``, ``dflash2`` and ``ddtree`` methods, its recipe,
and the reference implementation as the bench baseline ``dflash-ref``."""

from collections.abc import Callable

from specmix import Drafter, Method, Trainer, hookimpl
from specmix.interfaces import Baseline
from specmix.plugins.diffusion.drafter import DiffusionDrafter
from specmix.plugins.diffusion.reference import DFlashReference
from specmix.plugins.diffusion.training.recipe import DiffusionTrainer


@hookimpl
def register_drafters(register: Callable[[str, Callable[..., Drafter]], None]) -> None:
    register("diffusion", DiffusionDrafter)


@hookimpl
def register_methods(register: Callable[[Method], None]) -> None:
    register(Method(
        name="dflash",
        drafter="diffusion",
        builder="chain",
        selector="all",
        verifier="tree",
        description="DFlash: a trained block-diffusion drafter proposes a block; its top-1 chain is verified whole.",
    ))
    register(Method(
        name="dflash2",
        drafter="diffusion",
        builder="chain",
        selector="all",
        verifier="tree",
        options={"drafter": {"arch": "dflash2"}},
        description="DFlash 2: a DFlash 2 checkpoint's block, each position picked given the previous pick by its "
                    "candidate selector, verified whole (-o drafter.weights=DIR or a hub id).",
    ))
    register(Method(
        name="ddtree",
        drafter="diffusion",
        builder="best-first",
        selector="budget",
        verifier="tree",
        description="DDTree: a best-first tree over the diffusion drafter's marginals, sized by the cost curve.",
    ))


@hookimpl
def register_trainers(register: Callable[[str, type[Trainer]], None]) -> None:
    register("diffusion", DiffusionTrainer)


@hookimpl
def register_baselines(register: Callable[[str, Callable[..., Baseline]], None]) -> None:
    register("dflash-ref", DFlashReference)
