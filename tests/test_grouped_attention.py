import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from specmix import Target, TokenTree
from specmix.attention import additive_mask
from specmix.kernels.grouped_attention import NAME, group_queries, grouped_sdpa
from specmix.testing import tiny_model


class _Grouped(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([torch.float32, torch.float64]), st.integers(1, 4), st.integers(1, 3), st.integers(1, 12),
       st.integers(0, 40), st.booleans(), st.integers(0, 2**31 - 1))
def test_grouped_queries_attend_bit_for_bit_as_transformers_sdpa(dtype, kv_heads, groups, count, past, boolean,
                                                                   seed):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(1, kv_heads * groups, count, 8, generator=generator, dtype=dtype)
    key, value = torch.randn(2, 1, kv_heads, past + count, 8, generator=generator, dtype=dtype)
    visible = (torch.rand(count, count, generator=generator) < 0.5) | torch.eye(count, dtype=torch.bool)
    mask = additive_mask(visible, past, dtype, "cpu")
    if boolean:
        mask = mask == 0
    module = _Grouped(groups)
    ours, _ = grouped_sdpa(module, query, key, value, mask, scaling=0.3)
    stock, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert torch.equal(ours, stock)


def test_a_fast_target_on_cpu_takes_grouped_sdpa_on_its_copy_and_verifies_trees_bit_for_bit_as_before():
    model = copy.deepcopy(tiny_model("llama", seed=5)).float()  # a copy: .float() converts the shared model in place
    tree = TokenTree([3, 4, 5, 6, 7, 8], [-1, 0, 0, 1, 1, 2], vocab_size=32)
    prompt = torch.tensor([1, 2, 9, 10, 11, 12, 13])
    target = Target(model, fast=True)
    assert target.model.config._attn_implementation == NAME and model.config._attn_implementation == "sdpa"
    target.prefill(prompt)
    grouped = target.forward_tree(tree).logits.all()
    target.model.set_attn_implementation("sdpa")
    target.reset()
    target.prefill(prompt)
    assert torch.equal(grouped, target.forward_tree(tree).logits.all())


def test_hf_generate_runs_alike_on_grouped_sdpa():
    stock = copy.deepcopy(tiny_model("llama", seed=6))
    model = copy.deepcopy(stock)
    assert group_queries(model)
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert torch.equal(stock.generate(ids, **settings), model.generate(ids, **settings))


@pytest.mark.parametrize("backend", ["eager", NAME])
def test_only_a_model_on_stock_sdpa_is_switched(backend):
    model = copy.deepcopy(tiny_model("llama", seed=7))
    model.set_attn_implementation(backend)
    assert not group_queries(model)
    assert model.config._attn_implementation == backend
