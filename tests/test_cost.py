import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specmix import ConfigurationError, CostCurve, DecodeSettings, Proposal, StepContext, Target, TokenTree
from specmix.plugins.basic.budget_selector import BudgetSelector
from specmix.sizing.measure import cost_curve_for, measure
from specmix.target import TreeOutputs
from specmix.testing import CURVE, tiny_model


def test_interpolates_between_and_extrapolates_past_measurements():
    curve = CostCurve(sizes=(1, 4, 8), seconds=(1.0, 1.6, 2.0))
    assert curve.time(1) == 1.0
    assert curve.time(2) == pytest.approx(1.2)
    assert curve.time(6) == pytest.approx(1.8)
    assert curve.time(16) == pytest.approx(2.8)


def test_a_size_costlier_than_a_larger_one_runs_padded_to_it():
    curve = CostCurve(sizes=(1, 2, 4, 8), seconds=(1.0, 1.5, 1.4, 2.0))
    assert [curve.padded_size(n) for n in range(1, 7)] == [1, 4, 4, 4, 5, 6]
    assert [curve.time(n) for n in range(1, 7)] == pytest.approx([1.0, 1.4, 1.4, 1.4, 1.55, 1.7])
    assert curve.padded_size(20) == 20 and curve.time(20) == pytest.approx(3.8)  # on the last slope
    tie = CostCurve(sizes=(1, 2, 4), seconds=(1.0, 1.2, 1.2))
    assert tie.padded_size(2) == 2 and tie.padded_size(3) == 3  # padding only when it saves time


@given(seconds=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=6), n=st.integers(1, 80))
def test_forward_time_never_falls_with_more_tokens_and_is_the_padded_sizes_own(seconds, n):
    sizes = [1, 2, 3, 5, 8, 16][: len(seconds)]
    curve = CostCurve(sizes=sizes, seconds=seconds)
    assert curve.time(n) <= curve.time(n + 1) + 1e-12
    padded = curve.padded_size(n)
    assert padded >= n and (padded == n or padded in sizes)
    assert curve.time(n) == pytest.approx(curve.time(padded))


def test_a_curve_over_two_cache_lengths_gives_the_curve_over_any_other():
    curve = CostCurve(sizes=[1, 8], seconds=[0.05, 0.10], context=256, longer=[0.07, 0.20], longer_context=1024)
    assert curve.at(256).seconds == pytest.approx((0.05, 0.10))
    assert curve.at(640).seconds == pytest.approx((0.06, 0.15))
    assert curve.at(1792).seconds == pytest.approx((0.09, 0.30))  # extrapolated past the longer one
    assert curve.at(0).seconds == pytest.approx((0.05 - 0.02 / 3, 0.10 - 0.10 / 3))
    assert min(curve.at(-10_000).seconds) == pytest.approx(0.05 / 4)  # never below a quarter
    single = CostCurve(sizes=[1, 8], seconds=[0.05, 0.10])
    assert single.at(5000) is single
    assert CostCurve.from_json(curve.to_json()) == curve


def test_bad_curves_are_refused():
    with pytest.raises(ConfigurationError, match="increasing"):
        CostCurve(sizes=(4, 2), seconds=(1.0, 2.0))
    with pytest.raises(ConfigurationError, match="one time per size"):
        CostCurve(sizes=(1, 2), seconds=(1.0,))
    with pytest.raises(ConfigurationError, match="positive"):
        CostCurve(sizes=(1,), seconds=(0.0,))
    with pytest.raises(ConfigurationError, match="longer context"):
        CostCurve(sizes=(1, 2), seconds=(1.0, 2.0), context=256, longer=(3.0,), longer_context=1024)
    with pytest.raises(ConfigurationError, match="both context lengths"):
        CostCurve(sizes=(1, 2), seconds=(1.0, 2.0), longer=(3.0, 4.0))


def test_best_size_trades_acceptance_against_forward_time():
    gains = [0.9, 0.8, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05] + [0.01] * 100
    flat = CostCurve(sizes=(1, 128), seconds=(1.0, 1.0001))  # a GPU far from its compute limit
    cpu = CURVE
    assert flat.best_size(gains) > 50
    n = cpu.best_size(gains)
    assert 2 <= n <= 12
    rate = lambda k: (1 + sum(gains[:k])) / cpu.time(1 + k)  # noqa: E731
    assert all(rate(n) >= rate(k) for k in range(len(gains) + 1))
    assert cpu.best_size(gains, extra_tokens=40) <= n


