import random

import torch

from specmix.plugins.ptd.draft_tree import DraftNode, ProgressiveDraftTree
from specmix.plugins.ptd.pool import CandidatePool
from specmix.testing import ConformanceSuite


def _tree(**options):
    draft = ProgressiveDraftTree(**options)
    a, b = DraftNode(10, [DraftNode(11, [DraftNode(12)]), DraftNode(13)]), DraftNode(20)
    draft.spine = [a, b]
    return draft


def _visible_tokens(riders, row):
    return [riders.tokens[j - 1].item() for j in riders.visible[row].nonzero().flatten().tolist() if j > 0]


def test_riders_are_depth_first_and_see_the_spine_before_them():
    riders = _tree().riders()
    assert riders.tokens.tolist() == [10, 11, 12, 13, 20]
    assert riders.visible[:, 0].all()
    assert _visible_tokens(riders, 2) == [10, 11, 12]
    assert _visible_tokens(riders, 3) == [10, 13]
    assert _visible_tokens(riders, 4) == [10, 20]  # the second spine node sees the first
    assert riders.offsets.tolist() == [1, 2, 3, 2, 2]


def test_unlinked_branches_are_independent_and_the_rider_cap_holds():
    riders = _tree(linked_spine=False).riders()
    assert _visible_tokens(riders, 4) == [20] and riders.offsets.tolist()[4] == 1
    assert _tree(max_riders=3).riders().tokens.tolist() == [10, 11, 12]


def test_predictions_grow_children_within_the_width_and_skip_stop_ids():
    draft = _tree(max_children=2, spine=2)
    draft.riders()
    draft.grow([14, 15, 16, 17, 2], stop_ids=frozenset({2}))
    head, second = draft.spine
    assert [c.token for c in head.children] == [11, 13]  # 14 refused: the node already has two children
    assert [c.token for c in head.children[0].children] == [12, 15]
    assert second.children == [] and second.prediction == 2


def test_a_deep_spine_subtree_steps_to_its_oldest_child_and_the_spine_refills():
    draft = ProgressiveDraftTree(spine=2, max_depth=3)
    chain = DraftNode(1, [DraftNode(2, [DraftNode(3)])])
    draft.spine = [chain, DraftNode(9)]
    draft.riders()
    draft.grow([5, 6, 7, 8], stop_ids=frozenset())  # chain now has depth 3 below its head's level
    assert [h.token for h in draft.spine][:2] == [9, 2]
    draft.spine = [DraftNode(4)]
    draft.sent = draft.spine[:]
    draft.grow([30], stop_ids=frozenset())
    assert [h.token for h in draft.spine] == [4, 30]


def test_seeds_are_copied_from_the_prompt():
    draft = ProgressiveDraftTree()
    draft.seed([5, 6, 7, 8], random.Random(0))
    assert len(draft.spine) == 2
    for head in draft.spine:
        assert head.token in (5, 6, 7, 8)


def test_pool_tries_merge_count_and_evict_the_oldest_branch():
    pool = CandidatePool(max_nodes=4)
    pool.add(7, [[1, 2], [1, 3]])
    pool.add(7, [[4]])
    tree = pool.tree(7, vocab_size=10, max_depth=5, continue_logprob=lambda depth: 0.0)
    assert tree.token_list == (7, 1, 4, 2, 3)
    assert torch.allclose(tree.cumulative_logprobs().exp(), torch.tensor([1, 2 / 3, 1 / 3, 1 / 3, 1 / 3], dtype=torch.float64))
    pool.add(7, [[5, 6]])  # 6 nodes > 4: the branch touched longest ago (1 -> 2, 3) goes
    assert pool.tree(7, 10, 5, lambda depth: 0.0).token_list == (7, 4, 5, 6)
    assert pool.tree(8, 10, 5, lambda depth: 0.0).size == 1


class TestPTDBranches(ConformanceSuite):
    """The linear-branch ablation is a configuration of the same drafter, and lossless too.

    300 samples per chi-square test, like the other suites here (tests/test_kit_power.py).
    """

    drafter = "ptd"
    options = {"drafter": {"linked_spine": False, "max_children": 1, "max_riders": 6}}
    sampling_samples = 300


def test_the_rider_budget_tries_every_count_then_keeps_the_best():
    from specmix import CostCurve
    from specmix.plugins.ptd.rider_budget import RiderBudget

    curve = CostCurve(sizes=(1, 16), seconds=(1.0, 2.5))
    budget = RiderBudget({0, 2, 8}, window=2)
    tokens = {0: 1, 2: 1, 8: 3}  # eight riders pay: 3 tokens for a forward of 9
    chosen = []
    for _ in range(40):
        arm = budget.choose()
        chosen.append(arm)
        budget.record(arm, tokens[arm], 1 + arm, curve)
    assert chosen[:6] == [2, 2, 8, 8, 0, 0]  # each count tried first, the fewest riders that send any first, none last
    assert set(chosen[6:]) == {8}  # then the best
    budget.reset()
    tokens = {0: 1, 2: 1, 8: 1}  # riders that never pay: none are sent
    for _ in range(12):
        arm = budget.choose()
        budget.record(arm, tokens[arm], 1 + arm, curve)
    assert budget.choose() == 0
