"""What the engine and the tree verifier cost beyond the model's own forward.

Run with ``tox -e bench`` or ``python -m pytest benchmarks --benchmark-only``. Each group
compares a raw HF forward (``DynamicCache``, no mask) with the same work through specmix's
tree verifier (4D tree mask, preallocated cache, compaction), on a random Llama of about
20M parameters and on the default model (SmolLM2-135M, fetched and converted once).
"""

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from specmix import Decoder, DecodeSettings, Registry, Target, TokenTree
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.values import Proposal, StepContext

CONTEXT = 256


@pytest.fixture(scope="module", params=["random-20M", "default"])
def model(request):
    if request.param == "default":
        from specmix.models.loading import load_model

        return load_model()[0]
    config = LlamaConfig(vocab_size=8192, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def _filled_target(model):
    target = Target(model)
    target.prefill(torch.randint(8192, (CONTEXT,)))
    return target


@pytest.mark.parametrize("n", [1, 16])
@pytest.mark.benchmark(group="forward of N tree tokens")
def test_raw_hf_forward(benchmark, model, n):
    def setup():
        cache = DynamicCache()
        with torch.no_grad():
            model(input_ids=torch.randint(8192, (1, CONTEXT)), cache=cache, use_cache=True)
        return (cache,), {}

    def run(cache):
        with torch.no_grad():
            model(input_ids=torch.randint(8192, (1, n)), cache=cache, use_cache=True)

    benchmark.pedantic(run, setup=setup, rounds=15)


@pytest.mark.parametrize("n", [1, 16])
@pytest.mark.benchmark(group="forward of N tree tokens")
def test_tree_verifier(benchmark, model, n):
    tree = TokenTree.from_paths(1, [[2 + i for i in range(n - 1)]], vocab_size=8192)
    verifier = TreeVerifier()

    def setup():
        target = _filled_target(model)
        tokens = torch.randint(8192, (CONTEXT + 1,))
        tokens[-1] = 1
        ctx = StepContext(step=0, tokens=tokens, settings=DecodeSettings(), vocab_size=8192, max_depth=n)
        return (target, ctx), {}

    def run(target, ctx):
        verifier.verify(target, tree, Proposal(), ctx, ())

    benchmark.pedantic(run, setup=setup, rounds=15)


@pytest.mark.benchmark(group="64 tokens of plain decoding")
def test_vanilla_engine(benchmark, model):
    decoder = Decoder(model, Registry.load().compose("vanilla"))
    settings = DecodeSettings(max_new_tokens=64, stop_ids=())
    result = benchmark.pedantic(decoder.generate, args=(list(range(5, 69)), settings), rounds=3)
    benchmark.extra_info["tau"] = result.tau


@pytest.mark.benchmark(group="64 tokens of plain decoding")
def test_hf_generate(benchmark, model):
    prompt = torch.tensor([list(range(5, 69))])
    benchmark.pedantic(model.generate, args=(prompt,),
                       kwargs=dict(max_new_tokens=64, min_new_tokens=64, do_sample=False), rounds=3)
