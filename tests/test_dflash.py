"""DFlash checkpoints in and out, checked against the DFlash authors' own code (the ``dflash`` package).

Drafters here are built by the reference classes, with random weights, and saved with their
``save_pretrained``; targets are tiny random Qwen3 and Llama models in fp64.
"""

import contextlib
import json
import os

import pytest
import torch
from transformers import Qwen3Config

from specmix import ConfigurationError, DecodeSettings, PluginError, Target
from specmix.plugins.diffusion import formats
from specmix.plugins.diffusion.dflash_net import DFlashNet
from specmix.plugins.diffusion.training.loss import Example, TrainSettings, train
from specmix.testing import check_sampling_distribution, reference_greedy, tiny_model
from specmix.testing.properties import make_decoder
from specmix.testing.suite import SAMPLING

REQUIRED = "SPECMIX_REQUIRE_REFERENCES"


@pytest.fixture(scope="module")
def reference():
    """The reference implementation: a missing package fails where references are required (CI), else skips."""
    try:
        import dflash.model
    except ImportError as exc:
        if os.environ.get(REQUIRED):
            pytest.fail(f"the reference implementation is required here ({REQUIRED}) and missing: {exc}")
        pytest.skip(f"the DFlash reference (pip install --no-deps dflash==0.1.0) is not installed: {exc}")
    return dflash.model


