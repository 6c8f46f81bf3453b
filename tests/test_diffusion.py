import pytest
import torch

from specmix import DecodeSettings, PluginError
from specmix.plugins.diffusion_model import tapped_layers
from specmix.testing import tiny_model
from specmix.testing.properties import make_decoder

NAMES = dict(drafter="diffusion", builder="best-first", selector="budget", verifier="tree")


def test_tapped_layers_spread_over_the_target_depth():
    assert tapped_layers(30, 1) == (15,)
    assert tapped_layers(30, 5) == (1, 8, 14, 20, 27)
    assert tapped_layers(36, 5) == (1, 9, 17, 25, 33)


def test_the_feature_cache_follows_the_committed_tokens(registry):
    decoder = make_decoder(registry, NAMES, tiny_model("qwen3"), seed=0)
    generation = decoder.generate([3, 4, 5, 6], DecodeSettings(max_new_tokens=20, stop_ids=()))
    drafter = decoder.composition.drafter.component
    assert drafter.length == 3 + sum(step.accepted + 1 for step in generation.steps)
    assert all(keys.shape[-2] == drafter.length for keys, _ in drafter.context)


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
