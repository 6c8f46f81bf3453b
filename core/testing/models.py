"""Tiny random decoder models of several HF families, in fp64 so that argmax ties cannot flip.

The kit builds them on the CPU in fp64 unless told otherwise: ``SPECMIX_KIT_DEVICE``
(``cuda``) and ``SPECMIX_KIT_DTYPE`` (``float32``, ``bfloat16``) run every property on
another device or in another precision, and ``SPECMIX_KIT_STATIC`` (``on``, ``off``;
default: specmix's choice for the device, static shapes and CUDA graphs on CUDA) sets the
decoders' static shapes. Comparisons of tensors then allow that precision's rounding.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import torch
import transformers

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
}
EOS_ID = 1
DEVICE_VARIABLE, DTYPE_VARIABLE, STATIC_VARIABLE = "SPECMIX_KIT_DEVICE", "SPECMIX_KIT_DTYPE", "SPECMIX_KIT_STATIC"
TOLERANCES = {torch.float64: 1e-9, torch.float32: 2e-4, torch.bfloat16: 6e-2, torch.float16: 6e-3}


def kit_device() -> torch.device:
    return torch.device(os.environ.get(DEVICE_VARIABLE) or "cpu")


def kit_dtype() -> torch.dtype:
    return getattr(torch, os.environ.get(DTYPE_VARIABLE) or "float64")


def kit_static() -> bool | None:
    """The ``static`` argument of the kit's decoders: None (specmix's default for the device), True or False."""
    return {"": None, "on": True, "off": False}[os.environ.get(STATIC_VARIABLE, "")]


def tolerance(dtype: torch.dtype) -> float:
    """How far two computations of the same values in ``dtype`` may drift apart (absolute and relative)."""
    return TOLERANCES.get(dtype, 1e-9)


def tiny_model(family: str = "llama", seed: int = 0, vocab_size: int = 32, max_length: int = 64,
               scale: float = 0.5) -> PreTrainedModel:
    """A randomly initialised two-layer model; ``scale`` (the init std) makes its distributions peaky or flat."""
    return _tiny_model(family, seed, vocab_size, max_length, scale, str(kit_device()), kit_dtype())


@functools.lru_cache(maxsize=32)
def _tiny_model(family: str, seed: int, vocab_size: int, max_length: int, scale: float, device: str,
                dtype: torch.dtype) -> PreTrainedModel:
    config_name, model_name = FAMILIES[family]
    config = getattr(transformers, config_name)(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=max_length,
        initializer_range=scale,
        eos_token_id=EOS_ID,
        bos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = getattr(transformers, model_name)(config)
    model.generation_config.eos_token_id = EOS_ID
    return model.to(torch.float64).to(device=device, dtype=dtype).eval()
