"""The corpus drafter: its suffix-array datastore against brute force, its candidates and odds, its recipe's parts."""

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specmix import ConfigurationError, DecodeSettings, StepContext, TokenTree, Verdict
from specmix.plugins.retrieval.candidates import GrowingMatch, node_key
from specmix.plugins.retrieval.corpus import Corpus, CorpusConfig
from specmix.plugins.retrieval.datastore import Datastore, Match, suffix_array
from specmix.plugins.retrieval.drafter import CorpusDrafter
from specmix.plugins.retrieval.recipe import documents, rates, shared_ending, split_held_out, taken_counts

documents_of_few_tokens = st.lists(st.lists(st.integers(0, 3), max_size=40), min_size=1, max_size=12)


def _occurrences(texts, pattern):
    """Brute force: (document, end) after every occurrence of ``pattern``."""
    size = len(pattern)
    return [(d, i + size) for d, text in enumerate(texts) for i in range(len(text) - size + 1)
            if list(text[i:i + size]) == list(pattern)]


@given(texts=documents_of_few_tokens)
def test_the_suffix_array_orders_every_suffix(texts):
    store = Datastore.of(texts)
    # Each separator is its own symbol below every token, so no two suffixes tie.
    symbols, separators = [], 0
    for token in store.text.tolist():
        symbols.append(token if token >= 0 else -1 - separators)
        separators += token < 0
    order = suffix_array(store.text).tolist()
    assert sorted(order) == list(range(len(symbols)))
    assert [symbols[start:] for start in order] == sorted(symbols[start:] for start in range(len(symbols)))


@given(texts=documents_of_few_tokens, pattern=st.lists(st.integers(0, 3), min_size=1, max_size=5))
def test_occurrences_are_those_brute_force_finds(texts, pattern):
    store = Datastore.of(texts)
    low, high = store.occurrences(pattern)
    assert high - low == len(_occurrences(texts, pattern))


@given(texts=documents_of_few_tokens, context=st.lists(st.integers(0, 3), min_size=1, max_size=12))
def test_the_longest_match_is_the_longest_suffix_held_and_never_spans_documents(texts, context):
    store = Datastore.of(texts)
    match = store.longest_match(context, longest=8)
    held = [n for n in range(1, min(8, len(context)) + 1) if _occurrences(texts, context[-n:])]
    assert (match is None) == (not held)
    if match is not None:
        assert match.length == max(held) and match.count == len(_occurrences(texts, context[-match.length:]))


@given(texts=documents_of_few_tokens, context=st.lists(st.integers(0, 3), min_size=1, max_size=24),
       steps=st.lists(st.integers(0, 4), min_size=1, max_size=12), longest=st.integers(1, 8))
def test_a_growing_context_keeps_the_match_a_fresh_search_finds(texts, context, steps, longest):
    store = Datastore.of(texts)
    matching, seen = GrowingMatch(store, longest), 1
    for step in steps:  # the context arrives a few tokens at a time, sometimes none
        seen = min(seen + step, len(context))
        assert matching.of(context[:seen]) == store.longest_match(context[:seen], longest)
    assert matching.of(context[:1]) == store.longest_match(context[:1], longest)  # a shorter context is another one


@given(texts=documents_of_few_tokens, pattern=st.lists(st.integers(0, 3), min_size=1, max_size=4),
       following=st.lists(st.integers(0, 3), max_size=4))
def test_a_match_extended_by_what_followed_is_the_range_of_the_longer_pattern(texts, pattern, following):
    store = Datastore.of(texts)
    low, high = store.occurrences(pattern)
    assume(high > low)
    extended = store.extended(Match(len(pattern), low, high), following)
    whole = store.occurrences(pattern + following)
    assert extended == (None if whole[1] == whole[0] else Match(len(pattern) + len(following), *whole))


