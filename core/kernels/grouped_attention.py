"""SDPA for grouped-query attention that hands torch the groups instead of copies of the key/value heads.

Given a mask and more than one query, transformers' ``sdpa`` attention repeats each
key/value head once for every query head that reads it: a copy of the layer's cached
keys and values, in every layer of every tree forward. On the default model (9 query
heads over 3 key/value heads, a 4-token tree over a 256-token context, two CPU cores)
the copy and the larger call take 164 µs a layer, against 61 µs when torch's SDPA is
told the grouping (``enable_gqa``), which reads each key/value head in place. On CPU the
two compute every head from the same numbers in the same order, so the outputs are bit for
bit the same (tested on the default model and on random ones); elsewhere, and for one
query or no mask, transformers' own ``sdpa`` runs unchanged (on CUDA a masked grouped
SDPA would fall back to a slower kernel).

It is offered to transformers through its public ``AttentionInterface`` (with ``sdpa``'s
mask function), under :data:`NAME`; :func:`group_queries` switches a model to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

if TYPE_CHECKING:
    from transformers import PreTrainedModel

NAME = "sdpa_grouped"
"""The attention implementation's name, as ``model.set_attn_implementation`` takes it."""

_STOCK = "sdpa"


def grouped_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa`` attention, with masked grouped queries on CPU computed without copying key/value heads.

    ``query [B, H, T, D]``, ``key`` and ``value [B, H / groups, S, D]``; returns ``[B, T, H, D]`` and no weights."""
    grouped = (getattr(module, "num_key_value_groups", 1) > 1 and query.device.type == "cpu" and query.shape[2] > 1
               and attention_mask is not None and not dropout
               and kwargs.get("position_bias") is None and kwargs.get("softcap") is None
               and not kwargs.get("output_attentions", False))
    if not grouped:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    output = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                              scale=scaling, enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, grouped_sdpa)
AttentionMaskInterface.register(NAME, sdpa_mask)


def group_queries(model: PreTrainedModel) -> bool:
    """Switch ``model`` from transformers' ``sdpa`` attention to :data:`NAME`, which computes the same outputs;
    whether it was switched (a model on another backend keeps it)."""
    if getattr(model.config, "_attn_implementation", None) != _STOCK:
        return False
    model.set_attn_implementation(NAME)
    return True
