"""The target's own greedy responses to a prompt set: what drafters and corpora for it are made from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from specmix import Target
from specmix.text import encode

if TYPE_CHECKING:
    from transformers import GenerationMixin, PreTrainedModel, PreTrainedTokenizerBase


def generate_responses(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: list[str], path: Path,
                       max_new_tokens: int, batch_size: int) -> None:
    """Greedy responses of the target, appended to ``path`` batch by batch (resumable)."""
    from tqdm.auto import tqdm

    done = sum(1 for line in path.open()) if path.exists() else 0
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = set(Target(model).eos_ids)
    generator = cast("GenerationMixin", model)  # the target is a causal language model, which generates
    with path.open("a") as out, tqdm(total=len(prompts), initial=done, desc="responses", unit="prompt") as bar:
        for start in range(done, len(prompts), batch_size):
            batch = [encode(tokenizer, p) for p in prompts[start:start + batch_size]]
            width = max(len(ids) for ids in batch)
            ids = torch.tensor([[pad] * (width - len(x)) + x for x in batch])
            attention = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in batch])
            generated = generator.generate(ids, attention_mask=attention, max_new_tokens=max_new_tokens, do_sample=False,
                                           temperature=None, top_p=None, top_k=None, pad_token_id=pad)
            for prompt_ids, row in zip(batch, generated[:, width:].tolist()):
                response = []
                for token in row:
                    response.append(token)
                    if token in eos:
                        break
                out.write(json.dumps({"ids": prompt_ids + response, "response_start": len(prompt_ids)}) + "\n")
            out.flush()
            bar.update(len(batch))


def read_responses(path: Path) -> list[tuple[tuple[int, ...], int]]:
    """Each response written by :func:`generate_responses`: its prompt and response ids, and where the response starts."""
    return [(tuple(row["ids"]), row["response_start"]) for row in map(json.loads, Path(path).read_text().splitlines())]
