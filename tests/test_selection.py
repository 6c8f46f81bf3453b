"""Reach selectors keep the nodes likeliest to be reached, as many as a budget allows or as pay on the cost curve."""

import math

import torch
from hypothesis import given, settings

from specmix import DecodeSettings, Proposal, StepContext, TokenTree
from specmix.plugins.basic.budget_selector import BudgetSelector
from specmix.sizing.selection import most_reached
from specmix.testing import CURVE
from strategies import token_trees

CONFIDENT = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 1, 2, 0], vocab_size=8,
                      logprobs=[0.0, -0.05, -0.05, -0.05, -3.0])
"""A chain of three tokens each claimed at 95%, and a doubtful sibling of its first."""


def _ctx(tree, cost=CURVE, max_depth=10):
    return StepContext(step=0, tokens=torch.tensor([tree.root]), settings=DecodeSettings(), vocab_size=tree.vocab_size,
                       max_depth=max_depth, cost=cost)


def test_a_fixed_budget_keeps_that_many_of_the_likeliest_nodes():
    assert BudgetSelector(budget=3).select(CONFIDENT, Proposal(), _ctx(CONFIDENT)).token_list == (0, 1, 2, 3)
    assert BudgetSelector(budget=0).select(CONFIDENT, Proposal(), _ctx(CONFIDENT)).size == 1


def test_siblings_are_kept_as_their_claims_rank_them():
    fan = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 0, 0, 0], vocab_size=8,
                    logprobs=[0.0, math.log(0.2), math.log(0.5), math.log(0.1), math.log(0.15)])
    for budget in range(5):
        chosen = BudgetSelector(budget=budget).select(fan, Proposal(), _ctx(fan))
        assert set(chosen.token_list[1:]) == set((2, 1, 4, 3)[:budget])  # a subtree keeps the tree's order


@settings(max_examples=60, deadline=None)
@given(tree=token_trees())
def test_sized_by_the_curve_a_selection_is_the_best_prefix_closed_subtree_that_pays(tree):
    chosen = BudgetSelector().select(tree, Proposal(), _ctx(tree))
    reach = tree.cumulative_logprobs().exp().tolist() if tree.logprobs is not None else None
    if tree.size == 1 or reach is None:
        return
    kept = most_reached(reach, CURVE)
    assert chosen.token_list == tree.subtree(kept).token_list  # the subtree those nodes make, prefix-closed
    gains = sorted(reach[1:], reverse=True)
    assert len(kept) - 1 == CURVE.best_size(gains)
    assert all(reach[i] >= reach[j] for i in kept[1:] for j in range(1, tree.size) if j not in kept)


def test_riders_count_in_the_forward_a_selection_is_priced_on():
    curve = type(CURVE)(sizes=(1, 4, 8), seconds=(1.0, 1.0, 3.0))  # flat up to four positions
    reach = [1.0, 0.3, 0.2, 0.1]
    assert most_reached(reach, curve) == [0, 1, 2, 3]  # free beside the root
    assert most_reached(reach, curve, extra_tokens=3) == [0]  # three riders took the free positions
