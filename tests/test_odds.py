import math

import pytest
import torch

from specmix import ConfigurationError, TokenTree, Verdict
from specmix.sizing.odds import ContinuationOdds


def _verdict(tree, path):
    return Verdict(tree=tree, path=path, bonus=0, logits=torch.zeros(tree.size, 8))


def test_counts_reached_nodes_with_children_as_continued_or_not():
    tree = TokenTree.from_paths(0, [[1, 2, 3], [4]], vocab_size=8)  # 1:1 2:2 3:3 4:4
    odds = ContinuationOdds(prior=0.5, weight=2)
    odds.record(_verdict(tree, (1,)), key=lambda node: tree.depth_list[node])
    assert odds.evidence(0) == (1, 1)  # the root went on to node 1
    assert odds.evidence(1) == (0, 1)  # node 1 had a child but the walk stopped there
    assert 2 not in odds.evidence_by_key  # node 2 was never reached
    assert odds.logprob(0) == pytest.approx(math.log(2 / 3))
    assert odds.logprob(7) == pytest.approx(math.log(0.5))
    odds.reset()
    assert odds.logprob(0) == pytest.approx(math.log(0.5))


def test_refuses_a_prior_outside_the_unit_interval():
    with pytest.raises(ConfigurationError, match="prior"):
        ContinuationOdds(prior=1.0)


def test_exploring_odds_are_optimistic_until_evidence_accumulates_and_forget_old_evidence():
    tree = TokenTree.from_paths(0, [[1, 2]], vocab_size=8)
    plain, exploring = ContinuationOdds(), ContinuationOdds(explore=1.0, memory=8)
    for _ in range(3):
        for odds in (plain, exploring):
            odds.record(_verdict(tree, ()), key=lambda node: "k")
    assert exploring.probability("k") > plain.probability("k") + 0.1
    for _ in range(200):
        exploring.record(_verdict(tree, ()), key=lambda node: "k")
    assert exploring.evidence("k")[1] < 8.01  # only about `memory` observations are kept
    assert 0.05 < exploring.probability("k") < 0.2  # still worth a try now and then
    with pytest.raises(ConfigurationError, match="memory > 1"):
        ContinuationOdds(memory=1)


def test_a_key_with_a_prior_of_its_own_starts_there_and_learns_from_evidence_as_any_other():
    odds = ContinuationOdds(prior=0.5, weight=2, priors={"long": 0.9, "short": 0.1})
    assert odds.probability("long") == pytest.approx(0.9)
    assert odds.probability("short") == pytest.approx(0.1)
    assert odds.probability("other") == pytest.approx(0.5)
    odds.count("long", False)
    assert odds.probability("long") == pytest.approx(1.8 / 3)
    with pytest.raises(ConfigurationError, match="priors"):
        ContinuationOdds(priors={"k": 1.0})
