import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specmix import MalformedTreeError, TokenTree
from strategies import token_trees


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tokens=[], parents=[]), "at least its root"),
        (dict(tokens=[1, 2], parents=[-1]), "parent indices"),
        (dict(tokens=[1, 2], parents=[0, 0]), "needs parent -1"),
        (dict(tokens=[1, 2, 3], parents=[-1, 2, 0]), "parents must come before"),
        (dict(tokens=[1, 2, 2], parents=[-1, 0, 0]), "siblings must be distinct"),
        (dict(tokens=[1, 99], parents=[-1, 0]), "outside the vocabulary"),
        (dict(tokens=[1, -1], parents=[-1, 0]), "outside the vocabulary"),
        (dict(tokens=[1, 2], parents=[-1, 0], logprobs=[0.0]), "logprobs has shape"),
        (dict(tokens=[1, 2], parents=[-1, 0], logprobs=[0.0, 0.5]), "<= 0"),
        (dict(tokens=[1, 2], parents=[-1, 0], draft_q=torch.ones(2, 3)), "draft_q has shape"),
    ],
)
def test_malformed_trees_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(MalformedTreeError, match=message):
        TokenTree(vocab_size=16, **kwargs)


def test_same_token_under_different_parents_is_fine():
    tree = TokenTree(tokens=[1, 2, 3, 2], parents=[-1, 0, 0, 2], vocab_size=16)
    assert tree.children == ((1, 2), (), (3,), ())
    assert tree.depth_list == (0, 1, 1, 2)


def test_from_paths_builds_a_trie_sharing_prefixes():
    tree = TokenTree.from_paths(5, [[1, 2, 3], [1, 2, 4], [7], []], vocab_size=16)
    assert tree.token_list == (5, 1, 2, 3, 4, 7)
    assert tree.parent_list == (-1, 0, 1, 2, 2, 0)
    assert [tree.token_list[i] for i in tree.path(4)] == [1, 2, 4]


@given(token_trees())
def test_ancestor_mask_matches_paths(tree):
    mask = tree.ancestor_mask()
    for node in range(tree.size):
        assert set(mask[node].nonzero().flatten().tolist()) == {0, *tree.path(node)}


@given(token_trees(), st.data())
def test_any_prefix_closed_subset_is_a_subtree_and_others_are_refused(tree, data):
    keep = {0}
    for node in range(1, tree.size):
        if tree.parent_list[node] in keep and data.draw(st.booleans()):
            keep.add(node)
    sub = tree.subtree(keep)
    assert sub.size == len(keep)
    assert sorted(sub.token_list) == sorted(tree.token_list[i] for i in keep)
    orphans = [node for node in range(1, tree.size) if node not in keep and tree.parent_list[node] not in keep]
    if orphans:
        with pytest.raises(MalformedTreeError, match="prefix-closed"):
            tree.subtree(keep | {orphans[0]})


@given(token_trees(), st.integers(0, 6))
def test_truncated_keeps_exactly_the_shallow_nodes(tree, depth):
    cut = tree.truncated(depth)
    assert cut.max_depth <= depth
    assert cut.size == sum(d <= depth for d in tree.depth_list)


def test_subtree_keeps_logprobs_and_drops_draft_q_unless_whole():
    tree = TokenTree(tokens=[0, 1, 2], parents=[-1, 0, 0], vocab_size=4, logprobs=[0, -1, -2],
                     draft_q=torch.full((3, 4), 0.25))
    assert tree.subtree([0, 1, 2]).draft_q is not None
    part = tree.subtree([0, 2])
    assert part.draft_q is None
    assert part.logprobs.tolist() == [0, -2]
    assert tree.cumulative_logprobs().tolist() == [0, -1, -2]


def test_subtree_must_keep_the_root():
    with pytest.raises(MalformedTreeError, match="root"):
        TokenTree.from_paths(0, [[1]], 4).subtree([1])