@given(texts=documents_of_few_tokens, context=st.lists(st.integers(0, 3), min_size=1, max_size=6))
@settings(max_examples=60)
def test_continuations_count_what_followed_the_match_and_go_most_frequent_first(texts, context):
    store = Datastore.of(texts)
    match = store.longest_match(context, longest=6)
    assume(match is not None)  # not a silent pass: hypothesis fails the test where too few contexts match
    found = store.continuations(match, nodes=6, depth=3)
    assert found.counts[0] == match.count and len(found.tokens) <= 7
    paths = [()]
    for node in range(1, len(found.tokens)):
        parent = found.parents[node]
        assert parent < node
        paths.append(paths[parent] + (found.tokens[node],))
        followers = _occurrences(texts, list(context[-match.length:]) + list(paths[node]))
        assert found.counts[node] == len(followers) <= found.counts[parent]
    assert found.counts[1:] == tuple(sorted(found.counts[1:], reverse=True))  # taken best first


def test_a_datastore_saves_and_loads_its_documents(tmp_path):
    store = Datastore.of([[5, 6, 7], [], [7, 5]])
    assert store.documents == 3 and store.tokens == 5
    store.save(tmp_path / "tokens.npy")
    again = Datastore.load(tmp_path / "tokens.npy")
    assert again.text.tolist() == store.text.tolist() and again.occurrences([7]) == store.occurrences([7])
    with pytest.raises(ConfigurationError, match="non-negative"):
        Datastore.of([[1, -1]])
    with pytest.raises(ConfigurationError, match="separators"):
        Datastore(np.array([1, -4, -1]))
    with pytest.raises(ConfigurationError, match="end with a separator"):
        Datastore(np.array([1, 2]))


def test_a_corpus_round_trips_through_its_directory(tmp_path):
    store = Datastore.of([[1, 2, 3, 1, 2, 4], [2, 3]])
    corpus = Corpus(CorpusConfig("fingerprint", store.documents, store.tokens, "test"), store, {(2, 1, 5, 1): 0.7}, 0.3)
    corpus.save(tmp_path)
    again = Corpus.find(str(tmp_path), "fingerprint", tmp_path / "none")
    assert again.config == corpus.config and again.priors == corpus.priors and again.overall == 0.3
    assert again.store.text.tolist() == store.text.tolist()
    with pytest.raises(ConfigurationError, match="not this target"):
        Corpus.find(str(tmp_path), "another", tmp_path / "none")
    with pytest.raises(ConfigurationError, match="specmix train corpus"):
        Corpus.find(None, "fingerprint", tmp_path / "none")


def test_node_keys_separate_match_lengths_depths_shares_and_support():
    assert node_key(1, 1, 1, 1) == (1, 1, 5, 0)
    assert node_key(5, 2, 3, 10) == (4, 2, 1, 2)
    assert node_key(20, 7, 100, 100) == (16, 3, 5, 3)


def _ctx(tokens, vocab=10, max_depth=8):
    return StepContext(step=0, tokens=torch.tensor(tokens), settings=DecodeSettings(), vocab_size=vocab,
                       max_depth=max_depth)


class _Target:
    vocab_size = 10
    fingerprint = "tiny"


@pytest.fixture
def drafter_over(tmp_path):
    """A corpus drafter attached to a tiny target, over a corpus of ``texts`` with ``priors``, saved and loaded."""

    def make(texts, priors=None, **options):
        store = Datastore.of(texts)
        directory = tmp_path / f"corpus-{len(list(tmp_path.iterdir()))}"
        Corpus(CorpusConfig("tiny", store.documents, store.tokens), store, priors or {}, 0.5).save(directory)
        drafter = CorpusDrafter(corpus=str(directory), **options)
        drafter.attach(_Target())
        return drafter

    return make


