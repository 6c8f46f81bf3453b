"""The TAPS scorer: a tiny MLP that predicts, edge by edge, whether the target continues a path.

For each parent the scorer spreads probability over its children and an "other" bucket
(the target continues with a token not in the tree); a node's reach probability is the
product of these conditionals along its path. Inputs per edge: the parent's and child's
token embeddings (the target's, frozen, through a learned projection), the child's depth,
the draft's statistics at that position (log-prob, entropy, margin, top-K mass,
cumulative log-prob) and the drafter's hidden state there. A tree without marginals,
log-probs or drafter features gets zeros for those, so the same scorer shape serves
any drafter.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import torch
from torch import nn

from specmix import Marginals, Proposal, TokenTree
from specmix.plugins.trained import weights_dir

EDGE_STATS = 6  # child log-prob, cumulative log-prob, and the position's top-1 log-prob, entropy, margin, top-K mass
SLOT_STATS = 5  # the parent's cumulative log-prob and the next position's top-1 log-prob, entropy, margin, top-K mass


@attrs.frozen
class ScorerConfig:
    embed_dim: int
    feature_dim: int = 0
    width: int = 32
    hidden: int = 64
    max_depth: int = 32
    drafter: str = "diffusion"
    labels: str = "argmax"
    target: str = ""


@attrs.frozen
class EdgeInputs:
    """Everything the scorer reads for one tree, as tensors over its nodes (row 0, the root, is unused as a child)."""

    tokens: torch.Tensor = attrs.field(eq=False)  # [N]
    parents: torch.Tensor = attrs.field(eq=False)  # [N], -1 at the root
    depths: torch.Tensor = attrs.field(eq=False)  # [N]
    edge_stats: torch.Tensor = attrs.field(eq=False)  # [N, EDGE_STATS]
    slot_stats: torch.Tensor = attrs.field(eq=False)  # [N, SLOT_STATS]: of each node as a parent
    child_features: torch.Tensor | None = attrs.field(eq=False)  # [N, F] drafter hidden state at each node's position
    slot_features: torch.Tensor | None = attrs.field(eq=False)  # [N, F] at the position after each node

    def in_float(self) -> EdgeInputs:
        """These inputs with the drafter features in float32 (traces store them in half precision)."""
        if self.child_features is None:
            return self
        assert self.slot_features is not None  # the drafter features come both or neither
        return attrs.evolve(self, child_features=self.child_features.float(), slot_features=self.slot_features.float())


def _position_stats(marginals: Marginals | None, rows: int) -> torch.Tensor:
    """Per drafted position: top-1 log-prob, entropy and margin over the top-K, and top-K mass; zeros past the end."""
    stats = torch.zeros(rows, 4, dtype=torch.float32)
    if marginals is None or marginals.depth == 0:
        return stats
    lp = marginals.logprobs[:rows].float()
    p = lp.exp()
    margin = lp[:, 0] - lp[:, 1] if lp.shape[1] > 1 else torch.zeros(lp.shape[0])
    known = torch.stack([lp[:, 0], -(p * lp).sum(-1), margin, p.sum(-1)], dim=-1)
    stats[: known.shape[0]] = known
    return stats


def edge_inputs(tree: TokenTree, proposal: Proposal) -> EdgeInputs:
    """The scorer's inputs for ``tree`` given the proposal it was built from."""
    n, depths = tree.size, torch.tensor(tree.depth_list)
    rows = int(depths.max()) + 1
    position = _position_stats(proposal.marginals, rows)
    logprobs = torch.zeros(n) if tree.logprobs is None else tree.logprobs.float().clamp_min(-30)
    path_logprobs = tree.cumulative_logprobs()  # None exactly when tree.logprobs is
    cumulative = torch.zeros(n) if path_logprobs is None else path_logprobs.float().clamp_min(-30)
    child_row = (depths - 1).clamp_min(0)
    edge = torch.cat([logprobs[:, None], cumulative[:, None], position[child_row]], dim=-1)
    slot = torch.cat([cumulative[:, None], position[depths]], dim=-1)
    child_features = slot_features = None
    features = proposal.features
    if features is not None:
        padded = torch.zeros(rows + 1, features.shape[-1], dtype=torch.float32)
        count = min(features.shape[0], rows + 1)
        padded[:count] = features[:count].float().cpu()
        child_features, slot_features = padded[child_row], padded[depths]
    return EdgeInputs(tree.tokens, tree.parents, depths, edge, slot, child_features, slot_features)


