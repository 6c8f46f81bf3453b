"""A block-diffusion drafter network (DFlash-style), conditioned on the target's hidden states.

A few decoder layers at the target's width. Features from tapped target layers are
fused (concatenate, Linear, RMSNorm) and injected into every layer as extra keys and
values, through that layer's own k/v projections. A block ``[bonus, MASK, ..., MASK]``
attends bidirectionally to itself and to all context features, and one pass gives
marginals for every masked position. Token embedding and LM head are the target's,
shared and frozen; the mask embedding is the drafter's own. With ``anchored_masks`` each
mask input also adds the bonus token's embedding, so every position holds the token it
continues from the start instead of having to learn to fetch it through attention.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import torch
from torch import nn
from torch.nn import functional as F

from specmix.plugins.trained import weights_dir
from specmix.target import fingerprint

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def tapped_layers(target_layers: int, draft_layers: int) -> tuple[int, ...]:
    """Target layers to tap (indices into HF ``hidden_states``, 1 = after the first layer), spread over the depth.

    The last tap is the input of the target's last ``draft_layers`` layers, the ones
    :func:`start_from_target` copies into the drafter, so that a copied layer starts out
    reading the context exactly as it does inside the target.
    """
    last = target_layers - draft_layers
    if draft_layers == 1:
        return (last,)
    return tuple(round(1 + i * (last - 1) / (draft_layers - 1)) for i in range(draft_layers))


def head_over(head: nn.Linear, ids: torch.Tensor) -> nn.Linear:
    """A frozen copy of the LM ``head`` restricted to the tokens ``ids``: its logit j is the head's logit for ``ids[j]``.

    Built once, so that drafting or a training step over few tokens does not gather the rows again.
    """
    small = nn.Linear(head.weight.shape[1], len(ids), bias=head.bias is not None,
                      device=head.weight.device, dtype=head.weight.dtype)
    with torch.no_grad():
        small.weight.copy_(head.weight[ids])
        if head.bias is not None:
            small.bias.copy_(head.bias[ids])
    return small.requires_grad_(False)


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


@attrs.frozen
class DrafterConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    intermediate_size: int
    taps: tuple[int, ...] = attrs.field(converter=_ints)
    block_size: int = 16
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    target: str = ""
    """A fingerprint of the target the drafter was trained for (see :func:`specmix.target.fingerprint`)."""
    anchored_masks: bool = False
    """Every mask position also carries the block's first token's embedding, not only through attention."""

    @classmethod
    def for_target(cls, model: PreTrainedModel, layers: int, **fields: Any) -> DrafterConfig:
        """A drafter of ``layers`` layers at the target's width (heads of 64 where it divides), tapping
        the target as :func:`tapped_layers` says; ``fields`` set the rest."""
        hidden = model.config.hidden_size
        head_dim = 64 if hidden % 64 == 0 else hidden
        return cls(hidden_size=hidden, num_layers=layers, num_heads=hidden // head_dim, head_dim=head_dim,
                   taps=tapped_layers(model.config.num_hidden_layers, layers), target=fingerprint(model),
                   **{"intermediate_size": model.config.intermediate_size, **fields})


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


def rotate(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding on ``x [..., T, head_dim]`` at ``positions [T]``."""
    half = x.shape[-1] // 2
    frequencies = theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.to(torch.float32)[:, None] * frequencies[None]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class DraftLayer(nn.Module):
    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        inner = config.num_heads * config.head_dim
        self.config = config
        self.q_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, inner, bias=False)
        self.o_proj = nn.Linear(inner, config.hidden_size, bias=False)
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.input_norm = RMSNorm(config.hidden_size, config.rms_eps)
        self.post_norm = RMSNorm(config.hidden_size, config.rms_eps)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.config.num_heads, self.config.head_dim).transpose(-3, -2)

    def keys_values(self, states: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys (rotated) and values ``[heads, T, head_dim]`` of ``states [T, D]``."""
        keys = rotate(self._heads(self.k_proj(states)), positions, self.config.rope_theta)
        return keys, self._heads(self.v_proj(states))

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor, context_keys: torch.Tensor, context_values: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """``hidden [T, D]`` attends to the context's keys/values and to itself; ``mask [T, C + T]`` is boolean or None."""
        x = self.input_norm(hidden)
        queries = rotate(self._heads(self.q_proj(x)), positions, self.config.rope_theta)
        keys, values = self.keys_values(x, positions)
        keys, values = torch.cat([context_keys, keys], dim=-2), torch.cat([context_values, values], dim=-2)
        attended = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)
        hidden = hidden + self.o_proj(attended.transpose(-3, -2).reshape(hidden.shape[0], -1))
        x = self.post_norm(hidden)
        return hidden + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class BlockDrafter(nn.Module):
    """The trainable part: fusion, mask embedding, layers and final norm (embedding and LM head are the target's)."""

    def __init__(self, config: DrafterConfig) -> None:
        super().__init__()
        self.config = config
        self.fuse = nn.Linear(len(config.taps) * config.hidden_size, config.hidden_size, bias=False)
        self.fuse_norm = RMSNorm(config.hidden_size, config.rms_eps)
        self.mask_embedding = nn.Parameter(torch.randn(config.hidden_size) * 0.02)
        self.layers = nn.ModuleList(DraftLayer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_eps)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=1 / math.sqrt(module.in_features))

    @property
    def taps(self) -> tuple[int, ...]:
        return self.config.taps

    @property
    def block_size(self) -> int:
        return self.config.block_size

    def save(self, directory: Path) -> None:
        """The config and the trainable weights only, as the drafter plugin loads them."""
        weights_dir.save(self, self.config, directory)

    def empty_context(self, device: torch.device, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
        config = self.config
        empty = torch.zeros(config.num_heads, 0, config.head_dim, device=device, dtype=dtype)
        return [(empty, empty) for _ in self.layers]

    def block_inputs(self, embedding: nn.Embedding, first: torch.Tensor, size: int) -> torch.Tensor:
        """Inputs ``[size, D]`` of a block that starts with token ``first [1]``, followed by masks."""
        start = embedding(first)
        masks = self.mask_embedding.expand(size - 1, -1)
        if self.config.anchored_masks:
            masks = masks + start
        return torch.cat([start, masks])

    def logits(self, hidden: torch.Tensor, head: nn.Module) -> torch.Tensor:
        return head(hidden)

    def features(self, tapped: torch.Tensor) -> torch.Tensor:
        """Fused context features ``[n, D]`` from the concatenated tapped hidden states ``[n, taps * D]``."""
        return self.fuse_norm(self.fuse(tapped))

    def context(self, features: torch.Tensor, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the keys and values the context features inject."""
        return [layer.keys_values(features, positions) for layer in cast("Iterable[DraftLayer]", self.layers)]

    def forward(self, block: torch.Tensor, positions: torch.Tensor, context: Sequence[tuple[torch.Tensor, torch.Tensor]],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states ``[T, D]`` of block inputs ``block [T, D]`` (embeddings) at ``positions``."""
        hidden = block
        for layer, (keys, values) in zip(self.layers, context):
            hidden = layer(hidden, positions, keys, values, mask)
        return self.norm(hidden)
