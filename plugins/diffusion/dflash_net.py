"""The DFlash drafter network (and DFlash 2's), laid out as the DFlash authors' checkpoints are.

Qwen3-style layers (query and key RMS norms, grouped-query attention, a gated MLP) read
the target's tapped hidden states, fused by ``fc`` and ``hidden_norm``, as extra keys and
values through each layer's own projections. A block ``[bonus, mask, ..., mask]`` (the
target's embeddings, the masks being ``mask_token_id``'s) attends to the whole context
and, bidirectionally, to itself; the final ``norm`` gives one hidden state per position,
read out through the target's LM head. DFlash 2 adds a grouped dynamic causal convolution
around each layer's attention and MLP, and a candidate selector that scores each
position's top-K candidates given the previous position's pick.

Parameter names match the reference checkpoints, so a state dict loads and saves as is;
norms, MLPs and rotary angles are transformers' own Qwen3 modules, computed as there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm, Qwen3RotaryEmbedding, rotate_half

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedModel, Qwen3Config


def draft_value(config: PreTrainedConfig, name: str, default: Any = None) -> Any:
    """A DFlash field: from ``dflash_config`` when it is there, else from the top level of the config."""
    return (getattr(config, "dflash_config", None) or {}).get(name, getattr(config, name, default))


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x [heads, T, head_dim]`` with angles ``cos``, ``sin`` ``[T, head_dim]``."""
    return x * cos + rotate_half(x) * sin


class DynamicCausalConv(nn.Module):
    """DFlash 2's grouped dynamic causal convolution along the block: a learned kernel per offset,
    plus one predicted from each position, per group of ``group_size`` channels."""

    def __init__(self, hidden_size: int, kernel_size: int, group_size: int):
        super().__init__()
        self.kernel_size, self.group_size = kernel_size, group_size
        self.groups = hidden_size // group_size
        self.base_kernel = nn.Parameter(torch.zeros(2, kernel_size, hidden_size))
        self.kernel_projection = nn.Linear(hidden_size, 2 * kernel_size * self.groups, bias=False)

    def _convolve(self, hidden: torch.Tensor, dynamic: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
        length = hidden.shape[0]
        blocks = hidden.view(length, self.groups, self.group_size)
        output = torch.zeros_like(blocks)
        for offset in range(self.kernel_size):
            shifted = blocks if offset == 0 else F.pad(blocks[:-offset], (0, 0, 0, 0, offset, 0))
            output = output + base[offset].view(self.groups, self.group_size).to(hidden.dtype) * shifted
            output = torch.addcmul(output, dynamic[:, offset, :, None], shifted)
        return output.view_as(hidden)

    def prepare(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The input convolved before the sublayer, and the kernel :meth:`finish` applies after it."""
        dynamic = self.kernel_projection(hidden).view(hidden.shape[0], 2, self.kernel_size, self.groups)
        return self._convolve(hidden, dynamic[:, 0], self.base_kernel[0]), dynamic[:, 1]

    def finish(self, hidden: torch.Tensor, dynamic: torch.Tensor) -> torch.Tensor:
        return self._convolve(hidden, dynamic, self.base_kernel[1])


class DFlashAttention(nn.Module):
    def __init__(self, config: Qwen3Config, layer: int) -> None:
        super().__init__()
        assert config.num_key_value_heads is not None  # Qwen3Config fills it in (as num_attention_heads) when absent
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        bias = bool(getattr(config, "attention_bias", False))
        self.q_proj = nn.Linear(config.hidden_size, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=bias)
        self.q_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        types = getattr(config, "layer_types", None)
        sliding = bool(types and types[layer] == "sliding_attention")
        causal = getattr(config, "is_causal", None)
        self.causal = sliding if causal is None else bool(causal)
        self.window = config.sliding_window if sliding else None

    def _split(self, states: torch.Tensor, heads: int) -> torch.Tensor:
        return states.view(states.shape[0], heads, self.head_dim)

    def keys_values(self, states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated keys and values ``[kv_heads, T, head_dim]`` of ``states [T, D]``."""
        keys = self.k_norm(self._split(self.k_proj(states), self.kv_heads)).transpose(0, 1)
        values = self._split(self.v_proj(states), self.kv_heads).transpose(0, 1)
        return _rotated(keys, cos, sin), values

    def visible(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor | None:
        """Which positions each query sees when the layer is causal or windowed (None: all of them)."""
        if not self.causal and self.window is None:
            return None
        gap = queries[:, None] - keys[None, :]
        allowed = gap >= 0 if self.causal else torch.ones_like(gap, dtype=torch.bool)
        if self.window is not None:
            allowed &= gap < self.window
            if not self.causal:
                allowed &= -gap < self.window
        return allowed

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                context: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None) -> torch.Tensor:
        """``hidden [T, D]`` attends to the ``context`` keys and values and to itself; ``mask [T, C + T]`` or None."""
        queries = _rotated(self.q_norm(self._split(self.q_proj(hidden), self.heads)).transpose(0, 1), cos, sin)
        keys, values = self.keys_values(hidden, cos, sin)
        keys, values = torch.cat([context[0], keys], dim=-2), torch.cat([context[1], values], dim=-2)
        groups = self.heads // self.kv_heads
        keys, values = keys.repeat_interleave(groups, dim=0), values.repeat_interleave(groups, dim=0)
        attended = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=self.head_dim ** -0.5)
        return self.o_proj(attended.transpose(0, 1).reshape(hidden.shape[0], -1))


class DFlashLayer(nn.Module):
    def __init__(self, config: Qwen3Config, layer: int, convolutions: tuple[int, int] | None) -> None:
        super().__init__()
        self.self_attn = DFlashAttention(config, layer)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if convolutions is not None:
            self.attention_conv = DynamicCausalConv(config.hidden_size, *convolutions)
            self.mlp_conv = DynamicCausalConv(config.hidden_size, *convolutions)

    def _around(self, convolution: str, sublayer: Callable[[torch.Tensor], torch.Tensor], states: torch.Tensor) -> torch.Tensor:
        conv = getattr(self, convolution, None)
        if conv is None:
            return sublayer(states)
        states, kernel = conv.prepare(states)
        return conv.finish(sublayer(states), kernel)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                context: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None) -> torch.Tensor:
        attend = lambda states: self.self_attn(states, cos, sin, context, mask)  # noqa: E731
        hidden = hidden + self._around("attention_conv", attend, self.input_layernorm(hidden))
        return hidden + self._around("mlp_conv", self.mlp, self.post_attention_layernorm(hidden))