def _mlp(inputs: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))


class Scorer(nn.Module):
    def __init__(self, config: ScorerConfig):
        super().__init__()
        self.config = config
        width = config.width
        self.token = nn.Linear(config.embed_dim, width, bias=False)
        self.depth = nn.Embedding(config.max_depth + 1, width)
        self.feature = nn.Linear(config.feature_dim, width) if config.feature_dim else None
        extra = width if config.feature_dim else 0
        self.edge = _mlp(3 * width + EDGE_STATS + extra, config.hidden)
        self.other = _mlp(2 * width + SLOT_STATS + extra, config.hidden)

    def save(self, directory: Path) -> None:
        weights_dir.save(self, self.config, directory)

    @classmethod
    def load(cls, directory: Path, config: ScorerConfig | None = None) -> Scorer:
        config = config or weights_dir.read_config(ScorerConfig, directory)
        return weights_dir.load_weights(cls(config), directory).eval()

    def conditional_logprobs(self, inputs: EdgeInputs, embedding: nn.Embedding) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities that the target continues each node's parent with it ``[N]`` (0 at the root),
        and with a token outside the tree, per node as a parent ``[N]``."""
        dtype = self.token.weight.dtype
        tokens = self.token(embedding(inputs.tokens.to(embedding.weight.device)).to(dtype).cpu())
        parents = inputs.parents.clamp_min(0)
        depth = self.depth(inputs.depths.clamp_max(self.config.max_depth))
        next_depth = self.depth((inputs.depths + 1).clamp_max(self.config.max_depth))
        edge = [tokens[parents], tokens, depth, inputs.edge_stats.to(dtype)]
        slot = [tokens, next_depth, inputs.slot_stats.to(dtype)]
        if self.feature is not None:
            edge.append(self._features(inputs.child_features, len(inputs.tokens)))
            slot.append(self._features(inputs.slot_features, len(inputs.tokens)))
        child_logits = self.edge(torch.cat(edge, dim=-1))[:, 0]
        other_logits = self.other(torch.cat(slot, dim=-1))[:, 0]
        # Per parent, a softmax over its children and its "other" bucket.
        children = torch.arange(1, len(inputs.tokens))
        top = other_logits.detach().scatter_reduce(0, parents[children], child_logits.detach()[children], "amax")
        shifted = (child_logits[children] - top[parents[children]]).exp()
        total = (other_logits - top).exp().index_add(0, parents[children], shifted)
        log_normaliser = top + total.log()
        child = child_logits - log_normaliser[parents]
        child = torch.cat([child.new_zeros(1), child[1:]])
        return child, other_logits - log_normaliser

    def _features(self, features: torch.Tensor | None, count: int) -> torch.Tensor:
        if features is None:
            return self.token.weight.new_zeros(count, self.config.width)
        assert self.feature is not None  # called only for a scorer that reads drafter features
        return self.feature(features.to(self.token.weight.dtype))


def log_reach(child_logprobs: torch.Tensor, parents: torch.Tensor) -> torch.Tensor:
    """Path sums of ``child_logprobs`` (parents-first order): the log-probability each node is reached."""
    reach = [0.0] * len(child_logprobs)
    values, parent_list = child_logprobs.tolist(), parents.tolist()
    for node in range(1, len(values)):
        reach[node] = reach[parent_list[node]] + min(values[node], 0.0)
    return torch.tensor(reach, dtype=torch.float64)


def differentiable_log_reach(child_logprobs: torch.Tensor, ancestors: torch.Tensor) -> torch.Tensor:
    """``log_reach`` as a matrix product with the ancestor mask, for training."""
    return ancestors.to(child_logprobs.dtype) @ child_logprobs
