import math

import pytest
import torch

from specmix import ConfigurationError, DecodeSettings, StepContext, TokenTree
from specmix_ngram import NgramDrafter
from specmix_ngram.suffix_memory import SuffixMemory


def _propose(drafter, tokens, vocab=50):
    ctx = StepContext(step=0, tokens=torch.tensor(tokens), settings=DecodeSettings(), vocab_size=vocab, max_depth=20)
    return drafter.propose(ctx).tree


def test_proposes_a_trie_of_every_continuation_of_the_longest_match():
    drafter = NgramDrafter(max_ngram=2, depth=3)
    context = [1, 2, 3, 4, 9, 1, 2, 5, 6, 7, 8, 1, 2]
    drafter.start(torch.tensor(context), {})
    tree = _propose(drafter, context)
    paths = {tuple(tree.token_list[i] for i in tree.path(leaf)) for leaf in range(tree.size) if not tree.children[leaf]}
    assert paths == {(3, 4, 9), (5, 6, 7)}
    reach = tree.cumulative_logprobs().exp()
    assert reach[1] == reach[4] == 0.25  # the prior 0.5 of continuing, split between two continuations


def test_calibrates_continuation_odds_from_verdicts():
    from specmix import Verdict

    drafter = NgramDrafter(max_ngram=1, depth=2, prior=0.5, prior_weight=2)
    context = [1, 2, 3, 1]
    drafter.start(torch.tensor(context), {})
    tree = _propose(drafter, context)  # root 1 -> 2 -> 3
    assert tree.cumulative_logprobs().exp()[1] == pytest.approx(0.5)
    # The target refused the first token: one failure for first tokens after a unigram match.
    drafter.observe(Verdict(tree=tree, path=(), bonus=7, logits=torch.zeros(tree.size, 50)), None)
    assert drafter.odds.evidence(("context", 1, False)) == (0, 1)
    assert _propose(drafter, [*context, 7]).size == 1  # 7 never occurred before
    drafter.observe(Verdict(tree=TokenTree.root_only(7, 50), path=(), bonus=1, logits=torch.zeros(1, 50)), None)
    again = _propose(drafter, [*context, 7, 1])
    assert again.cumulative_logprobs().exp()[1] == pytest.approx(1 / 3 * 1 / 2)  # 2 continuations of 1 now


def test_a_node_below_the_first_is_priced_as_the_longer_match_reaching_it_makes():
    from specmix import Verdict

    drafter = NgramDrafter(max_ngram=1, depth=3, prior=0.5, prior_weight=2)
    context = [1, 2, 3, 4, 1]
    drafter.start(torch.tensor(context), {})
    tree = _propose(drafter, context)  # root 1 -> 2 -> 3 -> 4, after a one-token match
    assert drafter.matched == ("context", 1)
    # The target takes 2 and 3 but not 4: below the root the match had 1 token, below 2 it had 2, below 3 it had 3.
    drafter.observe(Verdict(tree=tree, path=(1, 2), bonus=9, logits=torch.zeros(tree.size, 50)), None)
    assert drafter.odds.evidence_by_key == {("context", 1, False): (1, 1), ("context", 2, True): (1, 1),
                                            ("context", 3, True): (0, 1)}
    assert _propose(drafter, [*context, 2, 3, 9]).size == 1  # 9 never occurred before
    drafter.observe(Verdict(tree=TokenTree.root_only(9, 50), path=(), bonus=1, logits=torch.zeros(1, 50)), None)
    again = _propose(drafter, [*context, 2, 3, 9, 1])  # 1 -> 2 -> 3 -> {9, 4}, after a one-token match again
    assert drafter.matched == ("context", 1) and again.token_list == (1, 2, 3, 9, 4)
    conditional = [math.exp(v) for v in again.logprobs.tolist()[1:]]
    assert conditional == pytest.approx([2 / 3, 2 / 3, 1 / 6, 1 / 6])  # one rate for all deeper nodes gave 1/2


def test_falls_back_to_shorter_ngrams_and_to_nothing():
    drafter = NgramDrafter(max_ngram=3)
    drafter.start(torch.tensor([5, 6, 7, 5]), {})
    tree = _propose(drafter, [5, 6, 7, 5])
    assert tree.token_list[1] == 6  # only the unigram 5 matched
    drafter.start(torch.tensor([1, 2, 3]), {})
    assert _propose(drafter, [1, 2, 3]).size == 1


def test_the_index_grows_with_committed_tokens():
    drafter = NgramDrafter(max_ngram=1, depth=2)
    drafter.start(torch.tensor([1, 2]), {})

    class Verdict:
        committed = (3, 1)

    drafter.observe(Verdict(), None)
    tree = _propose(drafter, [1, 2, 3, 1])
    assert tree.token_list[1:] == (2, 3)


