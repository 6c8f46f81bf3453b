"""The LM head runs only on the rows a walk reads, where the model's logits are plainly its head's; exact either way."""

import pytest
import torch
import transformers

from specmix import DecodeSettings, StepContext, Target, TokenTree
from specmix.kernels.node_logits import MAX_WIDTH, HeadCosts, NodeLogits
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.testing import reference_greedy, tiny_model
from specmix.testing.models import tolerance


def _counting_head(weight):
    calls = []

    def head(rows):
        calls.append(rows.shape[0])
        return rows @ weight.T

    return head, calls


def test_rows_are_computed_once_when_first_asked_for_with_what_comes_along():
    final, weight = torch.randn(6, 4, dtype=torch.float64), torch.randn(10, 4, dtype=torch.float64)
    head, calls = _counting_head(weight)
    logits = NodeLogits.lazy(final, head, vocab=10)
    assert logits.shape == (6, 10) and logits.computed == 0
    assert torch.allclose(logits.row(2, along=[3, 4]), final[2] @ weight.T)
    assert calls == [3] and logits.computed == 3 and list(logits.chosen()) == [2, 3, 4]
    logits.row(3, along=[5])  # already there: no call, and nothing comes along
    assert calls == [3]
    assert torch.allclose(logits[0], final[0] @ weight.T) and calls == [3, 1]
    assert torch.allclose(logits.all(), final @ weight.T) and calls == [3, 1, 2] and logits.computed == 6


class _SteppedHead(torch.nn.Module):
    """A head whose calls take 10 ms up to ``cheap`` rows and 30 ms above, as CPU kernels step, on a clock of its own."""

    def __init__(self, cheap):
        super().__init__()
        self.weight, self.cheap, self.widths, self.now = torch.nn.Parameter(torch.zeros(5, 4)), cheap, set(), 0.0

    def clock(self) -> float:
        return self.now

    def forward(self, rows):
        self.widths.add(rows.shape[0])
        self.now += 0.01 if rows.shape[0] <= self.cheap else 0.03
        return rows @ self.weight.T


@pytest.mark.parametrize("cheap", [1, 3])
def test_the_head_width_is_the_most_rows_one_call_takes_for_the_price_of_one(cheap):
    head = _SteppedHead(cheap)
    costs = HeadCosts.measure(head, repeats=2, timer=head.clock)
    assert costs.rows == pytest.approx([0.01] * cheap + [0.03] * (MAX_WIDTH - cheap))
    assert costs.width == cheap and head.widths == set(range(1, MAX_WIDTH + 1)) and costs.screen is None


# One row costs 7, four cost about as much, and a screened argmax costs 4 (as measured on a two-core CPU).
CPU_HEAD = HeadCosts(rows=(7.0, 7.5, 9.5, 7.0, 10.0, 12.0, 14.0, 12.0), screen=4.0)


@pytest.mark.parametrize("chances, count", [
    ([], 0),  # nothing below: screen the one row
    ([0.1, 0.05, 0.01], 0),  # the walk likely stops here: one screen beats any call
    ([0.9], 2),  # 4 + 3.6 screened against 7.5 for two rows
    ([0.9, 0.8, 0.7], 4),  # four rows for 7 against 4 · (1 + 2.4) screened
    ([0.5, 0.2, 0.1], 4),  # 4 · 1.8 = 7.2 screened against 7 for four rows: just worth it
    ([0.5, 0.2], 0),  # three rows cost 9.5, against 6.8 screened
])
def test_a_walk_computes_rows_together_only_where_that_costs_less_than_screening_them(chances, count):
    assert CPU_HEAD.rows_to_read(chances) == count
    assert HeadCosts(rows=CPU_HEAD.rows).rows_to_read(chances) == 0  # no screen measured: nothing to weigh


class _CountingScreen:
    def __init__(self, weight):
        self.weight, self.calls = weight, 0

    def argmax(self, hidden):
        self.calls += 1
        return int((self.weight @ hidden).argmax())


