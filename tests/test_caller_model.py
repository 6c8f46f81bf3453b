"""specmix never changes a model the caller loaded and handed in: its decoders run their own copy, sharing its weights."""

import gc
import threading

import pytest
import torch
import transformers

import specmix
from specmix import Decoder, DecodeSettings, Registry
from specmix.kernels.grouped_attention import NAME as GROUPED
from specmix.kernels.row_kernels import COLUMNS, RowKernels, SwitchedLinear
from specmix.models.loading import default_model_dir
from specmix.testing.properties import CURVE

SETTINGS = DecodeSettings(max_new_tokens=8, stop_ids=())
PROMPTS = ([2, 5, 7, 9, 5, 7], [3, 3, 3, 3], [10, 20, 30, 40, 50, 60, 10, 20])
RANDOM_CORPUS = {"drafter": {"corpus.random_documents": 64}}
"""No trained corpus ships for a random model; losslessness never depends on the corpus."""
PRESETS = [("vanilla", None, None), ("ngram", None, None), ("mix", RANDOM_CORPUS, None), ("ptd", None, None),
           ("ptd-branches", None, None), ("ngram", None, False), ("vanilla", None, True), ("mix", RANDOM_CORPUS, True)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny float32 Llama checkpoint (grouped queries, so the attention switch would apply)."""
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                      eos_token_id=1, bos_token_id=0, pad_token_id=0)
    directory = tmp_path_factory.mktemp("tiny-llama")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(config).save_pretrained(directory)
    return directory


@pytest.fixture
def model(saved):
    """The checkpoint, loaded the way a user loads one."""
    return transformers.AutoModelForCausalLM.from_pretrained(saved, dtype=torch.float32)


@pytest.fixture(autouse=True)
def kernels_win(monkeypatch):
    """The columns kernel measured fastest everywhere, so that a fast decoder surely switches the layers it runs."""
    monkeypatch.setattr(RowKernels, "measure", classmethod(lambda cls, layers: RowKernels(
        {tuple(layer.weight.shape): dict.fromkeys(range(1, 17), COLUMNS) for layer in layers})))


def _state(model) -> dict:
    """What a decoder could change on ``model``: its modules' classes, modes and attributes, its configs, its tensors."""
    modules = dict(model.named_modules())
    return dict(
        classes={name: type(module) for name, module in modules.items()},
        training={name: module.training for name, module in modules.items()},
        attributes={name: sorted(vars(module)) for name, module in modules.items()},
        attention=model.config._attn_implementation,
        config=model.config.to_dict(),
        generation=model.generation_config.to_dict(),
        tensors={name: (tensor.data_ptr(), tensor.detach().clone())
                 for name, tensor in [*model.named_parameters(), *model.named_buffers()]},
    )


def _assert_unchanged(model, before: dict) -> None:
    after = _state(model)
    for key in ("classes", "training", "attributes", "attention", "config", "generation"):
        assert after[key] == before[key], f"the model's {key} changed"
    assert after["tensors"].keys() == before["tensors"].keys()
    for name, (pointer, values) in before["tensors"].items():
        assert after["tensors"][name][0] == pointer, f"{name} was moved"
        assert torch.equal(after["tensors"][name][1], values), f"{name} was changed"


def _hf_greedy(model, ids, count=SETTINGS.max_new_tokens):
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         max_new_tokens=count, do_sample=False, pad_token_id=0)
    return out[0, len(ids):].tolist()


def _load(model, method, options, fast, cache):
    return specmix.load(model, method, options=options, cost_curve=CURVE, cache=cache, fast=fast)


@pytest.mark.parametrize(("method", "options", "fast"), PRESETS)
def test_decoding_leaves_the_callers_model_as_it_was(model, tmp_path, method, options, fast):
    model.train()  # as a model is left by fine-tuning: a decoder decodes in eval mode all the same
    before = _state(model)
    decoder = _load(model, method, options, fast, tmp_path)
    copy = decoder.target.model
    assert copy is not model and not copy.training
    switched = type(copy.lm_head) is SwitchedLinear, copy.config._attn_implementation == GROUPED
    assert switched == ((True, True) if fast else (False, False))  # fast paths on specmix's copy, only when asked
    for prompt in PROMPTS:
        assert list(decoder.generate(prompt, SETTINGS).tokens) == _hf_greedy(copy, prompt)
    del decoder, copy
    gc.collect()
    _assert_unchanged(model, before)


def test_the_copy_shares_every_weight_and_buffer(model, tmp_path):
    target = Decoder(model, Registry.load().compose("vanilla"), cost_curve=CURVE, cache_dir=tmp_path, fast=True).target
    ours = dict([*target.model.named_parameters(), *target.model.named_buffers()])
    theirs = dict([*model.named_parameters(), *model.named_buffers()])
    assert ours.keys() == theirs.keys() and all(ours[name] is theirs[name] for name in theirs)


def test_fast_paths_on_a_callers_model_keep_greedy_output_and_hf_generate(model, tmp_path):
    expected = [_hf_greedy(model, prompt) for prompt in PROMPTS]
    fast, plain = (_load(model, "mix", RANDOM_CORPUS, on, tmp_path) for on in (True, False))
    for prompt, tokens in zip(PROMPTS, expected):
        assert list(fast.generate(prompt, SETTINGS).tokens) == list(plain.generate(prompt, SETTINGS).tokens) == tokens
    assert [_hf_greedy(model, prompt) for prompt in PROMPTS] == expected


def test_a_model_that_cannot_be_copied_is_refused_in_one_line(model, tmp_path):
    model.model.lock = threading.Lock()  # deepcopy cannot copy a lock
    with pytest.raises(specmix.ConfigurationError, match="cannot be copied") as refused:
        _load(model, "vanilla", None, None, tmp_path)
    assert "\n" not in str(refused.value)


def test_the_default_model_loaded_by_the_caller_stays_as_it_was(tmp_path):
    directory = default_model_dir()
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    before = _state(model)
    prompt = tokenizer("List three prime numbers:").input_ids
    expected = _hf_greedy(model, prompt)
    for fast in (None, True):
        decoder = specmix.load(model, "ngram", tokenizer=tokenizer, cost_curve=CURVE, cache=tmp_path, fast=fast)
        assert list(decoder.generate(prompt, SETTINGS).tokens) == expected
        del decoder
        gc.collect()
    _assert_unchanged(model, before)
    assert _hf_greedy(model, prompt) == expected
