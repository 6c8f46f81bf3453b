"""The target's sampling distribution at a tree node, processed along that node's own path."""

from __future__ import annotations

from typing import cast

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from specmix.settings import DecodeSettings


def warpers(settings: DecodeSettings) -> LogitsProcessorList:
    """The same warpers, in the same order, that transformers' ``generate`` applies when sampling."""
    processors = LogitsProcessorList()
    if settings.temperature not in (0, 1):
        processors.append(TemperatureLogitsWarper(settings.temperature))
    if settings.top_k is not None:
        processors.append(TopKLogitsWarper(settings.top_k))
    if settings.top_p is not None and settings.top_p < 1:
        processors.append(TopPLogitsWarper(settings.top_p))
    return processors


def target_probs(logits: torch.Tensor, path_ids: torch.Tensor, processors: LogitsProcessorList) -> torch.Tensor:
    """Probabilities ``[V]`` for the token after ``path_ids`` (committed tokens and the node's own path)."""
    # On the CPU, in fp64: the walks draw from it with a CPU generator, one node at a time.
    scores = processors(cast(torch.LongTensor, path_ids[None]), logits[None].to("cpu", torch.float64))
    return torch.softmax(scores[0], dim=-1)
