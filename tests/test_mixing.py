"""Several drafters in one step: merged trees, riders side by side, calibrated scores, lossless all the same."""

import math

import pytest
import torch

from specmix import DecodeSettings, Proposal, Riders, StepContext, TokenTree
from specmix.sizing.calibration import Calibration
from specmix.sizing.cost import CostCurve
from specmix.sizing.mixing import Mix, Solo, combined_riders
from specmix.sizing.payoff import DrafterPayoff
from specmix.testing import ConformanceSuite, reference_greedy, tiny_model
from specmix.testing.properties import make_decoder
from specmix.values import Verdict


class TestMixes(ConformanceSuite):
    """Mixes that put every kind of proposal together: trees with marginals, riders with hidden states, and the
    built-in drafters that pay on a CPU."""

    mixes = (
        {"drafter": "kit-random-tree+kit-random-marginals", "builder": "drafted+chain", "selector": "budget",
         "verifier": "tree"},
        {"drafter": "kit-riders+kit-features", "builder": "drafted+best-first", "selector": "all", "verifier": "tree"},
        {"drafter": "ngram+diffusion+ptd", "builder": "drafted+best-first+drafted", "selector": "budget",
         "verifier": "tree"},
        {"drafter": "ngram+corpus", "builder": "drafted+drafted", "selector": "budget", "verifier": "tree"},
    )
    sampling_samples = 300


def _ctx(root=0, vocab=16):
    return StepContext(step=0, tokens=torch.tensor([root]), settings=DecodeSettings(), vocab_size=vocab, max_depth=8)


def test_merged_trees_keep_each_node_once_with_the_mean_of_its_drafters_estimates():
    mix = Mix(2, Calibration(explore=0.0))
    first = TokenTree(tokens=[0, 1, 2], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, -0.1, -0.5])
    second = TokenTree(tokens=[0, 1, 3], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, -2.0, -0.2])
    tree, proposal = mix.merge([first, second], [Proposal(tree=first), Proposal(tree=second)], _ctx())
    assert tree.token_list == (0, 1, 2, 3) and tree.parent_list == (-1, 0, 1, 1)
    assert mix.claims[1] == {0: pytest.approx(math.exp(-0.1)), 1: pytest.approx(math.exp(-2.0))}
    estimates = [mix.calibration.estimate(source, 1, claimed) for source, claimed in mix.claims[1].items()]
    assert estimates[0] > estimates[1]
    assert float(tree.logprobs[1]) == pytest.approx(math.log((estimates[0] + estimates[1]) / 2))  # not the larger
    verdict = Verdict(tree=tree, path=(1, 3), bonus=5, logits=torch.zeros(4, 16))
    assert mix.credit(verdict) == (1, 2)  # node 1 came from both, node 3 from the second


def _learn(mix, trees, taken, steps=30):
    """Merge ``trees`` and have the target take the token ``taken`` below the root, ``steps`` times."""
    for _ in range(steps):
        tree, _ = mix.merge(trees, [None if t is None else Proposal(tree=t) for t in trees], _ctx())
        path = tuple(node for node in range(1, tree.size) if tree.token_list[node] == taken)
        mix.share(Verdict(tree=tree, path=path, bonus=7, logits=torch.zeros(tree.size, 16)))
    return mix.merge(trees, [None if t is None else Proposal(tree=t) for t in trees], _ctx())[0]


def _claim(token, logprob):
    return TokenTree(tokens=[0, token], parents=[-1, 0], vocab_size=16, logprobs=[0, logprob])


def test_a_calibrated_drafters_claim_stands_alone_and_an_uncalibrated_ones_is_learnt():
    mix = Mix(2, Calibration(explore=0.0), calibrated=[True, False])
    tree = _learn(mix, [None, _claim(4, -0.05)], taken=None)  # drafter 1 claims 0.95 for a token never taken
    assert math.exp(float(tree.logprobs[1])) < 0.2 and mix.calibration.odds.counts.keys() == {((1, "alone"), 1, 8)}
    tree, _ = mix.merge([_claim(4, -0.05), None], [Proposal(tree=_claim(4, -0.05)), None], _ctx())
    assert float(tree.logprobs[1]) == pytest.approx(-0.05)  # the calibrated drafter's own estimate, untouched