@pytest.mark.parametrize("likely", [True, False])
def test_a_screened_walk_reads_a_likely_chain_in_one_call_and_an_unlikely_one_by_screening(likely):
    final, weight = torch.randn(5, 4, dtype=torch.float64), torch.randn(10, 4, dtype=torch.float64)
    head, calls = _counting_head(weight)
    screen = _CountingScreen(weight)
    logits = NodeLogits.lazy(final, head, vocab=10, costs=CPU_HEAD, screen=screen)
    chances = [0.9, 0.8, 0.7] if likely else [0.1, 0.05, 0.01]
    assert logits.argmax(0, along=[1, 2, 3], chances=chances) == int((final[0] @ weight.T).argmax())
    if likely:
        assert calls == [4] and screen.calls == 0 and logits.computed == 4
        assert logits.argmax(2) == int((final[2] @ weight.T).argmax()) and calls == [4]  # read already
    else:
        assert calls == [] and screen.calls == 1 and logits.computed == 0


def test_a_tensor_is_taken_whole():
    whole = torch.randn(3, 7)
    logits = NodeLogits.of(whole)
    assert NodeLogits.of(logits) is logits and logits.computed == 3 and logits.all() is whole


def _chain_outputs(target, prompt, chain):
    target.reset()
    target.prefill(torch.tensor(prompt[:-1]))
    tree = TokenTree.from_paths(prompt[-1], [chain], target.vocab_size)
    return tree, target.forward_tree(tree)


@pytest.mark.parametrize("width", [1, 3])
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_plain_head_runs_on_the_rows_a_greedy_walk_reads_and_they_are_the_models_logits(monkeypatch, family, width):
    # A head on which one call takes ``width`` rows for the price of one, instead of what this machine times.
    costs = HeadCosts(rows=[1.0] * width + [2.0] * (MAX_WIDTH - width))
    monkeypatch.setattr(HeadCosts, "measure", classmethod(lambda cls, *args, **kwargs: costs))
    model = tiny_model(family)
    target = Target(model)
    assert target.lazy_head
    prompt = [3, 4, 5]
    # The model's own next four tokens, then one it does not choose: the walk accepts four nodes and stops there.
    greedy = reference_greedy(model, prompt, DecodeSettings(max_new_tokens=5, stop_ids=()))
    chain = [*greedy[:4], (greedy[4] + 1) % target.vocab_size, 12, 13, 14]
    tree, out = _chain_outputs(target, prompt, chain)
    ctx = StepContext(step=0, tokens=torch.tensor(prompt), settings=DecodeSettings(), vocab_size=target.vocab_size,
                      max_depth=10)
    path, bonus = TreeVerifier().accept(tree, out.node_logits, ctx)
    assert (path, bonus, out.node_logits.width) == ([1, 2, 3, 4], greedy[4], width)
    # The walk reads the root and the four accepted nodes; a row it lacks comes with the next width - 1 down the chain.
    assert out.node_logits.computed == (len(path) // width + 1) * width
    for node in range(tree.size):  # every row, computed now, is the model's own logit at that position
        ids = torch.tensor([prompt + chain[:node]])
        expected = model(input_ids=ids).logits[0, -1]
        close = tolerance(expected.dtype)
        assert torch.allclose(out.logits[node], expected, atol=close, rtol=close)


def test_a_model_that_reworks_its_logits_computes_them_whole():
    config = transformers.Gemma2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                       max_position_embeddings=64, final_logit_softcapping=2.0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.Gemma2ForCausalLM(config).to(torch.float64).eval()
    target = Target(model)
    assert not target.lazy_head
    prompt, chain = [3, 4, 5], [7, 8]
    tree, out = _chain_outputs(target, prompt, chain)
    assert out.node_logits.computed == tree.size
    expected = model(input_ids=torch.tensor([prompt + chain])).logits[0, len(prompt) - 1:]
    assert torch.allclose(out.logits, expected, atol=1e-9, rtol=1e-9)
