import copy
import json
from types import SimpleNamespace

import pytest
import torch

from specmix import Decoder, DecodeSettings, PluginError
from specmix.kernels import row_kernels
from specmix.plugins.diffusion.network import tapped_layers
from specmix.testing import reference_greedy, tiny_model
from specmix.testing.models import kit_static
from specmix.testing.properties import CURVE, assert_parting_at_a_rounding_tie, make_decoder

NAMES = dict(drafter="diffusion", builder="best-first", selector="budget", verifier="tree")


def test_tapped_layers_spread_over_the_target_depth_up_to_the_input_of_the_copied_layers():
    assert tapped_layers(30, 1) == (29,)
    assert tapped_layers(30, 5) == (1, 7, 13, 19, 25)
    assert tapped_layers(36, 5) == (1, 8, 16, 24, 31)


def test_the_feature_cache_follows_the_committed_tokens(registry):
    model = tiny_model("qwen3")
    decoder = make_decoder(registry, NAMES, model, seed=0)
    prompt = [3, 4, 5, 6]
    generation = decoder.generate(prompt, DecodeSettings(max_new_tokens=20, stop_ids=()))
    drafter = decoder.composition.drafter.component
    drafter.catch_up()  # the last verdict's rows wait for a pass that never came
    assert drafter.length == 3 + sum(step.accepted + 1 for step in generation.steps)
    committed = torch.tensor([prompt + list(generation.tokens)])[:, : drafter.length]
    with torch.no_grad():
        states = model(committed, output_hidden_states=True).hidden_states
        tapped = torch.cat([states[layer][0] for layer in drafter.hidden_layers], dim=-1)
        expected = drafter.net.context(drafter.net.features(tapped), torch.arange(drafter.length))
    for (keys, values), (want_keys, want_values) in zip(drafter.context, expected):
        assert torch.allclose(keys, want_keys, atol=1e-9) and torch.allclose(values, want_values, atol=1e-9)


def test_a_drafter_that_drafts_nothing_for_some_steps_catches_up_in_one_pass(registry):
    model = tiny_model("llama")
    drafter = make_decoder(registry, NAMES, model, seed=0).composition.drafter.component
    width = model.config.hidden_size
    rows = [{layer: torch.randn(count, width, dtype=torch.float64) for layer in drafter.hidden_layers} for count in (3, 1, 2)]
    drafter.start(None, rows[0])
    for hidden in rows[1:]:
        drafter.observe(SimpleNamespace(hidden=hidden, tokens=()), None)  # all a verdict gives a drafter that drafted nothing
    assert drafter.length == 0  # nothing computed while the drafter did not draft
    drafter.catch_up()
    tapped = torch.cat([torch.cat([hidden[layer] for layer in drafter.hidden_layers], dim=-1) for hidden in rows])
    expected = drafter.net.context(drafter.net.features(tapped), torch.arange(6))
    assert drafter.length == 6
    for (keys, _), (want, _) in zip(drafter.context, expected):
        assert torch.allclose(keys, want, atol=1e-12)


def test_a_drafter_trained_for_another_target_is_refused_by_name(registry, tmp_path):
    trained = make_decoder(registry, NAMES, tiny_model("llama"), seed=0).composition.drafter.component
    trained.net.save(tmp_path / "drafter")
    with pytest.raises(PluginError, match="trained for llama-.*not this target \\(qwen3-.*specmix train diffusion"):
        make_decoder(registry, NAMES, tiny_model("qwen3"), seed=0,
                     options={"drafter": {"random_layers": None, "weights": str(tmp_path / "drafter")}})
    reloaded = make_decoder(registry, NAMES, tiny_model("llama"), seed=0,
                            options={"drafter": {"random_layers": None, "weights": str(tmp_path / "drafter")}})
    for name, tensor in reloaded.composition.drafter.component.net.state_dict().items():
        assert torch.allclose(tensor, trained.net.state_dict()[name].to(tensor.dtype))


def test_without_weights_the_error_names_the_train_command(registry):
    with pytest.raises(PluginError, match="no trained diffusion drafter ships for this target.*specmix train diffusion"):
        make_decoder(registry, NAMES, tiny_model("mistral"), seed=0, options={"drafter": {"random_layers": None}})
    with pytest.raises(PluginError, match="block_size"):
        registry.compose(options={"drafter": {"block_size": 1}}, **NAMES)


