import pytest
import torch

from specmix import ConfigurationError, DecodeSettings, MalformedTreeError, Marginals, Riders, TokenTree, Verdict


def test_marginals_must_be_sorted_distinct_and_in_vocabulary():
    ok = Marginals(ids=torch.tensor([[3, 1]]), logprobs=torch.tensor([[-0.1, -2.0]]), vocab_size=8)
    assert ok.depth == 1
    with pytest.raises(MalformedTreeError, match="sorted"):
        Marginals(ids=torch.tensor([[3, 1]]), logprobs=torch.tensor([[-2.0, -0.1]]), vocab_size=8)
    with pytest.raises(MalformedTreeError, match="distinct"):
        Marginals(ids=torch.tensor([[3, 3]]), logprobs=torch.tensor([[-1.0, -2.0]]), vocab_size=8)
    with pytest.raises(MalformedTreeError, match="vocabulary"):
        Marginals(ids=torch.tensor([[9]]), logprobs=torch.tensor([[-1.0]]), vocab_size=8)
    with pytest.raises(MalformedTreeError, match="one shape"):
        Marginals(ids=torch.tensor([[1, 2]]), logprobs=torch.tensor([[-1.0]]), vocab_size=8)


def test_riders_need_consistent_shapes_and_self_visibility():
    Riders(tokens=torch.tensor([4, 5]), offsets=torch.tensor([1, 2]), visible=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(MalformedTreeError, match="see itself"):
        Riders(tokens=torch.tensor([4]), offsets=torch.tensor([1]), visible=torch.tensor([[True, False]]))
    with pytest.raises(MalformedTreeError, match="offsets start at 1"):
        Riders(tokens=torch.tensor([4]), offsets=torch.tensor([0]), visible=torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(MalformedTreeError, match="visible"):
        Riders(tokens=torch.tensor([4]), offsets=torch.tensor([1]), visible=torch.ones(1, 1, dtype=torch.bool))


def test_verdict_path_must_be_a_root_path():
    tree = TokenTree.from_paths(0, [[1, 2], [3]], vocab_size=8)
    logits = torch.zeros(tree.size, 8)
    assert Verdict(tree=tree, path=(1, 2), bonus=5, logits=logits).committed == (1, 2, 5)
    with pytest.raises(MalformedTreeError, match="root path"):
        Verdict(tree=tree, path=(2,), bonus=5, logits=logits)
    with pytest.raises(MalformedTreeError, match="root path"):
        Verdict(tree=tree, path=(1, 3), bonus=5, logits=logits)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(max_new_tokens=-3), "max_new_tokens"),
        (dict(temperature=-0.5), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        DecodeSettings(**kwargs)
