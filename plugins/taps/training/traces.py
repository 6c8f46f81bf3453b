"""Training the TAPS scorer on traces: large candidate trees the target verified in full.

A trace holds what the selector sees (tree, marginals statistics, drafter features) and
what the target did at every node: its argmax and the probability it gives each child.
Labels come in two kinds: ``argmax`` (the target continues with its argmax; for greedy
decoding) and ``probs`` (the target's probabilities; for sampling). The loss is, per
parent, the KL divergence from the label distribution over {children, other} to the
scorer's, plus half the binary cross-entropy on each node's reach probability.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import torch
from torch import nn
from torch.nn import functional as F

from specmix import Proposal, StepContext, Target, TokenTree, Verdict, Verifier
from specmix.plugins.taps.scorer import EdgeInputs, Scorer, differentiable_log_reach, edge_inputs


@attrs.frozen
class Trace:
    inputs: EdgeInputs
    argmax_child: torch.Tensor = attrs.field(eq=False)  # [N] bool: the target's argmax at the parent is this child
    child_prob: torch.Tensor = attrs.field(eq=False)  # [N] the target's probability of this child at its parent


def trace(tree: TokenTree, proposal: Proposal, logits: torch.Tensor) -> Trace:
    """What to learn from the target's ``logits [N, V]`` over every node of ``tree``."""
    parents = tree.parents.clamp_min(0)
    argmax = logits.argmax(dim=-1).cpu()
    probs = torch.softmax(logits.float(), dim=-1).cpu()
    child_prob = probs[parents, tree.tokens]
    matches = argmax[parents] == tree.tokens
    matches[0], child_prob[0] = False, 0.0
    inputs = edge_inputs(tree, proposal)
    if inputs.child_features is not None:  # half precision on disk: features are most of a trace
        assert inputs.slot_features is not None  # the drafter features come both or neither
        inputs = attrs.evolve(inputs, child_features=inputs.child_features.half(), slot_features=inputs.slot_features.half())
    return Trace(inputs, matches, child_prob)


class RecordingVerifier(Verifier):
    """Wraps any verifier and hands every verified tree, its proposal and the target's logits to ``sink``.

    Made by :func:`recording`, which declares the inner verifier's capabilities (class attributes) on a subclass.
    """

    def __init__(self, inner: Verifier, sink: Callable[[Trace], None]) -> None:
        self.inner, self.sink = inner, sink

    def attach(self, target: Target) -> None:
        self.inner.attach(target)

    def verify(self, target: Target, tree: TokenTree, proposal: Proposal, ctx: StepContext,
               hidden_layers: Sequence[int]) -> Verdict:
        verdict = self.inner.verify(target, tree, proposal, ctx, hidden_layers)
        if tree.size > 1:
            self.sink(trace(tree, proposal, verdict.logits))
        return verdict


def recording(inner: Verifier, sink: Callable[[Trace], None]) -> RecordingVerifier:
    """A :class:`RecordingVerifier` around ``inner`` that consumes, produces and uses what ``inner`` does."""

    class Recording(RecordingVerifier):
        consumes, produces, uses = inner.consumes, inner.produces, inner.uses

    return Recording(inner, sink)


def labels(item: Trace, kind: str) -> torch.Tensor:
    """Per node, the label probability that the target continues its parent with it."""
    if kind == "argmax":
        return item.argmax_child.float()
    if kind == "probs":
        return item.child_prob.float()
    raise ValueError(f"label kind must be 'argmax' or 'probs', not {kind!r}")


def ancestors(parents: torch.Tensor) -> torch.Tensor:
    """``mask[i, j]``: node ``j`` is node ``i`` or an ancestor of it, excluding the root (whose log-prob is 0)."""
    n = parents.shape[0]
    mask = torch.zeros(n, n)
    for i, parent in enumerate(parents.tolist()):
        if i:
            mask[i] = mask[parent]
            mask[i, i] = 1.0
    return mask


def trace_loss(scorer: Scorer, embedding: nn.Embedding, item: Trace, kind: str) -> torch.Tensor:
    inputs = item.inputs.in_float()
    child, other = scorer.conditional_logprobs(inputs, embedding)
    target = labels(item, kind)
    parents = inputs.parents.clamp_min(0)
    nodes = torch.arange(1, target.shape[0])
    mass = torch.zeros_like(target).index_add(0, parents[nodes], target[nodes])
    target_other = (1 - mass).clamp_min(0)
    has_children = torch.zeros(target.shape[0], dtype=torch.bool)
    has_children[parents[nodes]] = True
    kl_children = torch.zeros_like(target).index_add(
        0, parents[nodes], torch.xlogy(target[nodes], target[nodes]) - target[nodes] * child[nodes])
    kl = kl_children + torch.xlogy(target_other, target_other) - target_other * other
    reach_label = differentiable_log_reach(torch.log(target.clamp_min(1e-12)), ancestors(inputs.parents)).exp()
    reach = differentiable_log_reach(child, ancestors(inputs.parents)).exp().clamp(1e-6, 1 - 1e-6)
    bce = F.binary_cross_entropy(reach[1:], reach_label[1:].clamp(0, 1))
    return kl[has_children].mean() + 0.5 * bce


def train_scorer(scorer: Scorer, embedding: nn.Embedding, traces: Sequence[Trace], kind: str, epochs: int,
                 lr: float = 3e-3, batch: int = 16, seed: int = 0, checkpoint: Path | None = None,
                 progress: Callable[[int, int, float], None] | None = None) -> list[float]:
    """AdamW over shuffled traces, ``batch`` traces per step, cosine-decayed, resuming from ``checkpoint`` if it exists."""
    embedding.requires_grad_(False)
    optimizer = torch.optim.AdamW(scorer.parameters(), lr=lr, weight_decay=0.01)
    steps_per_epoch = max(1, len(traces) // batch)
    total = epochs * steps_per_epoch
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total)
    start, losses = 0, []
    if checkpoint is not None and Path(checkpoint).exists():
        state = torch.load(checkpoint, weights_only=False)
        scorer.load_state_dict(state["scorer"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start, losses = state["step"], state["losses"]
    scorer.train()
    for step in range(start, total):
        epoch, offset = divmod(step, steps_per_epoch)
        order = list(range(len(traces)))
        random.Random(seed + epoch).shuffle(order)
        chosen = order[offset * batch:(offset + 1) * batch]
        loss = sum(trace_loss(scorer, embedding, traces[i], kind) for i in chosen) / len(chosen)
        assert isinstance(loss, torch.Tensor)  # a sum of losses: chosen is never empty
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if checkpoint is not None and ((step + 1) % steps_per_epoch == 0 or step + 1 == total):
            torch.save({"scorer": scorer.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "step": step + 1, "losses": losses}, checkpoint)
        if progress is not None:
            progress(step, total, losses[-1])
    scorer.eval()
    return losses