def test_a_long_match_is_a_class_of_its_own():
    drafter = NgramDrafter(max_ngram=2, depth=2)
    text = [5, 6, 7, 8, 9, 10, 11, 12, 13, 1, 2]
    context = text + [40] + text  # the whole text occurs again: agreement reaches the long-match class
    drafter.start(torch.tensor(context), {})
    _propose(drafter, context)
    assert drafter.matched == ("context", 8)
    short = [30, 1, 2, 3, 31, 1, 2]
    drafter.start(torch.tensor(short), {})
    _propose(drafter, short)
    assert drafter.matched == ("context", 2)



class _Committed:
    def __init__(self, *tokens):
        self.committed = tokens


def _answer(drafter, prompt, output):
    """One generation of ``drafter``: ``prompt``, then ``output`` committed."""
    drafter.start(torch.tensor(prompt), {})
    drafter.observe(_Committed(*output), None)


def test_a_later_generation_drafts_from_an_earlier_output():
    drafter = NgramDrafter(max_ngram=2, depth=3)
    _answer(drafter, [1, 2], [3, 4, 5, 6, 7])
    drafter.start(torch.tensor([9, 3, 4]), {})
    assert drafter.carried() == {"outputs": 1, "tokens": 5, "skipped_own": 0}
    tree = _propose(drafter, [9, 3, 4])
    assert tree.token_list[1:] == (5, 6, 7) and drafter.matched == ("earlier", 2)


def test_the_context_wins_a_tie_and_earlier_outputs_fill_in():
    drafter = NgramDrafter(max_ngram=1, depth=2)
    _answer(drafter, [1], [8, 5, 6])
    context = [8, 2, 8]
    drafter.start(torch.tensor(context), {})
    tree = _propose(drafter, context)
    assert tree.token_list[tree.children[0][0]] == 2 and sorted(tree.token_list[c] for c in tree.children[0]) == [2, 5]
    assert drafter.matched == ("context", 1)


def test_a_prompt_never_drafts_from_its_own_earlier_answer():
    drafter = NgramDrafter(max_ngram=2, depth=3)
    _answer(drafter, [1, 2], [3, 4, 5, 6, 7])
    drafter.start(torch.tensor([1, 2]), {})  # the same request again, as a benchmark's warm-up would be
    assert drafter.carried() == {"outputs": 0, "tokens": 0, "skipped_own": 1}
    assert _propose(drafter, [1, 2]).size == 1
    drafter.observe(_Committed(3, 4), None)
    assert _propose(drafter, [1, 2, 3, 4]).size == 1


def test_the_memory_forgets_its_oldest_outputs_first():
    memory = SuffixMemory(capacity=8, min_ngram=1, max_ngram=2)
    key = SuffixMemory.key_of
    memory.add(key((1,)), [10, 11, 12, 13, 14])
    memory.add(key((2,)), [20, 21, 22, 23, 24])
    assert memory.held(key((3,))) == {"outputs": 1, "tokens": 5, "skipped_own": 0}
    assert memory.continuations([10, 11], key((3,)), depth=2, limit=4) == (0, 0, [])
    assert memory.continuations([20, 21], key((3,)), depth=2, limit=4) == (2, 2, [[22, 23]])
    memory.add(key((4,)), [30, 31, 32, 33, 34])  # forgets a second output: its index entries are pruned
    assert memory.stale == 0 and all(serial == 3 for entries in memory.index.values() for serial, _ in entries)


def test_remembering_can_be_turned_off_and_must_be_a_count():
    drafter = NgramDrafter(remember=0)
    _answer(drafter, [1, 2], [3, 4, 5])
    drafter.start(torch.tensor([9, 3, 4]), {})
    assert drafter.carried()["outputs"] == 0 and _propose(drafter, [9, 3, 4]).size == 1
    with pytest.raises(ConfigurationError, match="remember"):
        NgramDrafter(remember=-1)


def test_mix_is_the_default_where_its_drafters_fit_and_ngram_where_they_do_not():
    from specmix import Registry, SpecmixWarning, load
    from specmix.testing import tiny_model

    registry = Registry.load()
    assert registry.default_methods()[:3] == ["mix", "ngram", "vanilla"]
    with pytest.warns(SpecmixWarning, match="the default method 'mix' does not run on this model .*corpus.*; "
                                            "running 'ngram'"):
        decoder = load(tiny_model(), registry=registry)  # no corpus of its answers ships for a random model
    assert decoder.composition.label == "ngram+drafted+budget+tree"