def _reference_drafter(reference, target, second=False, block_size=4, seed=0, layers=2):
    """A DFlash (or DFlash 2) drafter for ``target``, built by the reference classes with random weights."""
    text = target.config
    dflash_config = {"block_size": block_size, "mask_token_id": text.vocab_size - 1, "target_layer_ids": [0, 1][:layers]}
    if second:
        dflash_config.update(conv_kernel_size=3, conv_group_size=4, selector_rank=4, selector_top_k=4)
    config = Qwen3Config(hidden_size=text.hidden_size, intermediate_size=32, num_hidden_layers=layers, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=8, vocab_size=text.vocab_size, rms_norm_eps=1e-6,
                         max_position_embeddings=text.max_position_embeddings, num_target_layers=text.num_hidden_layers,
                         dflash_config=dflash_config)
    torch.manual_seed(seed)
    model = (reference.DFlash2DraftModel if second else reference.DFlashDraftModel)(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.uniform_(0.5, 1.5) if "norm" in name else parameter.normal_(0, 0.4)
    return model.double().eval()


def _saved(model, path):
    model.save_pretrained(path)
    return path


FAMILIES = ["qwen3", "llama"]


@pytest.mark.parametrize("second", [False, True], ids=["dflash", "dflash2"])
@pytest.mark.parametrize("family", FAMILIES)
def test_our_drafter_gives_the_reference_logits_at_every_block_position(reference, tmp_path, family, second):
    target = tiny_model(family)
    ref = _reference_drafter(reference, target, second)
    ours = formats.load_dflash(_saved(ref, tmp_path), Target(target)).double().eval()
    embedding, head = target.get_input_embeddings(), target.get_output_embeddings()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for length in (1, 5, 17):
            ids = torch.randint(0, 31, (1, length), generator=generator)
            tapped = reference.extract_context_feature(target(ids, output_hidden_states=True).hidden_states,
                                                       ref.target_layer_ids)
            first = torch.randint(0, 31, (1,), generator=generator)
            block = torch.cat([first, first.new_full((3,), ref.mask_token_id)])[None]
            theirs = ref(target_hidden=tapped, noise_embedding=torch.nn.functional.embedding(block, embedding.weight),
                         position_ids=torch.arange(length + 4)[None])[:, 1:]
            mine = ours(ours.block_inputs(embedding, first, 4), torch.arange(length, length + 4),
                        ours.context(ours.features(tapped[0]), torch.arange(length)))[1:]
            assert torch.allclose(ref.compute_logits(theirs, head)[0], ours.logits(mine, head), atol=1e-9, rtol=0)
            if second:
                tokens, _, _ = ref.propose(theirs, first, head, 0.0)
                logprobs = torch.log_softmax(ours.logits(mine, head), dim=-1).topk(4, dim=-1)
                transitions = ours.candidate_selector.transitions(mine, first, logprobs.indices)
                chosen, previous = [], 0
                for position in range(3):
                    previous = int((logprobs.values[position] + transitions[position, previous]).argmax())
                    chosen.append(int(logprobs.indices[position, previous]))
                assert chosen == tokens[0].tolist()


def _reference_steps(reference, draft, target, prompt, max_new_tokens, stop_ids):
    """``dflash_generate``'s tokens and the tokens it committed per target forward, counted from the forwards'
    positions (its own statistics call CUDA)."""
    starts = []
    hook = target.register_forward_pre_hook(lambda module, args, kwargs: starts.append(int(kwargs["position_ids"][0, 0])),
                                            with_kwargs=True)
    try:
        out = reference.dflash_generate(draft, target, torch.tensor([prompt]), max_new_tokens, stop_ids)
    finally:
        hook.remove()
    tokens = out[0, len(prompt):].tolist()
    step_starts = starts[1:] + [len(prompt) + len(tokens) - 1]  # each step starts at its root; the last root ends it
    return tokens, [1] + [b - a for a, b in zip(step_starts, step_starts[1:])]


def _trained_drafter(target, directory):
    """A DFlash drafter trained here for a few hundred steps on the target's own greedy text, so that steps accept drafts."""
    generator = torch.Generator().manual_seed(0)
    examples = []
    for _ in range(8):
        prompt = torch.randint(2, 31, (5,), generator=generator).tolist()
        examples.append(Example(tuple(prompt + reference_greedy(target, prompt, DecodeSettings(max_new_tokens=30,
                                                                                                   stop_ids=()))), 5))
    net = DFlashNet.for_target(target, 1, (2,), block_size=6, mask_token_id=31).double()
    train(net, target, examples, TrainSettings(steps=300, lr=1e-2, anchors=6, gamma=3.0))
    formats.save_drafter(net, directory, Target(target).fingerprint)
    return directory


@pytest.mark.parametrize("kind", ["dflash", "dflash2", "dflash-trained"])
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_dflash_commits_what_the_reference_commits_step_by_step(reference, tmp_path, family, kind):
    target = tiny_model(family, seed=1)
    second = kind == "dflash2"
    directory = (_trained_drafter(target, tmp_path) if kind == "dflash-trained"
                 else _saved(_reference_drafter(reference, target, second, block_size=6, seed=2), tmp_path))
    draft = (reference.DFlash2DraftModel if second else reference.DFlashDraftModel).from_pretrained(directory).double()
    method = dict(drafter="diffusion", builder="chain", selector="all", verifier="tree")
    accepted = 0
    for prompt, stops in (([3, 4, 5, 6, 7], None), ([9, 8, 7], [1]), ([2], [1, 5]), ([11, 12, 13, 11, 12], None)):
        decoder = make_decoder(_registry(), method, target, seed=0,
                               options={"drafter": {"weights": str(directory), "random_layers": None}})
        settings = DecodeSettings(max_new_tokens=40, stop_ids=() if stops is None else tuple(stops))
        with _drafted_blocks(reference) as (ours, theirs):
            generation = decoder.generate(prompt, settings)
            tokens, committed = _reference_steps(reference, draft, target, prompt, 40, stops)
        assert list(generation.tokens) == tokens == reference_greedy(target, prompt, settings)
        assert [step.committed for step in generation.steps] == committed
        # Block by block the same hidden states, to the end of the output where blocks get shorter; the
        # reference may draft once more at the very end, where a draft could not add a token.
        assert len(theirs) - 1 <= len(ours) <= len(theirs)
        for mine, reference_block in zip(ours, theirs):
            assert mine.shape == reference_block.shape and torch.allclose(mine, reference_block, atol=1e-9, rtol=0)
        accepted += sum(step.accepted for step in generation.steps)
    if kind == "dflash-trained":
        assert accepted >= 5, "a drafter trained on the target's text should be right at times"


@contextlib.contextmanager
def _drafted_blocks(reference):
    """The hidden states of each block drafted by our network and by the reference's, past the root."""
    ours, theirs = [], []

    def record(module, args, output):
        if isinstance(module, DFlashNet):
            ours.append(output[1:].detach().clone())
        elif isinstance(module, reference.DFlashDraftModel):
            theirs.append(output[0, 1:].detach().clone())

    handle = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        yield ours, theirs
    finally:
        handle.remove()


def _registry():
    from specmix.testing import kit_registry

    return kit_registry()


def test_a_drafter_trained_here_loads_in_the_reference_and_drafts_the_same(reference, tmp_path):
    target = tiny_model("llama")
    net = DFlashNet.for_target(target, 2, (1, 2), block_size=4, mask_token_id=31).double()
    examples = [Example(tuple(range(3, 20)), 5), Example(tuple(range(10, 30)), 4)]
    train(net, target, examples, TrainSettings(steps=6, lr=3e-3, anchors=4))
    formats.save_drafter(net, tmp_path, Target(target).fingerprint)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and config["dflash_config"]["target_layer_ids"] == [0, 1]
    draft = reference.DFlashDraftModel.from_pretrained(tmp_path).double()
    for name, tensor in net.state_dict().items():
        assert torch.equal(draft.state_dict()[name].float(), tensor.float()), name  # written in fp32
    prompt = [4, 5, 6, 7]
    tokens, committed = _reference_steps(reference, draft, target, prompt, 24, None)
    decoder = make_decoder(_registry(), dict(drafter="diffusion", builder="chain", selector="all", verifier="tree"),
                           target, seed=0, options={"drafter": {"weights": str(tmp_path), "random_layers": None}})
    generation = decoder.generate(prompt, DecodeSettings(max_new_tokens=24, stop_ids=()))
    assert list(generation.tokens) == tokens and [step.committed for step in generation.steps] == committed


def test_the_drafter_shipped_for_the_default_model_is_the_references_and_decodes_losslessly(reference):
    from specmix.models.loading import load_model
    from specmix.plugins.diffusion.drafter import SHIPPED
    from specmix.text import encode

    model, tokenizer = load_model()
    directory = formats.shipped(SHIPPED, Target(model).fingerprint, formats.DFLASH)
    assert directory is not None, "a DFlash-format drafter ships for the default model"
    draft = reference.DFlashDraftModel.from_pretrained(directory)
    ours = formats.load_dflash(directory, Target(model))
    theirs = draft.state_dict()
    assert all(torch.equal(theirs[name], tensor) for name, tensor in ours.state_dict().items())
    decoder = make_decoder(_registry(), dict(drafter="diffusion", builder="chain", selector="all", verifier="tree"),
                           model, seed=0, options={"drafter": {"arch": "dflash", "random_layers": None}})
    ids = encode(tokenizer, "Explain what a hash table is, in two sentences.")
    settings = DecodeSettings(max_new_tokens=48)
    generation = decoder.generate(ids, settings)
    assert list(generation.tokens) == reference_greedy(model, ids, settings)
    assert sum(step.accepted for step in generation.steps) > 0, "a trained drafter is right at times"


PRESETS = {
    "dflash": dict(drafter="diffusion", builder="chain", selector="all", verifier="tree"),
    "ddtree": dict(drafter="diffusion", builder="best-first", selector="budget", verifier="tree"),
    "taps": dict(drafter="diffusion", builder="pool", selector="learned", verifier="tree"),
    "dflash2": dict(drafter="diffusion", builder="chain", selector="all", verifier="tree"),
}


@pytest.mark.parametrize("index, method", list(enumerate(PRESETS)))
def test_sampling_with_reference_drafters_follows_the_target(reference, tmp_path, index, method):
    family = FAMILIES[index % 2]
    kit_target = tiny_model(family, seed=7, vocab_size=6, scale=0.6)  # the model the sampling property uses
    directory = _saved(_reference_drafter(reference, kit_target, second=method == "dflash2", seed=index), tmp_path)
    options = {"drafter": {"weights": str(directory), "random_layers": None}}
    if method == "dflash2":
        options["drafter"]["arch"] = "dflash2"
    check_sampling_distribution(_registry(), PRESETS[method], SAMPLING[index % 3], samples=300, family=family,
                                options=options)


def test_a_drafter_for_another_target_is_refused_by_the_field(reference, tmp_path):
    directory = _saved(_reference_drafter(reference, tiny_model("qwen3")), tmp_path)
    names = PRESETS["dflash"]
    options = {"drafter": {"weights": str(directory), "random_layers": None}}
    with pytest.raises(PluginError, match="made for another target: its vocab_size is 32, this target's 40"):
        make_decoder(_registry(), names, tiny_model("qwen3", vocab_size=40), seed=0, options=options)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "num_target_layers": 3}))
    with pytest.raises(PluginError, match="its num_target_layers is 3, this target's 2"):
        make_decoder(_registry(), names, tiny_model("qwen3"), seed=0, options=options)
    (directory / "config.json").write_text(json.dumps({**config, "architectures": ["EagleDraftModel"]}))
    with pytest.raises(PluginError, match="architectures \\['EagleDraftModel'\\] is no drafter specmix reads"):
        make_decoder(_registry(), names, tiny_model("qwen3"), seed=0, options=options)
    (directory / "config.json").write_text(json.dumps({**config, "layer_types": ["chunked_attention"] * 2}))
    with pytest.raises(PluginError, match="layer_types \\['chunked_attention'\\] are not supported"):
        make_decoder(_registry(), names, tiny_model("qwen3"), seed=0, options=options)