def test_a_claim_another_drafter_contests_is_learnt_apart_from_the_same_claim_alone():
    mix = Mix(2, Calibration(explore=0.0), calibrated=[True, True])
    tree = _learn(mix, [_claim(4, -0.05), _claim(5, -1.5)], taken=5)  # the target sides with drafter 1's token
    scores = dict(zip(tree.token_list[1:], (math.exp(float(v)) for v in tree.logprobs[1:])))
    assert scores[4] < 0.2 and scores[5] > 0.8
    assert mix.situations[1] == {0: "contested"} and mix.situations[2] == {1: "contested"}
    alone, _ = mix.merge([_claim(4, -0.05), None], [Proposal(tree=_claim(4, -0.05)), None], _ctx())
    assert float(alone.logprobs[1]) == pytest.approx(-0.05)


def test_a_token_two_drafters_agree_on_is_scored_on_what_agreement_brings():
    mix = Mix(2, Calibration(explore=0.0), calibrated=[True, True])
    first, second = _claim(4, math.log(0.3)), _claim(4, math.log(0.2))
    assert math.exp(float(mix.merge([first, second], [Proposal(tree=first), Proposal(tree=second)],
                                    _ctx())[0].logprobs[1])) == pytest.approx(0.25)
    tree = _learn(mix, [first, second], taken=4)  # together they are always right
    assert mix.situations[1] == {0: "agreed", 1: "agreed"} and math.exp(float(tree.logprobs[1])) > 0.9


class _Recording(DrafterPayoff):
    def record(self, played, committed, seconds):
        self.last_gains = [gain for _, gain, _ in played.values()]
        super().record(played, committed, seconds)


@pytest.mark.parametrize("costs, gains", [((0.001, 0.01), [1.0, 1.0]), ((0.01, 0.001), [0.0, 2.0]),
                                          ((0.005, 0.005), [0.5, 1.5])])
def test_a_drafter_gains_the_accepted_nodes_it_alone_proposed_and_shared_ones_go_to_the_cheapest(costs, gains):
    mix = Mix(2, Calibration(explore=0.0), payoff=_Recording(4), covered=10.0)
    for slot, cost in ((0, costs[0]), (2, costs[1])):  # the drafters' recent costs per step, in the slots in play
        mix.payoff.spend[slot].add(cost)
    first = TokenTree(tokens=[0, 1, 2], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, -0.1, -0.5])
    second = TokenTree(tokens=[0, 1, 3], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, -2.0, -0.2])
    assert mix.ask(0, [None, None]) and mix.ask(1, [first, None])
    tree, _ = mix.merge([first, second], [Proposal(tree=first), Proposal(tree=second)], _ctx())
    verdict = Verdict(tree=tree, path=(1, 3), bonus=5, logits=torch.zeros(4, 16))  # node 1 from both, 3 from the second
    mix.settle(verdict, [0.0, 0.0], {"verify": 0.1}, 3, CostCurve(sizes=[1, 8], seconds=[0.05, 0.08]))
    assert mix.payoff.last_gains == gains


def test_a_drafter_is_measured_apart_where_the_drafters_before_it_expect_tokens():
    """A guesser that is right only where the lookup has nothing pays there, and sits out beside a match."""
    mix = Mix(2, Calibration(explore=0.0), payoff=DrafterPayoff(4, revisit=50, trial=2), calibrated=[True, False])
    match = TokenTree(tokens=[0, 1, 2], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, -0.05, -0.05])
    guess = TokenTree(tokens=[0, 3], parents=[-1, 0], vocab_size=16, logprobs=[0, -0.5])
    curve = CostCurve(sizes=[1, 8], seconds=[0.05, 0.05])
    beside, alone = [], []
    for step in range(40):
        matched = step % 2 == 0
        first = match if matched else TokenTree.root_only(0, 16)
        assert mix.ask(0, [None, None])
        asked = mix.ask(1, [first, None])
        (beside if matched else alone).append(asked)
        trees = [first, guess if asked else None]
        tree, _ = mix.merge(trees, [None if t is None else Proposal(tree=t) for t in trees], _ctx())
        path = (1, 2) if matched else ((tree.size - 1,) if asked else ())  # the target takes the match, else the guess
        verdict = Verdict(tree=tree, path=path, bonus=5, logits=torch.zeros(tree.size, 16))
        mix.settle(verdict, [0.0, 0.01], {"verify": 0.1}, len(path) + 1, curve)
    assert all(alone)  # one token per 10 ms: five times the step's rate
    assert beside[:2] == [True, True] and not any(beside[2:])  # nothing only it brings: out after its trial


