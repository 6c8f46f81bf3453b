"""Where a drafter's training starts: its layers copied from the target's last layers, so that it
first reads the context as the target does, instead of from random weights."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from specmix.plugins.diffusion.dflash_net import DFlashNet
from specmix.plugins.diffusion.network import BlockDrafter, DrafterConfig, DraftLayer

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def _layer_pairs(mine: DraftLayer, theirs: nn.Module, config: DrafterConfig) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(drafter parameter, target weight) pairs for copying a Llama-style target layer; None if it is not one."""
    attention, mlp = getattr(theirs, "self_attn", None), getattr(theirs, "mlp", None)
    projections = ("q_proj", "k_proj", "v_proj", "o_proj")
    if attention is None or mlp is None or hasattr(attention, "q_norm"):
        return None
    if any(not isinstance(getattr(attention, name, None), nn.Linear) or getattr(attention, name).bias is not None
           for name in projections):
        return None
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = [(mine.q_proj.weight, attention.q_proj.weight),
                                                      (mine.o_proj.weight, attention.o_proj.weight)]
    for name in ("k_proj", "v_proj"):
        weight = getattr(attention, name).weight
        if weight.shape[0] % config.head_dim or (config.num_heads * config.head_dim) % weight.shape[0]:
            return None
        groups = config.num_heads * config.head_dim // weight.shape[0]  # grouped-query heads, repeated
        pairs.append((getattr(mine, name).weight,
                      weight.view(-1, config.head_dim, weight.shape[1]).repeat_interleave(groups, dim=0).flatten(0, 1)))
    for name in ("gate_proj", "up_proj", "down_proj"):
        if not isinstance(getattr(mlp, name, None), nn.Linear):
            return None
        pairs.append((getattr(mine, name).weight, getattr(mlp, name).weight))
    for norm, name in ((mine.input_norm, "input_layernorm"), (mine.post_norm, "post_attention_layernorm")):
        if getattr(getattr(theirs, name, None), "weight", None) is None:
            return None
        pairs.append((norm.weight, getattr(theirs, name).weight))
    return pairs if all(a.shape == b.shape for a, b in pairs) else None


@torch.no_grad()
def start_from_target(net: BlockDrafter, model: PreTrainedModel) -> bool:
    """Initialise ``net`` from the target: draft layers as copies of its last layers, final norm as its own.

    The fusion starts as the identity on the last tap (the copied layers' input, see
    :func:`tapped_layers`) and the fused-feature norm as the first copied layer's input
    norm, so the copies first read the context keys and values the target computes.
    Returns False, leaving ``net`` as it was, when the target's layers do not have this
    (Llama-style) layout or these shapes.
    """
    config = net.config
    decoder = getattr(model, "model", None)
    layers, norm = getattr(decoder, "layers", None), getattr(getattr(decoder, "norm", None), "weight", None)
    if layers is None or norm is None or len(layers) < config.num_layers or norm.shape != net.norm.weight.shape:
        return False
    sources = list(layers)[len(layers) - config.num_layers:]
    pairs = [_layer_pairs(mine, theirs, config) for mine, theirs in zip(cast("Iterable[DraftLayer]", net.layers), sources)]
    if None in pairs:
        return False
    copied = cast("list[list[tuple[torch.Tensor, torch.Tensor]]]", pairs)  # every layer fits: checked above
    for parameter, weight in [pair for layer in copied for pair in layer] + [(net.norm.weight, norm)]:
        parameter.copy_(weight)
    net.fuse.weight.zero_()
    net.fuse.weight[:, -config.hidden_size:].copy_(torch.eye(config.hidden_size))
    net.fuse_norm.weight.copy_(sources[0].input_layernorm.weight)
    return True


@torch.no_grad()
def start_dflash_from_target(net: DFlashNet, model: PreTrainedModel, calibration: Sequence[Sequence[int]] = ()) -> bool:
    """Initialise a DFlash ``net`` from the target: each draft layer a copy of one of its last layers, by name.

    A Llama-style layer has no query and key norms; a DFlash layer normalises every head
    vector, so that its norm weight decides the attention's scale. It is set to the typical
    RMS of the copied layer's query (key) heads over the ``calibration`` sequences, so that
    the copy starts near the original (with none, it stays at one). As for
    :func:`start_from_target`, ``fc`` starts as the identity on the last tap, ``hidden_norm``
    as the first copied layer's input norm and ``norm`` as the target's final norm.
    Returns False, leaving ``net`` as it was, when shapes or names do not fit.
    """
    decoder = getattr(model, "model", None)
    layers, norm = getattr(decoder, "layers", None), getattr(getattr(decoder, "norm", None), "weight", None)
    hidden = net.config.hidden_size
    if layers is None or norm is None or len(layers) < len(net.layers) or norm.shape != net.norm.weight.shape:
        return False
    first = len(layers) - len(net.layers)
    sources = list(layers)[first:]
    copies, calibrated = [], []
    for mine, theirs in zip(net.layers, sources):
        available = dict(theirs.named_parameters())
        for name, parameter in mine.named_parameters():
            if "_conv." in name:
                continue
            if name.endswith(("q_norm.weight", "k_norm.weight")) and name not in available:
                calibrated.append((parameter, theirs, name.split(".")[1][0]))
                continue
            if name not in available or available[name].shape != parameter.shape:
                return False
            copies.append((parameter, available[name]))
    for parameter, weight in copies + [(net.norm.weight, norm)]:
        parameter.copy_(weight)
    net.fc.weight.zero_()
    net.fc.weight[:, -hidden:].copy_(torch.eye(hidden))
    net.hidden_norm.weight.copy_(sources[0].input_layernorm.weight)
    for parameter, layer, which in calibrated:
        parameter.fill_(_head_rms(model, layer, which, first + net.layers_index(parameter), calibration))
    return True


def _head_rms(model: PreTrainedModel, layer: Any, which: str, index: int, calibration: Sequence[Sequence[int]]) -> float:
    """The mean RMS of ``layer``'s query (``q``) or key (``k``) head vectors over the calibration sequences."""
    if not calibration:
        return 1.0
    attention = layer.self_attn
    projection = attention.q_proj if which == "q" else attention.k_proj
    head_dim = getattr(attention, "head_dim", None) or projection.out_features // model.config.num_attention_heads
    values = []
    for ids in calibration:
        states = model(input_ids=torch.tensor([list(ids)], device=model.device), output_hidden_states=True).hidden_states
        heads = projection(layer.input_layernorm(states[index][0])).view(-1, head_dim)
        values.append(heads.float().pow(2).mean(-1).sqrt())
    return float(torch.cat(values).mean())