def test_proposes_what_followed_the_longest_match_scored_by_its_odds(drafter_over):
    drafter = drafter_over([[1, 2, 3, 4], [9, 2, 3, 5], [2, 3, 4]], priors={node_key(2, 1, 2, 3): 0.8})
    drafter.start(torch.tensor([7, 2, 3]), {})
    tree = drafter.propose(_ctx([7, 2, 3]))
    assert tree.tree.token_list[:3] == (3, 4, 5)  # after "2 3": 4 twice, 5 once
    assert float(tree.tree.logprobs[1].exp()) == pytest.approx(0.8)
    assert float(tree.tree.logprobs[2].exp()) == pytest.approx(0.5)  # a key with no prior of its own
    drafter.start(torch.tensor([8]), {})
    assert drafter.propose(_ctx([8])).tree.size == 1  # 8 never occurs


def test_learns_from_the_verified_nodes_it_proposed_whose_parent_was_reached(drafter_over):
    drafter = drafter_over([[1, 2, 3], [1, 2, 4]])
    drafter.start(torch.tensor([1]), {})
    proposed = drafter.propose(_ctx([1])).tree  # 1 -> 2 -> {3, 4}
    first, deeper = drafter.keys[(2,)], drafter.keys[(2, 3)]
    # The verifier kept node 2 and node 3 (not 4), took 2 and refused 3.
    verified = TokenTree(tokens=[1, 2, 3], parents=[-1, 0, 1], vocab_size=10)
    assert proposed.token_list[1] == 2
    drafter.observe(Verdict(tree=verified, path=(1,), bonus=6, logits=torch.zeros(3, 10)), None)
    assert drafter.odds.evidence(first) == pytest.approx((1, 1))
    assert drafter.odds.evidence(deeper)[1] == pytest.approx(1) and drafter.odds.evidence(deeper)[0] == 0
    assert drafter.tokens == [1, 2, 6]


def test_stays_within_the_room_left(drafter_over):
    drafter = drafter_over([[1, 2, 3, 4, 5]])
    drafter.start(torch.tensor([1]), {})
    assert max(drafter.propose(_ctx([1], max_depth=2)).tree.depth_list) == 2
    assert drafter.propose(_ctx([1], max_depth=0)).tree.size == 1


def test_the_recipe_puts_the_template_opening_before_each_response():
    responses = [((4, 5, 1, 2), 4), ((6, 1, 2), 3)]  # both prompts end with 1, 2
    assert shared_ending([ids[:start] for ids, start in responses]) == 2
    texts, opening = documents([((4, 5, 1, 2, 8, 9), 4), ((6, 1, 2, 7), 3)])
    assert texts == [(1, 2, 8, 9), (1, 2, 7)] and opening == 2


def test_held_out_rates_count_candidates_whose_parent_the_text_reaches():
    store = Datastore.of([[1, 2, 3], [1, 2, 3], [1, 2, 4]])
    counts = taken_counts(store, [[1, 2, 3]], [1], longest=4, nodes=8, depth=2)
    # Position 1 (after "1"): 2 taken, then 3 taken and 4 refused below it. Position 2 (after "1 2"): 3 taken, 4 not.
    assert sum(c[1] for c in counts.values()) == 5 and sum(c[0] for c in counts.values()) == 3
    priors, overall = rates(counts)
    assert overall == pytest.approx(4 / 7)
    assert all(0 < rate < 1 for rate in priors.values())


def test_held_out_texts_are_spread_over_the_whole_set():
    kept, held = split_held_out(list(range(10)), 3)
    assert held == [0, 3, 6] and kept == [1, 2, 4, 5, 7, 8, 9]
    assert split_held_out([1, 2], 5) == ([], [1, 2])


def test_wide_ranges_are_grouped_as_narrow_ones_are():
    texts = [[1, 2, 3 + index % 5, 9] for index in range(300)]  # "1 2" followed 300 times, by five tokens
    store = Datastore.of(texts)
    match = store.longest_match([7, 1, 2], longest=3)
    assert match.count == 300
    found = store.continuations(match, nodes=10, depth=2)
    assert sorted(zip(found.tokens[1:6], found.counts[1:6])) == [(3 + k, 60) for k in range(5)]
    assert found.tokens[6:] == (9,) * 5 and found.counts[6:] == (60,) * 5  # each followed by 9
