"""Every registered composition that fits, through the conformance kit: greedy identity, cache, sampling."""

from specmix.testing import ConformanceSuite


class TestEveryComposition(ConformanceSuite):
    """No component pinned: every drafter x builder x selector x verifier that fits.

    Fewer samples per chi-square test than a plugin's own suite: there are dozens of
    compositions, and a broken rule still fails at this count (tests/test_kit_power.py).
    """

    sampling_samples = 300


class TestFixedBudget(ConformanceSuite):
    """The budget selector with a fixed node budget instead of the cost curve, on drafted trees."""

    builder = "drafted"
    selector = "budget"
    sampling_samples = 300
    options = {"selector": {"budget": 3}}
