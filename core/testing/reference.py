"""What the target alone would do, computed the slow and obvious way: no cache, no custom masks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from specmix.sampling import target_probs, warpers
from specmix.settings import DecodeSettings

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@torch.no_grad()
def next_logits(model: PreTrainedModel, ids: Sequence[int]) -> torch.Tensor:
    """The target's logits for the token after ``ids``, from one forward over all of them."""
    return model(input_ids=torch.tensor([list(ids)], device=model.device)).logits[0, -1]


def reference_greedy(model: PreTrainedModel, prompt: Sequence[int], settings: DecodeSettings) -> list[int]:
    """Plain greedy decoding with full recomputation each token."""
    eos = model.generation_config.eos_token_id
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    stops = set(eos if settings.stop_ids is None else settings.stop_ids)
    max_length = model.config.max_position_embeddings
    ids = list(prompt)
    out: list[int] = []
    while len(out) < settings.max_new_tokens and len(ids) < max_length:
        token = int(next_logits(model, ids).argmax())
        ids.append(token)
        out.append(token)
        if token in stops:
            break
    return out


def reference_sequence_probs(model: PreTrainedModel, prompt: Sequence[int], settings: DecodeSettings, length: int) -> dict:
    """Exact probability of every ``length``-token continuation under the target's processed sampling."""
    processors = warpers(settings)
    vocab = model.config.vocab_size
    probs: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(length):
        extended: dict[tuple[int, ...], float] = {}
        for prefix, mass in probs.items():
            ids = [*prompt, *prefix]
            step = target_probs(next_logits(model, ids), torch.tensor(ids), processors)
            for token in range(vocab):
                if step[token] > 0:
                    extended[prefix + (token,)] = mass * float(step[token])
        probs = extended
    assert abs(sum(probs.values()) - 1) < 1e-9
    return probs