def test_calibration_learns_that_a_drafter_overclaims_and_keeps_it_for_the_next_generation():
    mix = Mix(2, Calibration(explore=0.0))
    boastful = TokenTree(tokens=[0, 4], parents=[-1, 0], vocab_size=16, logprobs=[0, -0.05])
    for _ in range(30):  # claims 0.95, is never right
        tree, _ = mix.merge([boastful, TokenTree.root_only(0, 16)], [Proposal(tree=boastful), Proposal()], _ctx())
        mix.share(Verdict(tree=tree, path=(), bonus=7, logits=torch.zeros(tree.size, 16)))
    mix.start()
    tree, _ = mix.merge([boastful, TokenTree.root_only(0, 16)], [Proposal(tree=boastful), Proposal()], _ctx())
    assert tree.logprobs[1].exp() < 0.2


def test_riders_of_several_drafters_see_only_the_root_and_their_own():
    a = Riders(tokens=torch.tensor([5, 6]), offsets=torch.tensor([1, 2]), visible=torch.ones(2, 3, dtype=torch.bool))
    b = Riders(tokens=torch.tensor([7]), offsets=torch.tensor([1]), visible=torch.tensor([[False, True]]))
    riders, starts = combined_riders([Proposal(riders=a), Proposal(), Proposal(riders=b)])
    assert riders.tokens.tolist() == [5, 6, 7] and starts == [0, 2, 2]
    assert riders.visible.tolist() == [[True, True, True, False], [True, True, True, False], [False, False, False, True]]


def test_a_mix_from_the_command_line_names_each_drafters_builder(capsys):
    from specmix.cli.main import main

    assert main(["generate", "Count: one two three one two three", "--drafter", "ngram+ptd", "--builder", "drafted",
                 "--selector", "budget", "--verifier", "tree", "-o", "drafter.ngram.max_ngram=2", "--max-new-tokens", "12",
                 "--stats"]) == 0
    assert "[(ngram & ptd)+(drafted & drafted)+budget+tree]" in capsys.readouterr().err


def test_every_drafter_in_a_mix_gets_credit_for_what_it_proposed(registry):
    model = tiny_model("llama")
    names = {"drafter": "kit-random-tree+kit-random-marginals", "builder": "drafted+chain", "selector": "all",
             "verifier": "tree"}
    decoder = make_decoder(registry, names, model, seed=3)
    settings = DecodeSettings(max_new_tokens=30, stop_ids=())
    generation = decoder.generate([3, 4, 5], settings)
    assert list(generation.tokens) == reference_greedy(model, [3, 4, 5], settings)
    credit = [sum(step.accepted_from[i] for step in generation.steps) for i in range(2)]
    assert all(count > 0 for count in credit) and sum(credit) >= sum(step.accepted for step in generation.steps)


@pytest.mark.parametrize("calibrated, verify, answers_for", [(True, 0.1, 0.003 + 0.002 + 0.004),
                                                             (False, 0.06, 0.003 + 0.002 + 0.004 + 0.020),
                                                             (False, 0.1, 0.003 + 0.002 + 0.1 - 0.050)])
def test_a_lone_drafter_with_its_own_scores_answers_for_the_positions_verified_on_them(calibrated, verify, answers_for):
    """The selector priced the nodes on the drafter's scores: right if they are calibrated odds, else the drafter's
    to pay for, so that one whose claims promise more than the target takes is weighed against plain decoding: then
    it answers for all its verification took beyond T(1), the curve's price or the measured time, whichever is more.
    Either way it answers for its pass, its riders, and the selector's time over its tree (2 ms here)."""
    solo = Solo(_Recording(1), calibrated=calibrated)
    assert solo.ask(0, [None])
    tree = TokenTree(tokens=[0, 1, 2], parents=[-1, 0, 1], vocab_size=16, logprobs=[0, 0, 0])
    riders = torch.zeros(2, 16)  # two riders in the same forward: T(5) - T(3) = 4 ms
    verdict = Verdict(tree=tree, path=(), bonus=5, logits=torch.zeros(3, 16), rider_logits=riders)
    curve = CostCurve(sizes=[1, 3, 5], seconds=[0.050, 0.070, 0.074])
    solo.settle(verdict, [0.003], {"select": 0.002, "verify": verify}, 1, curve)
    assert solo.payoff.cost(0) == pytest.approx(answers_for)
