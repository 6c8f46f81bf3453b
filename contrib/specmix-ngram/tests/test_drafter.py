import torch

from specmix import DecodeSettings, StepContext
from specmix_ngram import NgramDrafter


def _propose(drafter, tokens, vocab=50):
    ctx = StepContext(0, torch.tensor(tokens), DecodeSettings(), vocab, 20)
    return drafter.propose(ctx).tree


def test_proposes_a_trie_of_every_continuation_of_the_longest_match():
    drafter = NgramDrafter(max_ngram=2, depth=3)
    context = [1, 2, 3, 4, 9, 1, 2, 5, 6, 7, 8, 1, 2]
    drafter.start(torch.tensor(context), {})
    tree = _propose(drafter, context)
    paths = {tuple(tree.token_list[i] for i in tree.path(leaf)) for leaf in range(tree.size) if not tree.children[leaf]}
    assert paths == {(3, 4, 9), (5, 6, 7)}
    reach = tree.cumulative_logprobs().exp()
    assert reach[1] == reach[4]  # two continuations, one each: equal shares
    assert float(reach[1]) < 0.5


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
