"""Several drafters in one step: merged trees, riders side by side, calibrated scores, lossless all the same."""

import math

import pytest
import torch

from specmix import DecodeSettings, Proposal, Riders, StepContext, TokenTree
from specmix.sizing.mixing import Mix, combined_riders
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
    mix = Mix(2)
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
        tree, _ = mix.merge(trees, [Proposal(tree=t) for t in trees], _ctx())
        path = tuple(node for node in range(1, tree.size) if tree.token_list[node] == taken)
        mix.share(Verdict(tree=tree, path=path, bonus=7, logits=torch.zeros(tree.size, 16)))
    return mix.merge(trees, [Proposal(tree=t) for t in trees], _ctx())[0]


NOTHING = TokenTree.root_only(0, 16)
"""What a drafter with nothing to propose builds."""


def _claim(token, logprob):
    return TokenTree(tokens=[0, token], parents=[-1, 0], vocab_size=16, logprobs=[0, logprob])


def test_a_calibrated_drafters_claim_stands_alone_and_an_uncalibrated_ones_is_learnt():
    mix = Mix(2, calibrated=[True, False])
    tree = _learn(mix, [NOTHING, _claim(4, -0.05)], taken=None)  # drafter 1 claims 0.95 for a token never taken
    assert math.exp(float(tree.logprobs[1])) < 0.2 and mix.calibration.odds.counts.keys() == {((1, "alone"), 1, 8)}
    tree, _ = mix.merge([_claim(4, -0.05), NOTHING], [Proposal(tree=_claim(4, -0.05)), Proposal(tree=NOTHING)], _ctx())
    assert float(tree.logprobs[1]) == pytest.approx(-0.05)  # the calibrated drafter's own estimate, untouched


def test_a_claim_another_drafter_contests_is_learnt_apart_from_the_same_claim_alone():
    mix = Mix(2, calibrated=[True, True])
    tree = _learn(mix, [_claim(4, -0.05), _claim(5, -1.5)], taken=5)  # the target sides with drafter 1's token
    scores = dict(zip(tree.token_list[1:], (math.exp(float(v)) for v in tree.logprobs[1:])))
    assert scores[4] < 0.2 and scores[5] > 0.8
    assert mix.situations[1] == {0: "contested"} and mix.situations[2] == {1: "contested"}
    alone, _ = mix.merge([_claim(4, -0.05), NOTHING], [Proposal(tree=_claim(4, -0.05)), Proposal(tree=NOTHING)],
                         _ctx())
    assert float(alone.logprobs[1]) == pytest.approx(-0.05)


def test_a_token_two_drafters_agree_on_is_scored_on_what_agreement_brings():
    mix = Mix(2, calibrated=[True, True])
    first, second = _claim(4, math.log(0.3)), _claim(4, math.log(0.2))
    assert math.exp(float(mix.merge([first, second], [Proposal(tree=first), Proposal(tree=second)],
                                    _ctx())[0].logprobs[1])) == pytest.approx(0.25)
    tree = _learn(mix, [first, second], taken=4)  # together they are always right
    assert mix.situations[1] == {0: "agreed", 1: "agreed"} and math.exp(float(tree.logprobs[1])) > 0.9


def test_calibration_learns_that_a_drafter_overclaims():
    mix = Mix(2)
    boastful = TokenTree(tokens=[0, 4], parents=[-1, 0], vocab_size=16, logprobs=[0, -0.05])
    for _ in range(30):  # claims 0.95, is never right
        tree, _ = mix.merge([boastful, NOTHING], [Proposal(tree=boastful), Proposal(tree=NOTHING)], _ctx())
        mix.share(Verdict(tree=tree, path=(), bonus=7, logits=torch.zeros(tree.size, 16)))
    tree, _ = mix.merge([boastful, NOTHING], [Proposal(tree=boastful), Proposal(tree=NOTHING)], _ctx())
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