def _ctx(tree, cost):
    return StepContext(step=0, tokens=torch.tensor([tree.root]), settings=DecodeSettings(), vocab_size=tree.vocab_size,
                       max_depth=10, cost=cost)


def test_budget_selector_keeps_the_best_prefix_closed_nodes():
    tree = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 0, 1, 3], vocab_size=8,
                     logprobs=[0, -0.1, -6.0, -0.2, -0.1])
    kept = BudgetSelector(budget=3).select(tree, Proposal(), _ctx(tree, None))
    assert kept.token_list == (0, 1, 3, 4)
    by_curve = BudgetSelector().select(tree, Proposal(), _ctx(tree, CURVE))
    assert by_curve.token_list == (0, 1, 3, 4)  # node 2 (reach 0.002) costs more than it brings


def test_budget_selector_without_scores_prefers_shallow_and_lonely_nodes():
    tree = TokenTree.from_paths(0, [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]], vocab_size=16)
    kept = BudgetSelector(prior=0.5).select(tree, Proposal(), _ctx(tree, CURVE))
    assert kept.token_list == tree.token_list[: kept.size] and 1 < kept.size < tree.size


def test_measured_curves_are_cached_per_model_device_and_dtype(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECMIX_CACHE_DIR", str(tmp_path))
    target = Target(tiny_model(max_length=64))
    quick = measure(target, sizes=(1, 2, 4), context=8, repeats=1)
    assert quick.sizes == (1, 2, 4)
    assert (quick.context, quick.longer_context) == (8, 64 - 4 - 1) and len(quick.longer) == 3  # as long as fits
    curve = cost_curve_for(target)
    files = list((tmp_path / "cost-curves").glob("*float64*.json"))
    assert len(files) == 1
    assert CostCurve.from_json(json.loads(files[0].read_text())) == curve
    sizes = list(curve.sizes)
    files[0].write_text(json.dumps({"sizes": sizes, "seconds": [5.0 + n for n in sizes]}))
    assert cost_curve_for(target).seconds == tuple(5.0 + n for n in sizes)
    files[0].write_text(json.dumps({"sizes": [1, 2], "seconds": [5.0, 6.0]}))  # measured at other sizes
    assert cost_curve_for(target).sizes == curve.sizes


class _BusyStretchTarget:
    """A target whose forward of N tokens takes N ms on a clock of its own, and 50 ms more on calls 10 to 17,
    as when other work shares the machine for a while."""

    vocab_size, max_length, lazy_head, pad_to = 16, 64, True, None

    def __init__(self):
        self.now, self.calls = 0.0, 0

    def clock(self) -> float:
        return self.now

    def forward_tree(self, tree):
        self.calls += 1
        self.now += 0.001 * tree.size + (0.05 if 10 <= self.calls <= 17 else 0.0)
        return TreeOutputs(torch.zeros(tree.size, self.vocab_size), None, {})

    def reset(self):
        pass

    def prefill(self, ids):
        pass

    def compact(self, keep):
        pass


def test_a_busy_stretch_during_measurement_leaves_the_curve_as_it_is(monkeypatch):
    import specmix.sizing.measure

    target = _BusyStretchTarget()
    monkeypatch.setattr(specmix.sizing.measure, "time", type("Clock", (), {"perf_counter": staticmethod(target.clock)}))
    curve = measure(target, sizes=(1, 2, 4), context=8, repeats=4, longer=None)
    assert curve.seconds == pytest.approx((0.001, 0.002, 0.004))  # size after size, all of 4's samples: 54 ms


class _DippingTarget(_BusyStretchTarget):
    """A target on which two tokens take 3 ms and four take 2 ms, as when a kernel changes with the row count."""

    def forward_tree(self, tree):
        self.now += {1: 0.001, 2: 0.003, 4: 0.002}[tree.size]
        return TreeOutputs(torch.zeros(tree.size, self.vocab_size), None, {})


def test_a_size_faster_than_a_smaller_one_is_kept_as_measured(monkeypatch):
    import specmix.sizing.measure

    target = _DippingTarget()
    monkeypatch.setattr(specmix.sizing.measure, "time", type("Clock", (), {"perf_counter": staticmethod(target.clock)}))
    curve = measure(target, sizes=(1, 2, 4), context=8, repeats=2, longer=None)
    assert curve.seconds == pytest.approx((0.001, 0.003, 0.002))
    assert curve.padded_size(2) == 4 and curve.time(2) == pytest.approx(0.002)
