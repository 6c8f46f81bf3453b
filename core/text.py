"""Between text and token ids: prompts (plain or chat) in, streamed text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast, overload

import torch

from specmix.errors import ConfigurationError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Prompt = str | Sequence[Mapping[str, str]] | Sequence[int] | torch.Tensor


def is_text(prompt: object) -> bool:
    return isinstance(prompt, str) or (
        isinstance(prompt, Sequence) and bool(prompt) and all(isinstance(m, Mapping) for m in prompt)
    )


@overload
def encode(tokenizer: PreTrainedTokenizerBase | None, prompt: str | Sequence[Mapping[str, str]],
           chat: bool | None = None) -> list[int]: ...


@overload
def encode(tokenizer: PreTrainedTokenizerBase | None, prompt: Sequence[int] | torch.Tensor,
           chat: bool | None = None) -> Sequence[int] | torch.Tensor: ...


def encode(tokenizer: PreTrainedTokenizerBase | None, prompt: Prompt, chat: bool | None = None) -> Sequence[int] | torch.Tensor:
    """Token ids for ``prompt``: a string, chat messages, or ids (returned as they are).

    A string goes through the chat template when the tokenizer has one, unless
    ``chat=False``; messages always do.
    """
    if not is_text(prompt):
        return cast("Sequence[int] | torch.Tensor", prompt)
    if tokenizer is None:
        raise ConfigurationError("text prompts need a tokenizer; pass one, or give token ids")
    has_template = bool(getattr(tokenizer, "chat_template", None))
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if isinstance(prompt, str) and (chat is False or (chat is None and not has_template)):
        return tokenizer(prompt).input_ids
    if not has_template:
        raise ConfigurationError("this tokenizer has no chat template; pass a plain string with chat=False")
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


class TextStream:
    """Turns committed token ids into text chunks, holding back half-decoded characters."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = 0

    def push(self, ids: Sequence[int], final: bool = False) -> str:
        self.ids.extend(ids)
        text = cast(str, self.tokenizer.decode(self.ids, skip_special_tokens=True))
        if text.endswith("\ufffd") and not final:  # a multi-byte character split across tokens
            return ""
        chunk, self.emitted = text[self.emitted:], len(text)
        return chunk
