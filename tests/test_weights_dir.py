import pytest
import torch

from specmix import ConfigurationError, PluginError
from specmix.plugins.taps.scorer import Scorer, ScorerConfig
from specmix.plugins.trained import to_safetensors, weights_dir
from specmix.testing import tiny_model
from specmix.testing.properties import make_decoder

DFLASH = dict(drafter="diffusion", builder="chain", selector="all", verifier="tree")


def _scorer(seed=0):
    torch.manual_seed(seed)
    return Scorer(ScorerConfig(embed_dim=6, feature_dim=8))


def _pickled(module, directory):
    """A directory as written before weights were safetensors."""
    weights_dir.write_config(module.config, directory)
    torch.save(module.state_dict(), directory / weights_dir.PICKLED_FILE)
    return directory


def test_weights_are_saved_as_safetensors_and_read_back_bit_for_bit(tmp_path):
    scorer = _scorer()
    scorer.save(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = Scorer.load(tmp_path)
    for name, tensor in scorer.state_dict().items():
        assert torch.equal(loaded.state_dict()[name].view(torch.int32), tensor.view(torch.int32)), name


def test_an_old_pickled_directory_is_refused_with_the_command_that_converts_it(tmp_path):
    directory = _pickled(_scorer(), tmp_path)
    with pytest.raises(ConfigurationError, match="old pickled model.pt; convert them once with "
                                                 "`python -m specmix.plugins.trained.to_safetensors .*`$"):
        Scorer.load(directory)
    (directory / weights_dir.PICKLED_FILE).unlink()
    with pytest.raises(ConfigurationError, match="holds no model.safetensors"):
        Scorer.load(directory)


def test_the_converter_rewrites_the_pickle_tensor_for_tensor_and_removes_it(tmp_path, capsys):
    scorer = _scorer(seed=3)
    directory = _pickled(scorer, tmp_path)
    assert to_safetensors.main([str(directory)]) == 0
    assert "model.pt -> model.safetensors" in capsys.readouterr().out
    assert not (directory / weights_dir.PICKLED_FILE).exists()
    loaded = Scorer.load(directory)
    for name, tensor in scorer.state_dict().items():
        assert torch.equal(loaded.state_dict()[name].view(torch.int32), tensor.view(torch.int32)), name


def test_a_drafter_directory_from_before_is_refused_by_the_plugin_too(registry, tmp_path):
    model = tiny_model("llama")
    trained = make_decoder(registry, DFLASH, model, seed=0).composition.drafter.component
    _pickled(trained.net, tmp_path)
    with pytest.raises(PluginError, match="old pickled model.pt; convert them once"):
        make_decoder(registry, DFLASH, model, seed=0, options={"drafter": {"random_layers": None, "weights": str(tmp_path)}})