class CandidateSelector(nn.Module):
    """DFlash 2's path-conditional candidate scores: low-rank codebooks of the previous pick and each candidate."""

    def __init__(self, config: Qwen3Config) -> None:
        super().__init__()
        rank = int(draft_value(config, "selector_rank"))
        self.top_k = int(draft_value(config, "selector_top_k"))
        self.predecessor_codebook = nn.Embedding(config.vocab_size, rank)
        self.successor_codebook = nn.Embedding(config.vocab_size, rank)
        self.hidden_projection = nn.Linear(config.hidden_size, rank, bias=False)

    def transitions(self, hidden: torch.Tensor, anchor: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``[H, K, K]``: for position ``h``'s candidate ``j`` after the previous position's candidate ``i``
        (the anchor, for ``h = 0``), the score added to its logit. ``hidden [H, D]``, ``candidates [H, K]``."""
        projected = self.hidden_projection(hidden)
        previous = torch.cat([anchor.expand(1, candidates.shape[1]), candidates[:-1]])
        weighted = self.predecessor_codebook(previous) * projected[:, None, :]
        return weighted @ self.successor_codebook(candidates).transpose(1, 2)


class DFlashNet(nn.Module):
    """A DFlash or DFlash 2 drafter, from its (Qwen3-style) config."""

    def __init__(self, config: Qwen3Config) -> None:
        super().__init__()
        self.config = config
        self.second_version = draft_value(config, "conv_kernel_size") is not None
        convolutions = ((int(draft_value(config, "conv_kernel_size")), int(draft_value(config, "conv_group_size")))
                        if self.second_version else None)
        self.layers = nn.ModuleList(DFlashLayer(config, i, convolutions) for i in range(config.num_hidden_layers))
        self.tapped = tuple(int(i) for i in draft_value(config, "target_layer_ids"))
        self.fc = nn.Linear(len(self.tapped) * config.hidden_size, config.hidden_size, bias=False)
        self.hidden_norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(config)
        if self.second_version:
            self.candidate_selector = CandidateSelector(config)
        self.block_size = int(draft_value(config, "block_size", 16))
        self.mask_token_id = int(draft_value(config, "mask_token_id"))
        self.embedding_scale = float(draft_value(config, "input_embedding_scale", 1.0))
        self.output_multiplier = float(draft_value(config, "output_multiplier", 1.0))
        self.softcap = draft_value(config, "final_logit_softcapping")

    @classmethod
    def for_target(cls, model: PreTrainedModel, layers: int, taps: Iterable[int], block_size: int, mask_token_id: int,
                   **fields: Any) -> DFlashNet:
        """A new (untrained) DFlash drafter of ``layers`` layers shaped like the target's, reading HF
        ``hidden_states[t]`` for each ``t`` in ``taps``; ``fields`` override the config."""
        from transformers import Qwen3Config

        text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        heads = text.num_attention_heads
        dflash: dict[str, Any] = dict(  # DFlash's fields, which Qwen3Config keeps as extra attributes
            num_target_layers=text.num_hidden_layers,
            dflash_config={"block_size": block_size, "mask_token_id": mask_token_id,
                           "target_layer_ids": [t - 1 for t in taps]},
        )
        config = Qwen3Config(
            hidden_size=text.hidden_size, intermediate_size=text.intermediate_size, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=getattr(text, "num_key_value_heads", None) or heads,
            head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads, hidden_act=text.hidden_act,
            rms_norm_eps=getattr(text, "rms_norm_eps", 1e-6), vocab_size=model.get_output_embeddings().weight.shape[0],
            max_position_embeddings=text.max_position_embeddings, attention_bias=bool(getattr(text, "attention_bias", False)),
            rope_parameters=dict(getattr(text, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 10000.0}),
            tie_word_embeddings=False, **dflash, **fields,
        )
        net = cls(config)
        net.reset_parameters()
        return net

    def layers_index(self, parameter: nn.Parameter) -> int:
        """Which draft layer holds ``parameter``."""
        return next(i for i, layer in enumerate(self.layers) if any(parameter is p for p in layer.parameters()))

    @property
    def taps(self) -> tuple[int, ...]:
        """The target layers read, as indices into HF's ``hidden_states`` (tapped layer ``i`` is ``hidden_states[i + 1]``)."""
        return tuple(i + 1 for i in self.tapped)

    def reset_parameters(self, std: float = 0.02) -> None:
        """A random drafter (tests; a recipe's start before it copies what it can from the target)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(cast(torch.Tensor, module.bias))
            elif isinstance(module, DynamicCausalConv):
                nn.init.normal_(module.base_kernel, std=1 / math.sqrt(module.kernel_size))

    def _angles(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.rotary_emb(like, positions[None])
        return cos[0], sin[0]

    def empty_context(self, device: torch.device, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
        attention = cast(DFlashLayer, self.layers[0]).self_attn
        empty = torch.zeros(attention.kv_heads, 0, attention.head_dim, device=device, dtype=dtype)
        return [(empty, empty) for _ in self.layers]

    def features(self, tapped: torch.Tensor) -> torch.Tensor:
        """Fused context features ``[n, D]`` from the concatenated tapped hidden states ``[n, taps * D]``."""
        return self.hidden_norm(self.fc(tapped))

    def context(self, features: torch.Tensor, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the keys and values the context features at ``positions`` inject."""
        cos, sin = self._angles(positions, features)
        return [layer.self_attn.keys_values(features, cos, sin) for layer in cast("Iterable[DFlashLayer]", self.layers)]

    def block_inputs(self, embedding: nn.Embedding, first: torch.Tensor, size: int) -> torch.Tensor:
        """``[size, D]``: the target's embeddings of the block's first token and of ``size - 1`` mask tokens."""
        ids = torch.cat([first, first.new_full((size - 1,), self.mask_token_id)])
        return F.embedding(ids, embedding.weight) * self.embedding_scale

    def forward(self, block: torch.Tensor, positions: torch.Tensor, context: Sequence[tuple[torch.Tensor, torch.Tensor]],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states ``[T, D]`` of block inputs ``block [T, D]`` at ``positions``.

        ``mask [T, C + T]`` (boolean) limits what each block position sees, for training;
        without it each sees all the context and the block, except where a layer is
        causal or windowed (DFlash's ``is_causal``, ``layer_types``, ``sliding_window``).
        """
        cos, sin = self._angles(positions, block)
        hidden = block
        for layer, cached in zip(cast("Iterable[DFlashLayer]", self.layers), context):
            layer_mask = mask
            if mask is None:
                seen = torch.cat([torch.arange(cached[0].shape[-2], device=positions.device), positions])
                layer_mask = layer.self_attn.visible(positions, seen)
            hidden = layer(hidden, cos, sin, cached, layer_mask)
        return self.norm(hidden)

    def logits(self, hidden: torch.Tensor, head: nn.Module) -> torch.Tensor:
        logits = head(hidden) * self.output_multiplier
        if self.softcap is not None and float(self.softcap) > 0:
            logits = torch.tanh(logits / float(self.softcap)) * float(self.softcap)
        return logits
