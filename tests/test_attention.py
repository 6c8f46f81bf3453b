import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.functional import scaled_dot_product_attention

from specmix import ConfigurationError, Decoder, DecodeSettings, Registry, Target, TokenTree
from specmix.attention import additive_mask, backend_of, block_mask
from specmix.testing import tiny_model


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 150), st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_the_block_mask_lets_flex_attention_see_what_the_additive_mask_lets_sdpa_see(past, count, seed):
    from torch.nn.attention.flex_attention import flex_attention

    generator = torch.Generator().manual_seed(seed)
    visible = (torch.rand(count, count, generator=generator) < 0.4) | torch.eye(count, dtype=torch.bool)
    q = torch.randn(1, 2, count, 8, generator=generator)
    k, v = torch.randn(2, 1, 2, past + count, 8, generator=generator)
    sdpa = scaled_dot_product_attention(q, k, v, attn_mask=additive_mask(visible, past, torch.float32, "cpu"))
    flex = flex_attention(q, k, v, block_mask=block_mask(visible, past, "cpu"))
    assert torch.allclose(sdpa, flex, atol=1e-5)


def test_flex_attention_is_refused_on_cpu():
    model = copy.deepcopy(tiny_model("llama", seed=3))  # tiny_model is cached; this changes its attention backend
    model.set_attn_implementation("flex_attention")
    with pytest.raises(ConfigurationError, match="flex_attention is refused on CPU"):
        Target(model)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="flex_attention is refused on CPU")
def test_a_model_on_flex_attention_verifies_trees_like_one_on_sdpa():
    # Copies: tiny_model is cached, and these change its dtype, device and attention backend.
    sdpa, flex = (copy.deepcopy(tiny_model("llama", seed=3)).float().cuda() for _ in range(2))
    flex.set_attn_implementation("flex_attention")
    assert (backend_of(sdpa), backend_of(flex)) == ("sdpa", "flex_attention")
    tree = TokenTree.from_paths(5, [[1, 2, 3], [1, 4], [6]], vocab_size=32)
    logits = []
    for model in (sdpa, flex):
        target = Target(model, static=False)
        target.prefill(torch.tensor([7, 8, 9, 10]))
        out, _ = target.forward(tree.tokens, 4 + torch.tensor(tree.depth_list), tree.ancestor_mask())
        logits.append(out)
    assert torch.allclose(*logits, atol=1e-5)
    settings_ = DecodeSettings(max_new_tokens=12, stop_ids=())
    runs = [Decoder(model, Registry.load().compose("vanilla"), static=False).generate([3, 4, 5], settings_).tokens
            for model in (sdpa, flex)]
    assert runs[0] == runs[1]
