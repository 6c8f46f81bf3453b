"""The ``learned`` selector (TAPS): path-conditional acceptance from a trained scorer, sized by the cost curve."""

from __future__ import annotations

from pathlib import Path

import torch

from specmix import ConfigurationError, Method, Selector, hookimpl
from specmix.plugins import weights_dir
from specmix.plugins.taps_scorer import Scorer, ScorerConfig, edge_inputs, log_reach
from specmix.selection import most_reached

PACKAGED = Path(__file__).parent / "scorers"
TRAIN_HINT = "train one with `specmix train scorer --target MODEL --drafter NAME` and pass -o selector.weights=DIR"


class LearnedSelector(Selector):
    """Keeps the nodes the scorer thinks the target will reach, as many as pay for themselves.

    A node's reach is the product, down its path, of the scorer's chance that the target
    continues the parent with that child (rather than a sibling or a token outside the
    tree). Reach never grows down a path, so the best nodes form a prefix-closed tree;
    the count maximises (1 + Σ reach) / T(N) on the measured cost curve, or is ``budget``.
    When the draft is unsure, reach falls fast and the tree shrinks.

    Options: ``weights`` (a scorer directory; default: the one shipped for this target and
    ``drafter``), ``drafter`` (whose trees the scorer was trained on: ``diffusion``),
    ``budget``, and ``random_init`` for an untrained scorer (tests: losslessness never
    depends on the scorer).
    """

    test_options = {"random_init": True}

    def __init__(self, weights: str | None = None, drafter: str = "diffusion", budget: int | None = None,
                 random_init: bool = False, seed: int = 0):
        if budget is not None and budget < 0:
            raise ConfigurationError(f"budget must be >= 0 nodes, got {budget}")
        self.budget = budget
        self.consumes = frozenset() if budget is not None else frozenset({"cost-curve"})
        self.weights, self.drafter, self.random_init, self.seed = weights, drafter, random_init, seed

    def attach(self, target):
        self.embedding = target.model.get_input_embeddings()
        self.fingerprint = target.fingerprint
        if self.random_init:
            self.scorer = None  # built on first use, when the drafter's feature width is known
            return
        directory = (Path(self.weights) if self.weights
                     else weights_dir.packaged(PACKAGED, ScorerConfig, target=target.fingerprint, drafter=self.drafter))
        if directory is None:
            raise ConfigurationError(f"no trained scorer ships for this target ({target.fingerprint}) and drafter "
                                     f"'{self.drafter}'; {TRAIN_HINT}")
        config = weights_dir.config_for_target(ScorerConfig, directory, target.fingerprint, "scorer", TRAIN_HINT)
        self.scorer = Scorer.load(directory, config)

    def select(self, tree, proposal, ctx):
        if tree.size == 1:
            return tree
        riders = 0 if proposal.riders is None else proposal.riders.count
        return tree.subtree(most_reached(self.reach(tree, proposal).tolist(), ctx.cost, self.budget, riders))

    @torch.no_grad()
    def reach(self, tree, proposal) -> torch.Tensor:
        inputs = edge_inputs(tree, proposal)
        if self.scorer is None:
            width = 0 if inputs.child_features is None else inputs.child_features.shape[-1]
            config = ScorerConfig(embed_dim=self.embedding.weight.shape[1], feature_dim=width, drafter=self.drafter,
                                  target=self.fingerprint)
            with torch.random.fork_rng():
                torch.manual_seed(self.seed)
                self.scorer = Scorer(config).eval()
        if self.scorer.feature is not None and inputs.child_features is not None:
            if inputs.child_features.shape[-1] != self.scorer.config.feature_dim:
                raise ConfigurationError(f"the scorer reads drafter features of width {self.scorer.config.feature_dim}, "
                                         f"the drafter gives {inputs.child_features.shape[-1]}; {TRAIN_HINT}")
        child, _ = self.scorer.conditional_logprobs(inputs, self.embedding)
        return log_reach(child, inputs.parents).exp()


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
