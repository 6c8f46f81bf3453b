"""Entry point ``taps``: the ``pool`` builder, the ``learned`` selector, the ``taps`` method and the scorer recipe."""

from specmix import Method, hookimpl
from specmix.plugins.taps.pool_builder import PoolBuilder
from specmix.plugins.taps.selector import LearnedSelector
from specmix.plugins.taps.training.recipe import ScorerTrainer


@hookimpl
def register_tree_builders(register):
    register("pool", PoolBuilder)


@hookimpl
def register_selectors(register):
    register("learned", LearnedSelector)


@hookimpl
def register_methods(register):
    register(Method(
        name="taps",
        drafter="diffusion",
        builder="pool",
        selector="learned",
        verifier="tree",
        description="TAPS: a wide pool over the diffusion drafter's marginals, cut by a learned path-acceptance scorer.",
    ))


@hookimpl
def register_trainers(register):
    register("scorer", ScorerTrainer)
