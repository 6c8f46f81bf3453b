"""Linear layers take the column kernel only where measured faster and only inside the target's forwards."""

import copy
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specmix import Decoder, DecodeSettings, SpecmixWarning
from specmix.cost import _cache_file
from specmix.row_kernels import RowKernels, SwitchedLinear, active, column_linear, switch_layers
from specmix.target import Target
from specmix.testing import reference_greedy, tiny_model
from specmix.testing.properties import assert_parting_at_a_rounding_tie, kit_registry


@settings(deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 20), lead=st.sampled_from([(), (1,), (2, 1)]),
       out=st.integers(1, 40), inp=st.integers(1, 40), bias=st.booleans())
def test_the_column_kernel_computes_the_linear_layer(seed, rows, lead, out, inp, bias):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out, inp, dtype=torch.float64, generator=generator)
    offset = torch.randn(out, dtype=torch.float64, generator=generator) if bias else None
    x = torch.randn(*lead, rows, inp, dtype=torch.float64, generator=generator)
    got = column_linear(x, weight, offset)
    assert got.shape == (*lead, rows, out) and got.is_contiguous()
    torch.testing.assert_close(got, torch.nn.functional.linear(x, weight, offset), rtol=1e-12, atol=1e-12)


def _fresh(seed, dtype=torch.float32, **sizes):
    """A model of its own (the kit's tiny models are shared, and these get their layers switched)."""
    return copy.deepcopy(tiny_model(seed=seed, **sizes)).to(dtype)


def _switched(out=6, inp=5, bias=True):
    layer = torch.nn.Linear(inp, out, bias=bias)
    layer.__class__ = SwitchedLinear
    return layer


def test_a_switched_layer_computes_as_before_outside_the_targets_forwards():
    layer, x = _switched(), torch.randn(2, 5)
    assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    with active(RowKernels({(6, 5): {2}})):
        assert torch.equal(layer(x), column_linear(x, layer.weight, layer.bias))
        assert torch.equal(layer(x[:1]), torch.nn.functional.linear(x[:1], layer.weight, layer.bias))  # 1 row: plain
        with active(None):
            assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
        assert torch.equal(layer(x), column_linear(x, layer.weight, layer.bias))  # the outer choice is back
    assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_the_choice_is_measured_once_per_machine_and_kept(tmp_path, monkeypatch):
    model = _fresh(3)
    chosen = RowKernels({tuple(m.weight.shape): {1, 2} for m in model.modules() if isinstance(m, torch.nn.Linear)})
    calls = []
    monkeypatch.setattr(RowKernels, "measure", classmethod(lambda cls, layers: calls.append(len(layers)) or chosen))
    assert switch_layers(model, "m", tmp_path) == chosen and len(calls) == 1
    assert all(type(m) is SwitchedLinear for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert switch_layers(model, "m", tmp_path) == chosen and len(calls) == 1  # the same model: remembered
    again = _fresh(3)
    assert switch_layers(again, "m", tmp_path) == chosen and len(calls) == 1  # the same weights here: read back
    (file,) = (tmp_path / "row-kernels").iterdir()
    file.write_text("{not json")
    with pytest.warns(SpecmixWarning, match="unreadable"):
        assert switch_layers(_fresh(3), "m", tmp_path) == chosen
    assert len(calls) == 2 and json.loads(file.read_text())  # measured again, and the file mended


def test_layers_stay_as_they_are_where_no_kernel_is_faster(tmp_path, monkeypatch):
    model = _fresh(4)
    monkeypatch.setattr(RowKernels, "measure", classmethod(lambda cls, layers: RowKernels({})))
    assert switch_layers(model, "m", tmp_path) is None
    assert not any(type(m) is SwitchedLinear for m in model.modules())
    assert switch_layers(_fresh(4, torch.float64), "m", tmp_path) is None  # float64 layers are never measured


def test_greedy_output_through_the_column_kernels_is_the_targets(tmp_path, monkeypatch):
    """Every layer on the column kernel at every row count a step runs: the output is still the target's own."""
    model = _fresh(5, vocab_size=48)
    every = RowKernels({tuple(m.weight.shape): set(range(1, 17)) for m in model.modules()
                        if isinstance(m, torch.nn.Linear)})
    monkeypatch.setattr(RowKernels, "measure", classmethod(lambda cls, layers: every))
    decoder = Decoder(model, kit_registry().compose(drafter="kit-random-tree", builder="drafted", selector="all",
                                                   verifier="tree"), cache_dir=tmp_path)
    assert decoder.target.row_kernels == every
    prompt, settings = [1, 5, 9, 2], DecodeSettings(max_new_tokens=24, stop_ids=())
    ours, expected = list(decoder.generate(prompt, settings).tokens), reference_greedy(model, prompt, settings)
    if ours != expected:  # float32: two kernels may round a near-tie either way, and only that is allowed
        assert_parting_at_a_rounding_tie(model, prompt, ours, expected, "the column kernels")


def test_a_cost_curve_is_kept_per_kernel_choice(tmp_path, monkeypatch):
    """A curve measured over one choice of kernels is not read back for another (a choice measured again, say)."""
    monkeypatch.setenv("SPECMIX_CACHE_DIR", str(tmp_path))
    names = []
    for rows in ({1, 2}, {1, 2, 3}, {1, 2}):
        choice = classmethod(lambda cls, layers, rows=rows: RowKernels({tuple(layer.weight.shape): rows
                                                                        for layer in layers}))
        monkeypatch.setattr(RowKernels, "measure", choice)
        for stored in (tmp_path / "row-kernels").glob("*.json"):
            stored.unlink()
        names.append(_cache_file(Target(_fresh(6)), tmp_path).name)
    assert names[0] != names[1] and names[0] == names[2]
