"""Names of what is measured once and cached: the same for the same model and machine, apart for another CPU."""

import json
import os

import pytest

from specmix import identity
from specmix.testing import tiny_model


@pytest.fixture
def cpu_kind(monkeypatch):
    def use(kind):
        monkeypatch.setattr(identity, "processor", lambda: json.dumps([kind, 2]))
    return use


def test_a_model_measured_on_another_kind_of_cpu_is_named_apart(cpu_kind):
    model = tiny_model()
    cpu_kind({"model name": "AMD EPYC", "cpu family": "23", "model": "49"})
    first, module = identity.measured_name(model), identity.shapes_name(model.model.layers)
    assert identity.measured_name(tiny_model()) == first  # the same weights, loaded again
    cpu_kind({"model name": "AMD EPYC", "cpu family": "25", "model": "1"})
    assert identity.measured_name(model) != first and identity.shapes_name(model.model.layers) != module


def test_this_machines_cpu_is_described_and_names_stay_file_safe():
    kind, cores = json.loads(identity.processor())
    assert kind and cores == os.cpu_count()  # the cores, not the threads this process was told to use
    name = identity.measured_name(tiny_model())
    assert name.startswith("llama-") and "-cpu-" in name and all(c.isalnum() or c in "-_." for c in name)
