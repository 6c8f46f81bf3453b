"""Tree-attention masks in the form the model's attention backend takes.

SDPA (and eager attention) take a 4D additive mask; FlexAttention takes a ``BlockMask``
built from the same visibility rule, so whole blocks of the cache that every query sees
are skipped without reading a mask. SDPA is the default (``DEFAULT``) on every device: on CPU it is
faster at these sizes, and on CUDA its additive mask is a plain tensor that a captured
CUDA graph can be fed (see :mod:`specmix.kernels.static_shapes`), while a ``BlockMask`` is built
on the host every step. ``attention="flex_attention"`` picks FlexAttention, on CUDA only (see
:class:`specmix.Target`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask
    from transformers import PreTrainedModel

FLEX = "flex_attention"
DEFAULT = "sdpa"


def backend_of(model: PreTrainedModel) -> str:
    return getattr(model.config, "_attn_implementation", None) or "sdpa"


def additive_mask(visible: torch.Tensor, past: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """``[1, 1, T, past + T]``: 0 where a token may attend (all the cache, and ``visible``), the dtype's minimum elsewhere."""
    count = visible.shape[0]
    mask = torch.zeros(1, 1, count, past + count, dtype=dtype, device=device)
    mask[0, 0, :, past:].masked_fill_(~visible.to(device), torch.finfo(dtype).min)
    return mask


def block_mask(visible: torch.Tensor, past: int, device: torch.device | str) -> BlockMask:
    """The same rule as a FlexAttention ``BlockMask`` over ``T`` queries and ``past + T`` keys."""
    from torch.nn.attention.flex_attention import create_block_mask

    count = visible.shape[0]
    full = torch.cat([torch.ones(count, past, dtype=torch.bool), visible.cpu()], dim=1).to(device)

    def mask_mod(batch: torch.Tensor, head: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        return full[query, key]

    return create_block_mask(mask_mod, 1, None, count, past + count, device=device)


def tree_mask(model: PreTrainedModel, visible: torch.Tensor, past: int) -> torch.Tensor | BlockMask:
    """The mask for ``model``'s attention backend."""
    if backend_of(model) == FLEX:
        return block_mask(visible, past, model.device)
    return additive_mask(visible, past, model.dtype, model.device)
