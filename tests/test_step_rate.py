import pytest

from specmix import ConfigurationError, CostCurve
from specmix.sizing.step_rate import StepRate

CPU_LIKE = CostCurve(sizes=(1, 2, 3, 4, 8, 16), seconds=(0.045, 0.045, 0.045, 0.053, 0.062, 0.067))
"""T(N) of the default model on a two-core CPU: three positions for the price of one, then steps."""
RICH = [0.9, 0.9, 0.3, 0.3]
"""Expected tokens per node of a step with a likely match (best first): two likely tokens, then two doubtful ones."""
POOR = [0.3, 0.25, 0.2, 0.15, 0.15, 0.1, 0.1]
RATE = 45.0
"""Tokens per second over whole steps, between the poor step's own best rate and the rich one's."""


def test_the_rate_is_unknown_before_a_step_then_a_ratio_of_faded_sums():
    rate = StepRate(memory=2.0)
    assert rate.rate is None and rate.step_seconds is None
    rate.record(3, 0.1)
    assert rate.rate == pytest.approx(30.0)
    rate.record(0, 0.1)  # the first step now counts half
    assert rate.rate == pytest.approx(1.5 / 0.15)
    rate.record(1, 0.4)  # a recent step's time is a faded mean too: 0.075 + 0.4 seconds over 0.75 + 1 steps
    assert rate.step_seconds == pytest.approx(0.475 / 1.75)
    with pytest.raises(ConfigurationError, match="memory"):
        StepRate(memory=0.5)


@pytest.mark.parametrize("gains", [RICH, POOR])
def test_at_a_rate_a_step_verifies_the_nodes_that_earn_more_than_their_time_costs(gains):
    surplus = lambda k: 1 + sum(gains[:k]) - RATE * CPU_LIKE.time(1 + k)  # noqa: E731
    n = CPU_LIKE.best_size(gains, rate=RATE)
    assert all(surplus(n) >= surplus(k) for k in range(len(gains) + 1))


def test_against_each_steps_own_best_ratio_a_rich_step_verifies_more_and_a_poor_one_less():
    """Each step's own ratio asks a rich step's nodes to beat its high rate and lets a poor step's off with its low
    one; at the decoder's rate, between the two, both are asked the same."""
    assert (1 + sum(POOR[:2])) / CPU_LIKE.time(3) < RATE < (1 + sum(RICH[:2])) / CPU_LIKE.time(3)
    assert CPU_LIKE.best_size(RICH) == 2 and CPU_LIKE.best_size(RICH, rate=RATE) == 4
    assert CPU_LIKE.best_size(POOR) == 7 and CPU_LIKE.best_size(POOR, rate=RATE) == 2
