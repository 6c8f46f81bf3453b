"""Reach selectors sized by the cost curve learn from verdicts how the scores they size trees on fare."""

import collections
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specmix import DecodeSettings, Proposal, StepContext, TokenTree, Verdict
from specmix.plugins.basic.budget_selector import BudgetSelector
from specmix.sizing.calibration import DepthScale
from specmix.testing import CURVE, tiny_model
from specmix.testing.properties import make_decoder
from strategies import token_trees

CONFIDENT = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 1, 2, 0], vocab_size=8,
                      logprobs=[0.0, -0.05, -0.05, -0.05, -3.0])
"""A chain of three tokens each claimed at 95%, and a doubtful sibling of its first."""


def _ctx(tree, cost=CURVE, max_depth=10):
    return StepContext(step=0, tokens=torch.tensor([tree.root]), settings=DecodeSettings(), vocab_size=tree.vocab_size,
                       max_depth=max_depth, cost=cost)


def _verdict(tree, path):
    return Verdict(tree=tree, path=tuple(path), bonus=0, logits=torch.zeros(tree.size, tree.vocab_size))


def _rejected_every_step(selector, proposal, steps=60):
    """Select over the confident chain ``steps`` times, the target rejecting its first token every time."""
    for _ in range(steps):
        chosen = selector.select(CONFIDENT, proposal, _ctx(CONFIDENT))
        selector.observe(_verdict(chosen, ()), _ctx(CONFIDENT))
    return selector.select(CONFIDENT, proposal, _ctx(CONFIDENT))


def test_claims_the_target_rejects_stop_being_verified():
    assert BudgetSelector().select(CONFIDENT, Proposal(), _ctx(CONFIDENT)).size == 5
    assert _rejected_every_step(BudgetSelector(), Proposal()).size == 1
    assert _rejected_every_step(BudgetSelector(calibrate=False), Proposal()).size == 5


def test_scores_that_are_acceptance_odds_already_are_taken_as_they_are():
    selector = _counted(BudgetSelector())
    assert _rejected_every_step(selector, Proposal(calibrated=True)).size == 5
    assert _tried(selector) == 0


class Counted(DepthScale):
    """A depth scale that also counts the outcomes it learns, per depth."""

    def __init__(self):
        super().__init__()
        self.outcomes = collections.Counter()

    def record(self, depth, claimed, accepted):
        self.outcomes[depth] += 1
        super().record(depth, claimed, accepted)


def _counted(selector):
    selector.calibration = Counted()
    return selector


def _tried(selector):
    """How many verified nodes the selector has learnt from."""
    return sum(selector.calibration.outcomes.values())


def test_a_fixed_budget_keeps_its_size_and_order():
    selector = _counted(BudgetSelector(budget=3))
    assert _rejected_every_step(selector, Proposal()).token_list == (0, 1, 2, 3)
    assert _tried(selector) == 0


def test_claims_the_target_takes_are_trusted_further():
    """A chain claimed at even odds that the target always takes comes to be verified whole."""
    chain = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 1, 2, 3], vocab_size=8, logprobs=[0.0] + [math.log(0.5)] * 4)
    selector = BudgetSelector()
    first = selector.select(chain, Proposal(), _ctx(chain))
    for _ in range(100):
        chosen = selector.select(chain, Proposal(), _ctx(chain))
        selector.observe(_verdict(chosen, range(1, chosen.size)), _ctx(chain))
    assert 1 < first.size < selector.select(chain, Proposal(), _ctx(chain)).size == 5
    assert selector.calibration.factor(1) > 1.5


def test_scaling_keeps_the_order_of_claims_at_a_depth():
    """However the verdicts went, siblings are ranked as their claims rank them."""
    fan = TokenTree(tokens=[0, 1, 2, 3, 4], parents=[-1, 0, 0, 0, 0], vocab_size=8,
                    logprobs=[0.0, math.log(0.2), math.log(0.5), math.log(0.1), math.log(0.15)])
    selector = BudgetSelector()
    for outcome in [True, False, False, True, False] * 10:
        chosen = selector.select(fan, Proposal(), _ctx(fan))
        selector.observe(_verdict(chosen, [1] if outcome and chosen.size > 1 else []), _ctx(fan))
        claims = sorted(((fan.logprobs[fan.token_list.index(t)].item(), t) for t in chosen.token_list[1:]), reverse=True)
        assert [t for _, t in claims] == [2, 1, 4, 3][: chosen.size - 1]


def test_learns_from_a_verdict_on_the_tree_cut_to_the_room_left():
    selector = _counted(BudgetSelector())
    chosen = selector.select(CONFIDENT, Proposal(), _ctx(CONFIDENT))
    cut = chosen.truncated(1)
    selector.observe(_verdict(cut, (1,)), _ctx(CONFIDENT))
    assert _tried(selector) == 2  # the chain's first token taken, its sibling not; nothing deeper was verified
    assert set(selector.calibration.outcomes) == {1}


@settings(max_examples=60, deadline=None)
@given(tree=token_trees(), accepted=st.lists(st.booleans(), min_size=1, max_size=40))
def test_calibrated_selection_stays_prefix_closed_and_learns_one_outcome_per_reached_node(tree, accepted):
    selector = _counted(BudgetSelector())
    for outcome in accepted:
        chosen = selector.select(tree, Proposal(), _ctx(tree))
        assert chosen.token_list == tree.subtree(_kept(tree, chosen)).token_list
        path, node = [], 0
        while outcome and chosen.children[node]:
            node = chosen.children[node][0]
            path.append(node)
        before = _tried(selector)
        selector.observe(_verdict(chosen, path), _ctx(tree))
        reached = {0, *path}
        assert _tried(selector) - before == sum(1 for n in range(1, chosen.size) if chosen.parent_list[n] in reached)


def _kept(tree, chosen):
    """The nodes of ``tree`` that ``chosen`` holds (a subtree keeps its nodes in order)."""
    kept, mapped = [0], {0: 0}
    for node in range(1, tree.size):
        parent = mapped.get(tree.parent_list[node])
        if parent is None:
            continue
        here = next((c for c in chosen.children[parent] if chosen.token_list[c] == tree.token_list[node]), None)
        if here is not None:
            mapped[node] = here
            kept.append(node)
    return kept


@pytest.mark.parametrize("names, learns", [
    (dict(drafter="kit-random-marginals", builder="best-first", selector="budget", verifier="tree"), True),
    (dict(drafter="diffusion", builder="pool", selector="learned", verifier="tree"), True),
    (dict(drafter="kit-random-marginals+kit-riders", builder="best-first+drafted", selector="budget",
          verifier="tree"), False),
])
def test_a_decoder_tells_its_selector_every_verdict(registry, names, learns):
    """A lone drafter's claims, and a learned scorer's, are calibrated by the selector; a mix's merged scores are
    calibrated already."""
    decoder = make_decoder(registry, names, tiny_model("llama"), seed=4)
    decoder.generate([3, 4, 5], DecodeSettings(max_new_tokens=24, stop_ids=()))
    assert bool(decoder.composition.selector.component.calibration.learnt) == learns
