"""The greedy argmax found through a float16 copy of the LM head is the float32 head's, or defers to the row."""

import copy
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specmix import Decoder, DecodeSettings
from specmix.errors import SpecmixWarning
from specmix.kernels import screened_head
from specmix.kernels.screened_head import HALF_ROUNDOFF, ScreenedHead
from specmix.testing import reference_greedy, tiny_model
from specmix.testing.drafters import ReplayPlugin
from specmix.testing.properties import kit_registry


def _row_argmax(weight, hidden):
    return int(torch.nn.functional.linear(hidden[None], weight).argmax())


@given(seed=st.integers(0, 2**31 - 1), vocab=st.integers(2, 300), dim=st.integers(1, 96),
       ties=st.integers(0, 4), spread=st.sampled_from([1e-3, 1.0, 30.0]))
def test_the_screened_argmax_is_the_float32_rows_or_defers_to_it(seed, vocab, dim, ties, spread):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, dim, generator=generator)
    hidden = torch.randn(dim, generator=generator) * spread
    best = _row_argmax(weight, hidden)
    for index in torch.randint(vocab, (ties,), generator=generator).tolist():
        # Rows that tie the best, or trail it by less than float16 can see: only float32 tells them apart.
        weight[index] = weight[best] * (1 - 2.0 ** -20 * (index % 3))
    choice = ScreenedHead(weight).argmax(hidden)
    assert choice is None or choice == _row_argmax(weight, hidden)


def test_rows_float16_cannot_tell_apart_are_decided_in_float32():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(50, 16, generator=generator)
    hidden = torch.randn(16, generator=generator)
    best = _row_argmax(weight, hidden)
    weight[7] = weight[best] + hidden.sign() * 2.0 ** -14  # ahead of the best by far less than float16's step
    screened = ScreenedHead(weight)
    assert screened.argmax(hidden) == 7 == _row_argmax(weight, hidden)
    assert screened.argmax(hidden * 0) is None  # every token ties at zero: the row decides


def test_float16_rounding_that_reverses_two_tokens_is_caught_by_the_bound():
    """Token 0's float32 logit is 0.000549 and token 1's 0.000488, but token 0's weights round to 1 and 1 in float16,
    so its float16 logit is 0: only a bound on rounding keeps token 0 in the running."""
    weight = torch.tensor([[1 + 2.0 ** -11 - 2.0 ** -14, 1 - 2.0 ** -13], [2.0 ** -11, 0.0], [-1.0, 0.0]])
    hidden = torch.tensor([1.0, -1.0])
    assert weight.half()[0].tolist() == [1.0, 1.0] and _row_argmax(weight, hidden) == 0
    assert ScreenedHead(weight).argmax(hidden) == 0


def test_a_clear_winner_needs_no_float32_rows(monkeypatch):
    weight = torch.eye(8) * 4
    screened = ScreenedHead(weight)
    monkeypatch.setattr(screened, "weight", None)  # reading a float32 row would fail
    assert screened.argmax(torch.tensor([0, 0, 3.0, 0, 0, 0, 1.0, 0])) == 2


def test_the_bound_is_wide_enough_for_float16_rounding():
    generator = torch.Generator().manual_seed(3)
    weight, hidden = torch.randn(400, 64, generator=generator), torch.randn(64, generator=generator) * 20
    screened = ScreenedHead(weight)
    half = torch.nn.functional.linear(hidden.half()[None], screened.half)[0].double()
    exact = weight.double() @ hidden.double()
    bound = screened._norm_factor.double() * float(hidden.norm()) + screened._output_factor * half.abs()
    assert ((half - exact).abs() <= bound).all()
    assert float(bound.max()) < 64 * HALF_ROUNDOFF * float(hidden.norm()) * float(weight.norm(dim=1).max())


