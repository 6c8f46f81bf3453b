"""Every registered composition that fits, through the conformance kit: greedy identity, cache, sampling."""

from specmix.testing import ConformanceSuite


class TestEveryComposition(ConformanceSuite):
    """No component pinned: every drafter x builder x selector x verifier that fits."""


class TestFixedBudget(ConformanceSuite):
    """The budget selector with a fixed node budget instead of the cost curve."""

    selector = "budget"
    options = {"selector": {"budget": 3}}