def test_dflash2_needs_a_dflash2_checkpoint(reference, tmp_path):
    directory = _saved(_reference_drafter(reference, tiny_model("qwen3")), tmp_path)
    with pytest.raises(PluginError, match="is a dflash drafter; arch dflash2 needs a dflash2 one"):
        make_decoder(_registry(), PRESETS["dflash2"], tiny_model("qwen3"), seed=0,
                     options={"drafter": {"weights": str(directory), "random_layers": None, "arch": "dflash2"}})


def test_a_hub_id_that_cannot_be_fetched_is_one_clear_error():
    with pytest.raises(ConfigurationError, match="could not fetch the drafter 'nobody-here/no-such-drafter' from the "
                                                 "Hugging Face hub"):
        formats.resolve("nobody-here/no-such-drafter")
    with pytest.raises(ConfigurationError, match="no drafter at .*give a directory, or a Hugging Face repo id"):
        formats.resolve("./not/a/drafter")


def test_the_reference_runs_in_the_benchmark_beside_dflash_with_the_same_drafter(reference, tmp_path):
    from specmix.bench.runner import run_bench
    from specmix.models.loading import load_model

    model, _ = load_model()
    torch.manual_seed(0)
    net = DFlashNet.for_target(model, 1, (29,), block_size=8, mask_token_id=16)
    net.reset_parameters(std=0.02)
    formats.save_drafter(net, tmp_path / "drafter", Target(model).fingerprint)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"question_id": 1, "category": "echo", "turns": ["Say: one two three one two three"]}))
    weights = f"drafter.weights={tmp_path / 'drafter'}"
    report = run_bench(["hf", f"dflash[{weights}]", f"dflash-ref[{weights}]"], str(prompts), None,
                       DecodeSettings(max_new_tokens=12), out=tmp_path / "bench.json")["methods"]
    ours, theirs = report[f"dflash[{weights}]"], report[f"dflash-ref[{weights}]"]
    assert ours["identical_rate"] == theirs["identical_rate"] == 1.0
    assert ours["tau"] == theirs["tau"] and ours["tokens"] == theirs["tokens"]