@pytest.mark.parametrize("head", [
    torch.nn.Linear(8, 20, bias=True),
    torch.nn.Linear(8, 20, bias=False).double(),
    torch.nn.Embedding(20, 8),
])
def test_only_a_bias_free_float32_linear_head_is_screened(head):
    assert ScreenedHead.for_head(head) is None


def test_a_device_that_sums_float16_products_in_float16_is_not_screened(monkeypatch):
    linear = torch.nn.functional.linear

    def summed_in_float16(rows, weight):
        if rows.dtype != torch.float16:
            return linear(rows, weight)
        total = torch.zeros(rows.shape[0], weight.shape[0], dtype=torch.float16)
        for column in range(rows.shape[1]):  # every partial sum rounded to float16
            total = total + rows[:, column, None] * weight[None, :, column]
        return total

    head = torch.nn.Linear(576, 300, bias=False)
    assert ScreenedHead(head.weight.detach())._accumulates_in_float32()
    monkeypatch.setattr(torch.nn.functional, "linear", summed_in_float16)
    assert not ScreenedHead(head.weight.detach())._accumulates_in_float32()
    assert ScreenedHead.for_head(head) is None


def test_a_float32_weight_is_required():
    with pytest.raises(ValueError, match="float32"):
        ScreenedHead(torch.zeros(4, 2, dtype=torch.float64))


@pytest.mark.parametrize("scale", [0.05, 0.5])
def test_greedy_decoding_with_a_screened_head_is_the_targets_own(scale):
    """Flat distributions (small ``scale``) put many tokens within float16's reach of the best."""
    model = copy.deepcopy(tiny_model("llama", vocab_size=256, scale=scale)).float()
    prompt, settings = [4, 5, 6, 7], DecodeSettings(max_new_tokens=40, stop_ids=())
    free = reference_greedy(model, prompt, settings)
    composition = kit_registry([ReplayPlugin()]).compose(
        drafter="kit-replay", builder="drafted", selector="all", verifier="tree",
        options=dict(drafter=dict(path=prompt + free[:20] + [3] * 20, length=4)))
    decoder = Decoder(model, composition)
    assert decoder.target.lazy_head
    decoder.target.screen = screened = ScreenedHead(model.get_output_embeddings().weight)
    calls = []
    original = screened.argmax
    screened.argmax = lambda hidden: calls.append(original(hidden)) or calls[-1]
    generation = decoder.generate(prompt, settings)
    assert list(generation.tokens) == free
    assert len(calls) >= len(generation.steps) and any(choice is not None for choice in calls)
    assert max(step.accepted for step in generation.steps) >= 2


@pytest.mark.parametrize("timed, chosen", [((1.0, 0.5), True), ((1.0, 0.97), False), ((1.0, 1.5), False)])
def test_the_screen_is_taken_where_it_is_timed_5_percent_faster_and_the_verdict_is_kept(monkeypatch, tmp_path,
                                                                                          timed, chosen):
    head = torch.nn.Linear(64, 300, bias=False)
    record = tmp_path / "head-screen" / "model.json"
    monkeypatch.setattr(screened_head, "fastest", lambda calls, repeats: list(timed))
    assert (ScreenedHead.for_head(head, record=record) is not None) == chosen
    assert json.loads(record.read_text())["screen"] == chosen

    def not_timed_again(calls, repeats):
        raise AssertionError("a kept verdict is read back, not timed again")

    monkeypatch.setattr(screened_head, "fastest", not_timed_again)
    assert (ScreenedHead.for_head(head, record=record) is not None) == chosen


def test_an_unreadable_verdict_is_timed_again_with_a_warning(monkeypatch, tmp_path):
    head = torch.nn.Linear(64, 300, bias=False)
    record = tmp_path / "model.json"
    record.write_text("{not json")
    monkeypatch.setattr(screened_head, "fastest", lambda calls, repeats: [1.0, 0.5])
    with pytest.warns(SpecmixWarning, match="unreadable"):
        assert ScreenedHead.for_head(head, record=record) is not None
    assert json.loads(record.read_text())["screen"] is True
