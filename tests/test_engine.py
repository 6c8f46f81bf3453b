import pytest
import torch
from hypothesis import given

from specmix import ConfigurationError, CostCurve, Decoder, DecodeSettings, Registry
from specmix.testing import FAMILIES, reference_greedy, tiny_model
from specmix.testing.drafters import ReplayPlugin
from specmix.testing.properties import check_greedy_identical, kit_registry, make_decoder
from specmix.testing.strategies import greedy_cases, kit_settings


@pytest.fixture
def vanilla():
    return Decoder(tiny_model(), Registry.load().compose("vanilla"))


@pytest.mark.parametrize(
    "prompt, message",
    [
        ([], "prompt is empty"),
        ([1, 99], "outside the vocabulary"),
        ([-1], "outside the vocabulary"),
        ([[1, 2]], "1-D sequence"),
        ([0.5, 1.0], "1-D sequence"),
        (list(range(8)) * 8, "context holds 64"),
    ],
)
def test_bad_prompts_get_clear_errors(vanilla, prompt, message):
    with pytest.raises(ConfigurationError, match=message):
        vanilla.generate(prompt)


def test_max_new_tokens_must_be_positive(vanilla):
    with pytest.raises(ConfigurationError, match="max_new_tokens"):
        vanilla.generate([1, 2], DecodeSettings(max_new_tokens=0))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_vanilla_matches_transformers_generate(family):
    model = tiny_model(family)
    prompt = [3, 14, 15, 9, 2, 6]
    settings = DecodeSettings(max_new_tokens=30, stop_ids=())
    expected = model.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, eos_token_id=None,
                              min_new_tokens=30)[0, len(prompt):].tolist()
    generation = Decoder(model, Registry.load().compose("vanilla")).generate(prompt, settings)
    assert list(generation.tokens) == expected
    assert len(generation.steps) == 30 and generation.tau == 1.0
    assert generation.stop_reason == "length"


def test_stop_reasons_and_streaming(vanilla):
    model = tiny_model()
    free = reference_greedy(model, [5, 6], DecodeSettings(max_new_tokens=20, stop_ids=()))
    stop = free[7]
    steps = list(vanilla.stream([5, 6], DecodeSettings(max_new_tokens=20, stop_ids=(stop,))))
    tokens = [t for step in steps for t in step.tokens]
    assert tokens == free[: free.index(stop) + 1]
    assert [s.stop_reason for s in steps[:-1]] == [None] * (len(steps) - 1)
    assert steps[-1].stop_reason == "stop"
    full = vanilla.generate([2 + i % 30 for i in range(60)], DecodeSettings(max_new_tokens=20, stop_ids=()))
    assert full.stop_reason == "context" and len(full.tokens) == 4


def test_a_stop_id_inside_an_accepted_path_ends_generation_there(registry):
    model = tiny_model("qwen3")
    free = reference_greedy(model, [7, 8, 9], DecodeSettings(max_new_tokens=24, stop_ids=()))
    stop = free[10]
    decoder = make_decoder(registry, dict(drafter="kit-random-marginals", builder="chain", selector="all",
                                          verifier="tree"), model, seed=3)
    generation = decoder.generate([7, 8, 9], DecodeSettings(max_new_tokens=24, stop_ids=(stop,)))
    assert list(generation.tokens) == free[: free.index(stop) + 1]
    assert generation.tau > 1


def test_in_pass_drafting_rides_in_the_verification_forward(registry):
    """The riders drafter compares every rider's logits with a plain forward over its visible path."""
    model = tiny_model("mistral")
    decoder = make_decoder(registry, dict(drafter="kit-riders", builder="drafted", selector="all", verifier="tree"),
                           model, seed=1)
    prompt = [4, 5, 6, 7]
    generation = decoder.generate(prompt, DecodeSettings(max_new_tokens=40, stop_ids=()))
    assert list(generation.tokens) == reference_greedy(model, prompt, DecodeSettings(max_new_tokens=40, stop_ids=()))
    assert sum(step.riders for step in generation.steps) > 20
    assert generation.tau > 1, "Jacobi guesses from rider logits should sometimes be accepted"


def test_feature_conditioned_drafting_sees_target_hidden_states(registry):
    """The features drafter checks its cache against the target's hidden states before every proposal."""
    model = tiny_model("qwen2")
    decoder = make_decoder(registry, dict(drafter="kit-features", builder="chain", selector="all", verifier="tree"),
                           model, seed=2)
    generation = decoder.generate([1, 2, 3, 4, 5], DecodeSettings(max_new_tokens=30, stop_ids=()))
    drafter = decoder.composition.drafter.component
    committed_in_cache = 4 + sum(step.accepted + 1 for step in generation.steps)
    assert {states.shape[0] for states in drafter.features.values()} == {committed_in_cache}
    assert generation.tau > 1


PADDING = CostCurve(sizes=(1, 2, 16, 32), seconds=(1.0, 5.0, 1.1, 3.0))
"""A curve on which 2 to 15 new tokens cost more than 16, so every tree forward of 2 to 15 runs at 16."""
MIXED = dict(drafter="kit-riders+kit-features", builder="drafted+chain", selector="budget", verifier="tree")


@given(case=greedy_cases())
@kit_settings()
def test_forwards_padded_to_a_cheaper_size_keep_greedy_output_and_the_cache_exact(registry, case):
    check_greedy_identical(registry, MIXED, case, cost_curve=PADDING)


def test_a_tree_forward_runs_at_the_cheapest_size_the_curve_names():
    """A replayed five-token chain makes a six-node tree, which the curve says runs cheaper at sixteen."""
    model = tiny_model("llama")
    prompt, settings = [4, 5, 6, 7], DecodeSettings(max_new_tokens=40, stop_ids=())
    free = reference_greedy(model, prompt, settings)
    composition = kit_registry([ReplayPlugin()]).compose(
        drafter="kit-replay", builder="drafted", selector="budget", verifier="tree",
        options=dict(drafter=dict(path=prompt + free, length=5)))
    decoder = Decoder(model, composition, cost_curve=PADDING)
    forward_sizes = []
    decoder.target.model.model.register_forward_pre_hook(  # the decoder's own copy of the model is what runs
        lambda _, args, kwargs: forward_sizes.append(kwargs["input_ids"].shape[-1]), with_kwargs=True)
    generation = decoder.generate(prompt, settings)
    assert list(generation.tokens) == free
    tree_sizes = [step.tree_size for step in generation.steps]
    assert forward_sizes[1:] == [16 if 1 < size < 16 else size for size in tree_sizes]  # after the prefill
    assert 6 in tree_sizes
