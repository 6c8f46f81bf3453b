"""Training a block-diffusion drafter on its target's own responses (self-distillation).

Per sequence: the frozen target's hidden states at the tapped layers are computed once;
random anchors are drawn inside the response; each anchor starts a block
``[token at anchor, MASK, ...]`` that sees the fused context features strictly before
the anchor and, bidirectionally, its own block, never another block. The loss is
cross-entropy on the tokens after the anchor, position k weighted by exp(-(k-1)/gamma).
AdamW with linear warm-up and a cosine decay; gradients clipped to 1.

The frozen LM head over the whole vocabulary is nearly all of a step's cost, so the
softmax may be restricted to the ``vocab`` most frequent response tokens (targets outside
it are skipped): steps get several times cheaper, and the drafter sees that many more
blocks in the same time.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import attrs
import torch
from torch import nn
from torch.nn import functional as F

from specmix.plugins.diffusion.dflash_net import DFlashNet
from specmix.plugins.diffusion.network import BlockDrafter, head_over

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@attrs.frozen
class Example:
    """Token ids of prompt and response, and where the response starts."""

    ids: tuple[int, ...]
    response_start: int


@attrs.frozen
class TrainSettings:
    steps: int = 2000
    lr: float = 6e-4
    warmup: float = 0.04
    anchors: int = 8
    gamma: float = 7.0
    clip: float = 1.0
    seed: int = 0
    checkpoint_every: int = 200
    vocab: int | None = None
    """Train the softmax over this many most frequent response tokens (None: the whole vocabulary)."""


@torch.no_grad()
def tapped_states(model: PreTrainedModel, ids: Sequence[int], taps: Sequence[int]) -> torch.Tensor:
    """The target's hidden states at ``taps``, concatenated: ``[len(ids), len(taps) * D]``."""
    out = model(input_ids=torch.tensor([list(ids)], device=model.device), output_hidden_states=True)
    return torch.cat([out.hidden_states[layer][0] for layer in taps], dim=-1)


def frequent_tokens(examples: Sequence[Example], count: int | None = None) -> torch.Tensor:
    """The ``count`` (default: all) most frequent response token ids, most frequent first."""
    counts = Counter(token for example in examples for token in example.ids[example.response_start:])
    return torch.tensor([token for token, _ in counts.most_common(count)])


def block_loss(net: BlockDrafter | DFlashNet, embed: nn.Embedding, head: nn.Module, ids: torch.Tensor, tapped: torch.Tensor,
               anchors: Sequence[int], gamma: float, vocab: torch.Tensor | None = None) -> torch.Tensor:
    """Decay-weighted cross-entropy of the blocks starting at ``anchors`` of one sequence.

    With ``vocab`` (token ids), ``head`` gives logits over those tokens only (see
    :func:`~specmix.plugins.diffusion.network.head_over`) and other targets are skipped.
    """
    size, length = net.block_size, ids.shape[0]
    features = net.features(tapped)
    context = net.context(features, torch.arange(length))
    blocks, positions, labels, weights = [], [], [], []
    for anchor in anchors:
        blocks.append(net.block_inputs(embed, ids[anchor:anchor + 1], size))
        positions.append(torch.arange(anchor, anchor + size))
        for k in range(size):
            has_target = k >= 1 and anchor + k < length
            labels.append(int(ids[anchor + k]) if has_target else -100)
            weights.append(math.exp(-(k - 1) / gamma) if has_target else 0.0)
    block, position = torch.cat(blocks), torch.cat(positions)
    queries = len(anchors) * size
    mask = torch.zeros(queries, length + queries, dtype=torch.bool)
    for j, anchor in enumerate(anchors):
        rows = slice(j * size, (j + 1) * size)
        mask[rows, :anchor] = True  # context strictly before the anchor
        mask[rows, length + j * size:length + (j + 1) * size] = True  # its own block, both ways
    hidden = net(block, position, context, mask)
    targets, weight = torch.tensor(labels), torch.tensor(weights)
    logits = net.logits(hidden, head)
    if vocab is not None:
        index = torch.full((embed.weight.shape[0],), -100, dtype=torch.long)
        index[vocab] = torch.arange(len(vocab))
        targets = torch.where(targets >= 0, index[targets.clamp_min(0)], targets)
        weight = torch.where(targets >= 0, weight, 0.0)
    losses = F.cross_entropy(logits.float(), targets, ignore_index=-100, reduction="none")
    return (losses * weight).sum() / weight.sum().clamp_min(1e-9)


def learning_rate(step: int, settings: TrainSettings) -> float:
    warm = max(1, int(settings.warmup * settings.steps))
    if step < warm:
        return settings.lr * (step + 1) / warm
    progress = (step - warm) / max(1, settings.steps - warm)
    return settings.lr * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def train(net: BlockDrafter | DFlashNet, model: PreTrainedModel, examples: Sequence[Example], settings: TrainSettings,
          checkpoint: Path | None = None, progress: Callable[[int, float], None] | None = None) -> list[float]:
    """Train ``net`` for ``settings.steps`` steps (one sequence each), resuming from ``checkpoint`` if it exists."""
    model.requires_grad_(False)  # the target, its embedding and LM head stay frozen
    embed, head = cast(nn.Embedding, model.get_input_embeddings()), model.get_output_embeddings()
    optimizer = torch.optim.AdamW(net.parameters(), lr=settings.lr, weight_decay=0.0)
    start, losses, rng = 0, [], random.Random(settings.seed)
    if checkpoint is not None and Path(checkpoint).exists():
        state = torch.load(checkpoint, weights_only=False)
        net.load_state_dict(state["net"])
        optimizer.load_state_dict(state["optimizer"])
        start, losses = state["step"], state["losses"]
        rng.setstate(state["rng"])
    usable = [e for e in examples if len(e.ids) - e.response_start >= 2]
    vocab = None if settings.vocab is None else frequent_tokens(usable, settings.vocab)
    loss_head = head if vocab is None else head_over(head, vocab)
    states: dict[int, torch.Tensor] = {}
    net.train()
    for step in range(start, settings.steps):
        index = rng.randrange(len(usable))
        example = usable[index]
        if index not in states:
            states[index] = tapped_states(model, example.ids, net.taps)
        ids = torch.tensor(example.ids)
        last = len(example.ids) - 2
        anchors = sorted(rng.sample(range(example.response_start - 1, last + 1),
                                    min(settings.anchors, last - example.response_start + 2)))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        loss = block_loss(net, embed, loss_head, ids, states[index], anchors, settings.gamma, vocab)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), settings.clip)
        optimizer.step()
        losses.append(loss.item())
        if checkpoint is not None and ((step + 1) % settings.checkpoint_every == 0 or step + 1 == settings.steps):
            Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
            torch.save({"net": net.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1,
                        "losses": losses, "rng": rng.getstate()}, checkpoint)
        if progress is not None:
            progress(step, losses[-1])
    net.eval()
    return losses