def test_a_listed_vocabulary_limits_what_is_drafted_but_not_what_is_decoded(registry, tmp_path):
    model = tiny_model("llama")
    trained = make_decoder(registry, NAMES, model, seed=0).composition.drafter.component
    trained.net.save(tmp_path / "drafter")
    listed = [7, 3, 11, 20, 5]
    (tmp_path / "drafter" / "vocab.json").write_text(json.dumps(listed))
    settings = DecodeSettings(max_new_tokens=16, stop_ids=())
    drafted, outputs = {}, {}
    for vocab in (3, None):
        decoder = make_decoder(registry, dict(NAMES, selector="all"), model, seed=0,
                               options={"drafter": {"random_layers": None, "weights": str(tmp_path / "drafter"),
                                                    "vocab": vocab}})
        drafter = decoder.composition.drafter.component
        propose, seen = drafter.propose, set()

        def recording(ctx, propose=propose, seen=seen):
            proposal = propose(ctx)
            if proposal.marginals is not None:  # None when there is no room left to draft
                seen.update(proposal.marginals.ids.flatten().tolist())
            return proposal

        drafter.propose = recording
        outputs[vocab] = decoder.generate([3, 4, 5, 6], settings).tokens
        drafted[vocab] = seen
    assert drafted[3] == {7, 3, 11} and len(drafted[None]) > 3
    assert outputs[3] == outputs[None] == tuple(reference_greedy(model, [3, 4, 5, 6], settings))


def test_an_adaptive_block_shrinks_to_nothing_when_the_drafter_is_never_right_and_stays_exact(registry):
    model = tiny_model("llama")
    decoder = make_decoder(registry, dict(NAMES, selector="all"), model, seed=0,
                           options={"drafter": {"adaptive_block": True, "min_gain": 0.3, "top_k": 1}})
    settings = DecodeSettings(max_new_tokens=60, stop_ids=())
    generation = decoder.generate([3, 4, 5, 6], settings)
    assert list(generation.tokens) == reference_greedy(model, [3, 4, 5, 6], settings)
    sizes = [step.tree_size for step in generation.steps]
    later = sizes[len(sizes) // 2:]
    assert sizes[0] > 2 and sum(size == 1 for size in later) >= 0.8 * len(later)  # a random drafter soon stops drafting
    drafter = decoder.composition.drafter.component
    for _ in range(200):  # steps spent not drafting let the evidence fade, and the drafter is tried again
        drafter.reach.fade()
    assert drafter._worth(16) > 1


def test_the_drafters_own_layers_take_the_targets_faster_kernels_inside_its_passes(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECMIX_CACHE_DIR", str(tmp_path))
    model = copy.deepcopy(tiny_model("llama")).float()  # measured kernels are for float32 layers only
    every = classmethod(lambda cls, layers: row_kernels.RowKernels({tuple(layer.weight.shape): dict.fromkeys(
        range(1, 17), row_kernels.COLUMNS) for layer in layers}))
    monkeypatch.setattr(row_kernels.RowKernels, "measure", every)
    through_columns = []
    column_linear = row_kernels.column_linear
    monkeypatch.setattr(row_kernels, "column_linear",
                        lambda input, weight, bias=None: through_columns.append(weight) or column_linear(input, weight, bias))
    decoder = Decoder(model, registry.compose(options={"drafter": {"random_layers": 1}}, **NAMES), cost_curve=CURVE,
                      static=kit_static(), fast=True)  # a caller's model takes the fast paths only when asked
    drafter = decoder.composition.drafter.component
    assert drafter.kernels is not None and drafter.kernels is not decoder.target.row_kernels
    prompt, settings = [3, 4, 5, 6], DecodeSettings(max_new_tokens=20, stop_ids=())
    ours = list(decoder.generate(prompt, settings).tokens)
    drafting = {id(layer.weight) for layer in drafter.net.modules() if isinstance(layer, torch.nn.Linear)}
    assert drafting & {id(weight) for weight in through_columns}, "the drafting passes ran the plain kernels"
    expected = reference_greedy(model, prompt, settings)
    if ours != expected:  # float32: two kernels may round a near-tie either way, and only that is allowed
        assert_parting_at_a_rounding_tie(model, prompt, ours, expected, "the column kernels")
    layer, outside = drafter.net.layers[0].q_proj, torch.randn(3, model.config.hidden_size)
    assert torch.equal(layer(outside), torch.nn.functional.linear(outside, layer.weight))  # plain outside its passes
