import attrs
import pytest

from specmix import CostCurve, Decoder, DecodeSettings, Registry, Target
from specmix.plugins.basic.budget_selector import BudgetSelector
from specmix.plugins.basic.tree_verifier import TreeVerifier
from specmix.sizing.step_costs import HIGHEST, StepCosts
from specmix.testing import CURVE, reference_greedy, tiny_model

CHEAP_FOUR = CostCurve(sizes=(1, 2, 4, 8, 16), seconds=(1.0, 1.5, 1.4, 2.0, 3.0))


def test_without_steps_the_curve_is_priced_as_measured():
    assert StepCosts().scaled(CURVE) == CURVE


def test_a_size_slower_than_its_price_is_priced_at_what_its_steps_took():
    costs = StepCosts()
    for _ in range(100):
        costs.record(8, 1.5 * CHEAP_FOUR.time_at(8), CHEAP_FOUR)
        costs.record(1, CHEAP_FOUR.time_at(1), CHEAP_FOUR)
    scaled = costs.scaled(CHEAP_FOUR)
    assert scaled.time(1) == pytest.approx(1.0)
    assert scaled.time_at(8) == pytest.approx(3.0, rel=1e-3)
    assert scaled.time_at(16) == pytest.approx(4.5, rel=1e-3)  # no steps there: the nearest smaller size's ratio
    assert scaled.time_at(4) == pytest.approx(1.4)  # and the sizes in between keep theirs


def test_a_step_counts_for_the_measured_size_it_runs_within():
    costs = StepCosts(weight=1.0)
    costs.record(11, 2 * CHEAP_FOUR.time_at(11), CHEAP_FOUR)
    assert costs.ratios == pytest.approx({16: 2.0})
    costs.record(40, 3 * CHEAP_FOUR.time_at(40), CHEAP_FOUR)  # past the last size: the last one's
    assert costs.ratios == pytest.approx({16: 3.0})
    costs.record(3, 2 * CHEAP_FOUR.time_at(3), CHEAP_FOUR)
    assert costs.ratios == pytest.approx({4: 2.0, 16: 3.0})


def test_the_running_ratio_moves_by_its_weight_and_an_interrupted_step_only_so_far():
    costs = StepCosts(weight=0.5)
    costs.record(1, 100.0, CHEAP_FOUR)  # a step the machine interrupted
    assert costs.ratios[1] == pytest.approx(1 + 0.5 * (HIGHEST - 1))
    costs.record(1, 1.0, CHEAP_FOUR)
    assert costs.ratios[1] == pytest.approx((1 + 0.5 * (HIGHEST - 1) + 1) / 2)


def test_when_a_few_positions_run_slow_padding_stops_chasing_them():
    costs = StepCosts(weight=1.0)
    assert CHEAP_FOUR.padded_size(2) == 4
    costs.record(4, 2 * 1.4, CHEAP_FOUR)
    assert costs.scaled(CHEAP_FOUR).padded_size(2) == 2


def _selector_contexts(monkeypatch):
    seen = []
    select = BudgetSelector.select

    def spy(self, tree, proposal, ctx):
        seen.append(ctx)
        return select(self, tree, proposal, ctx)

    monkeypatch.setattr(BudgetSelector, "select", spy)
    return seen


@pytest.mark.parametrize("learn", [True, False])
def test_selectors_see_the_curve_scaled_by_what_the_decoders_steps_took(monkeypatch, fake_time, learn):
    """Steps timed far under the curve's price (a fraction of a millisecond on the test's clock against 79 ms) bring
    learnt prices below the curve's."""
    contexts = _selector_contexts(monkeypatch)
    model, prompt, settings = tiny_model(), [3, 4, 5, 3, 4, 5, 3, 4], DecodeSettings(max_new_tokens=24)
    decoder = Decoder(model, Registry.load().compose("ngram"), cost_curve=CURVE, learn_costs=learn)
    assert list(decoder.generate(prompt, settings).tokens) == reference_greedy(model, prompt, settings)
    seen = [ctx.cost for ctx in contexts]
    assert seen[0].time(1) == pytest.approx(CURVE.time(1))
    if learn:
        assert decoder.step_costs.ratios and all(r < 1 for r in decoder.step_costs.ratios.values())
        assert seen[-1].time(1) < CURVE.time(1)
    else:
        assert decoder.step_costs is None
        assert all(curve.time(1) == pytest.approx(CURVE.time(1)) for curve in seen)


@pytest.mark.parametrize("learn", [True, False])
def test_selectors_size_trees_at_the_rate_the_decoders_steps_bring_where_it_measures_them(monkeypatch, fake_time,
                                                                                          learn):
    contexts = _selector_contexts(monkeypatch)
    model, prompt, settings = tiny_model(), [3, 4, 5, 3, 4, 5, 3, 4], DecodeSettings(max_new_tokens=16)
    decoder = Decoder(model, Registry.load().compose("ngram"), cost_curve=CURVE, learn_costs=learn)
    for _ in range(2):
        assert list(decoder.generate(prompt, settings).tokens) == reference_greedy(model, prompt, settings)
    rates = [ctx.rate for ctx in contexts]
    if learn:
        assert rates[0] is None and all(rate > 0 for rate in rates[1:])  # the second generation starts from it too
    else:
        assert decoder.step_rate is None and set(rates) == {None}


FLAT_20_MS = CostCurve(sizes=(1, 2, 4, 8, 16, 32, 64), seconds=(0.02,) * 7)


@pytest.mark.parametrize("forward_timed", [True, False])
def test_steps_are_priced_by_their_tree_forward_not_by_the_walk_after_it(monkeypatch, fake_time, forward_timed):
    """A walk that reads many head rows slows a step by how much it accepts, not by the tree's size; where the
    forward can be timed on its own (the CPU), that time is what the step's size is priced at."""
    accept, forward_tree = TreeVerifier.accept, Target.forward_tree

    def slow_walk(self, tree, logits, ctx):
        fake_time.advance(0.1)  # five times the curve's price of any forward
        return accept(self, tree, logits, ctx)

    def untimed_forward(self, *args, **kwargs):  # as off the CPU, where a forward returns before its work is done
        outputs = forward_tree(self, *args, **kwargs)
        self.last_forward = attrs.evolve(self.last_forward, seconds=None)
        return outputs

    monkeypatch.setattr(TreeVerifier, "accept", slow_walk)
    if not forward_timed:
        monkeypatch.setattr(Target, "forward_tree", untimed_forward)
    model, prompt, settings = tiny_model(), [3, 4, 5, 3, 4, 5, 3, 4], DecodeSettings(max_new_tokens=8)
    decoder = Decoder(model, Registry.load().compose("ngram"), cost_curve=FLAT_20_MS, learn_costs=True)
    assert list(decoder.generate(prompt, settings).tokens) == reference_greedy(model, prompt, settings)
    ratios = decoder.step_costs.ratios.values()
    assert ratios and all((ratio < 1) == forward_timed for ratio in ratios)
