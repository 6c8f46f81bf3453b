"""Tiny random decoder models of several HF families, in fp64 so that argmax ties cannot flip."""

from __future__ import annotations

import functools

import torch
import transformers

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
}
EOS_ID = 1


@functools.lru_cache(maxsize=32)
def tiny_model(family: str = "llama", seed: int = 0, vocab_size: int = 32, max_length: int = 64, scale: float = 0.5):
    """A randomly initialised two-layer model; ``scale`` (the init std) makes its distributions peaky or flat."""
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
    return model.to(torch.float64).eval()
