import copy

import pytest
import torch
from hypothesis import given

from specmix import Decoder, DecodeSettings, Registry, Target, TokenTree
from specmix.errors import ConfigurationError
from specmix.kernels.static_shapes import BUCKETS, bucket, capacity_mask, padded
from specmix.kv_cache import SlotCache
from specmix.testing import check_cache_matches_rebuild, kit_registry, reference_greedy, tiny_model
from specmix.testing.strategies import greedy_cases, kit_settings

NO_CUDA = "CUDA graphs need a CUDA device, and none is present"


def test_forward_sizes_round_up_to_a_bucket():
    assert [bucket(n) for n in (1, 2, 3, 5, 16, 17)] == [1, 2, 4, 8, 16, 32]
    assert bucket(BUCKETS[-1] + 1) == BUCKETS[-1] + 1


def test_padding_tokens_see_only_themselves_and_nothing_sees_them():
    visible = torch.tensor([[True, False, False], [True, True, False], [True, False, True]])
    ids, positions, grown = padded(torch.tensor([7, 8, 9]), torch.tensor([4, 5, 5]), visible, 5)
    assert ids.tolist() == [7, 8, 9, 7, 7] and positions.tolist() == [4, 5, 5, 4, 4]
    assert torch.equal(grown[:3, :3], visible)
    assert not grown[:3, 3:].any() and torch.equal(grown[3:, :], torch.eye(5, dtype=torch.bool)[3:])
    mask = capacity_mask(grown, past=2, capacity=10, dtype=torch.float64)
    allowed = mask[0, 0] == 0
    assert mask.shape == (1, 1, 5, 10)
    assert allowed[:, :2].all() and torch.equal(allowed[:, 2:7], grown) and not allowed[:, 7:].any()


def _tree_forward(target, tree_tokens, parents, riders_visible):
    """A tree with extra rows after it, as a verifier with riders sends it; returns the logits."""
    tree = TokenTree(tokens=tree_tokens, parents=parents, vocab_size=32)
    size = tree.size + riders_visible.shape[0]
    visible = torch.zeros(size, size, dtype=torch.bool)
    visible[:tree.size, :tree.size] = tree.ancestor_mask()
    visible[tree.size:, :] = riders_visible
    ids = torch.arange(3, 3 + size) % 32
    positions = target.length + torch.tensor([*tree.depth_list, *range(1, riders_visible.shape[0] + 1)])
    return target.forward(ids, positions, visible)[0]


@pytest.mark.parametrize("capacity", [4, 1024])
def test_static_forwards_give_the_dynamic_logits_and_cache(capacity):
    model = tiny_model("llama")
    dynamic, static = Target(model, static=False), Target(model, static=True, capacity=capacity)
    assert static.static and not dynamic.static
    prompt = torch.tensor([5, 6, 7, 8, 9, 10, 11])
    riders = torch.zeros(2, 7, dtype=torch.bool)
    riders[:, 0], riders[0, 5], riders[1, 5:] = True, True, True
    for target in (dynamic, static):
        target.prefill(prompt)
    assert static.length == dynamic.length == 7
    results = [_tree_forward(t, [1, 2, 3, 4, 5], [-1, 0, 1, 0, 3], riders) for t in (dynamic, static)]
    assert torch.allclose(*results, atol=1e-12)  # 7 tokens, padded to 8 in the static cache
    for target in (dynamic, static):
        target.compact(torch.tensor([0, 3, 4]))
    for ours, theirs in zip(static.cache.layers, dynamic.cache.layers):
        assert torch.allclose(ours.keys, theirs.keys) and torch.allclose(ours.values, theirs.values)


def test_a_full_slot_cache_moves_into_a_larger_one():
    model = tiny_model("llama")
    target = Target(model, static=True, capacity=4)
    target.prefill(torch.arange(2, 12))
    assert target.cache.capacity >= 10 and isinstance(target.cache, SlotCache)
    check_cache_matches_rebuild(target, model, list(range(2, 12)) + [0])


def test_static_shapes_need_an_additive_mask_backend():
    model = copy.deepcopy(tiny_model("llama"))  # tiny_model is cached; this changes its attention backend
    model.set_attn_implementation("flex_attention")
    with pytest.raises(ConfigurationError, match="additive-mask"):
        Target(model, static=True)


@kit_settings()
@given(case=greedy_cases())
def test_decoding_with_static_shapes_is_exact(case):
    model = tiny_model(case.family, case.model_seed)
    registry = kit_registry()
    decoder = Decoder(model, registry.compose(drafter="kit-riders", builder="drafted", selector="all", verifier="tree",
                                              options={"drafter": {"seed": case.drafter_seed, "oracle": model}}),
                      static=True)
    tokens = []
    for step in decoder.stream(case.prompt, case.settings):
        tokens.extend(step.tokens)
        if step.stop_reason is None:
            check_cache_matches_rebuild(decoder.target, model, [*case.prompt, *tokens])
    assert tokens == reference_greedy(model, case.prompt, case.settings)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_cuda_graphs_replay_exact_greedy_decoding():
    model = tiny_model("llama").to("cuda")
    decoder = Decoder(model, Registry.load().compose("vanilla"))
    assert decoder.target.static
    settings = DecodeSettings(max_new_tokens=12, stop_ids=())
    prompt = [5, 6, 7, 8]
    tokens = list(decoder.generate(prompt, settings).tokens)
    assert tokens == reference_greedy(model, prompt, settings)
    graphs = decoder.target._static._graphed
    assert graphs and all(graph is not None for graph in graphs.values()), "no forward was captured as a graph"


@pytest.mark.parametrize("static", [False, True])
def test_a_prefill_runs_the_lm_head_over_its_last_token_only(static):
    model = tiny_model("llama")
    target = Target(model, static=static, capacity=64)  # (building it checks the head once, on a short input)
    rows = []
    head = target.model.get_output_embeddings()  # the target's own copy of the model is what runs
    hook = head.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[1]))
    try:
        prompt = torch.arange(2, 22)
        target.prefill(prompt)
        logits, _ = target.forward(torch.tensor([5]), torch.tensor([20]), torch.ones(1, 1, dtype=torch.bool))
    finally:
        hook.remove()
    assert rows == [1, 1]  # 20 prompt tokens (padded to 32 when static), then one decoding token
    expected = model(input_ids=torch.cat([prompt, torch.tensor([5])])[None]).logits[0, -1]
    assert torch.allclose(logits[0], expected, atol=1e-10)
