import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmix import ConfigurationError
from specmix.sizing.estimate import BetaOdds, DecayingAverage

values = st.lists(st.floats(0.0, 10.0), min_size=1, max_size=30)


@given(values)
def test_without_memory_it_is_the_plain_mean(observed):
    average = DecayingAverage()
    for value in observed:
        average.add(value)
    assert average.mean == pytest.approx(sum(observed) / len(observed))


@given(values, st.floats(1.0, 50.0))
def test_with_memory_each_older_observation_counts_less_by_one_fading_step(observed, memory):
    average, keep = DecayingAverage(memory), 1 - 1 / memory
    for value in observed:
        average.add(value)
    weights = [keep ** age for age in range(len(observed))][::-1]
    assert average.mean == pytest.approx(sum(w * v for w, v in zip(weights, observed)) / sum(weights))


def test_fading_weighs_amounts_and_leaves_nothing_before_the_first_observation():
    average = DecayingAverage(2.0)
    assert average.mean is None
    average.add(1.0, weight=2.0)  # one taken of two claimed
    average.add(0.0)
    assert average.mean == pytest.approx(0.5 / 2)
    average.fade()
    assert average.mean == pytest.approx(0.5 / 2)  # fading with nothing new keeps the ratio
    with pytest.raises(ConfigurationError, match="memory"):
        DecayingAverage(0.5)


def test_beta_odds_start_at_the_prior_lean_to_the_evidence_and_explore_less_as_it_grows():
    odds = BetaOdds(weight=2.0)
    assert odds.estimate("k", prior=0.3) == pytest.approx(0.3)
    odds.record("k", True)
    assert odds.estimate("k", prior=0.3) == pytest.approx((1 + 0.6) / 3)
    exploring = BetaOdds(weight=2.0, explore=1.0)
    bonus = []
    for _ in range(50):
        mean = exploring.estimate("k", prior=0.5)
        plain = (exploring.evidence("k")[0] + 1) / (exploring.evidence("k")[1] + 2)
        bonus.append(mean - plain)
        exploring.record("k", False)
    assert all(b > 0 for b in bonus) and bonus[-1] < bonus[0] / 4
    assert math.isclose(BetaOdds(weight=1.0, explore=100.0).estimate("k", prior=0.9), 1.0)
    with pytest.raises(ConfigurationError):
        BetaOdds(weight=0.0)
