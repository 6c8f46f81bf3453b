"""The ``learned`` selector (TAPS): path-conditional acceptance from a trained scorer, sized by the cost curve."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch
from torch import nn

from specmix import Capability, ConfigurationError, Proposal, ReachSelector, Target, TokenTree
from specmix.plugins.taps.scorer import Scorer, ScorerConfig, edge_inputs, log_reach
from specmix.plugins.trained import weights_dir

SHIPPED = Path(__file__).parent / "weights"
TRAIN_HINT = "train one with `specmix train scorer --target MODEL --drafter NAME` and pass -o selector.weights=DIR"


class LearnedSelector(ReachSelector):
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

    uses = frozenset({Capability.LOGPROBS, Capability.MARGINALS, Capability.FEATURES})
    test_options = {"random_init": True}

    def __init__(self, weights: str | None = None, drafter: str = "diffusion", budget: int | None = None,
                 random_init: bool = False, seed: int = 0):
        super().__init__(budget)
        self.weights, self.drafter, self.random_init, self.seed = weights, drafter, random_init, seed

    def attach(self, target: Target) -> None:
        self.embedding = cast(nn.Embedding, target.model.get_input_embeddings())  # a causal language model's token embedding
        self.fingerprint = target.fingerprint
        self.scorer: Scorer | None
        if self.random_init:
            self.scorer = None  # built on first use, when the drafter's feature width is known
            return
        directory, config = weights_dir.find(ScorerConfig, target.fingerprint, chosen=self.weights, shipped=SHIPPED,
                                             what="scorer", hint=TRAIN_HINT, drafter=self.drafter)
        self.scorer = Scorer.load(directory, config)

    @torch.no_grad()
    def reach(self, tree: TokenTree, proposal: Proposal) -> torch.Tensor:
        inputs = edge_inputs(tree, proposal)
        if self.scorer is None:
            width = 0 if inputs.child_features is None else inputs.child_features.shape[-1]
            config = ScorerConfig(embed_dim=self.embedding.weight.shape[1], feature_dim=width, drafter=self.drafter,
                                  target=self.fingerprint)
            with torch.random.fork_rng():
                torch.manual_seed(self.seed)
                self.scorer = Scorer(config).eval()
        if self.scorer.feature is not None:
            if inputs.child_features is None:
                raise ConfigurationError(f"the scorer was trained on the '{self.scorer.config.drafter}' drafter's trees "
                                         f"and reads its features, which this drafter does not give; {TRAIN_HINT}")
            if inputs.child_features.shape[-1] != self.scorer.config.feature_dim:
                raise ConfigurationError(f"the scorer reads drafter features of width {self.scorer.config.feature_dim}, "
                                         f"the drafter gives {inputs.child_features.shape[-1]}; {TRAIN_HINT}")
        child, _ = self.scorer.conditional_logprobs(inputs, self.embedding)
        return log_reach(child, inputs.parents).exp()
