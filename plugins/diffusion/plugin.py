"""Entry point ``diffusion``: the ``diffusion`` drafter, the ``dflash`` and ``ddtree`` methods, and its recipe."""

from specmix import Method, hookimpl
from specmix.plugins.diffusion.drafter import DiffusionDrafter
from specmix.plugins.diffusion.training.recipe import DiffusionTrainer


@hookimpl
def register_drafters(register):
    register("diffusion", DiffusionDrafter)


@hookimpl
def register_methods(register):
    register(Method(
        name="dflash",
        drafter="diffusion",
        builder="chain",
        selector="all",
        verifier="tree",
        description="DFlash: a trained block-diffusion drafter proposes a block; its top-1 chain is verified whole.",
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
def register_trainers(register):
    register("diffusion", DiffusionTrainer)
