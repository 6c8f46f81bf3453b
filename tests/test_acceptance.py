import collections

import pytest
import torch

from specmix import DecodeSettings, TokenTree
from specmix.acceptance import greedy_walk, rejection_walk, sample_walk
from specmix.testing.models import tiny_model
from specmix.testing.properties import chi_square_p_value, make_decoder

VOCAB = 6


def _one_level_tree(p, q, generator, children=3):
    """Root children drawn from q without replacement, as the draft_q contract says."""
    remaining, tokens = q.clone(), []
    for _ in range(children):
        token = int(torch.multinomial(remaining / remaining.sum(), 1, generator=generator))
        remaining[token] = 0
        tokens.append(token)
    draft_q = torch.stack([q] + [torch.full((VOCAB,), 1 / VOCAB, dtype=torch.float64)] * children)
    return TokenTree(tokens=[0, *tokens], parents=[-1] + [0] * children, vocab_size=VOCAB, draft_q=draft_q)


def _first_token_counts(walk, samples=20000):
    generator = torch.Generator().manual_seed(0)
    p = torch.tensor([0.05, 0.4, 0.1, 0.25, 0.15, 0.05], dtype=torch.float64)
    q = torch.tensor([0.3, 0.1, 0.3, 0.1, 0.1, 0.1], dtype=torch.float64)
    counts = collections.Counter()
    for _ in range(samples):
        tree = _one_level_tree(p, q, generator)
        path, bonus = walk(tree, lambda node: p, generator)
        counts[(tree.token_list[path[0]] if path else bonus,)] += 1
    return counts, {(t,): float(p[t]) for t in range(VOCAB)}, samples


def test_recursive_rejection_without_replacement_reproduces_p():
    counts, exact, samples = _first_token_counts(rejection_walk)
    assert chi_square_p_value(counts, exact, samples) > 1e-4


def test_recursive_rejection_that_forgets_to_remove_drawn_siblings_is_caught():
    def with_replacement_q(tree, probs_at, generator):
        # Treats every child as drawn from the full q: the classic mistake with distinct siblings.
        p, q = probs_at(0), tree.draft_q[0]
        for child in tree.children[0]:
            token = tree.token_list[child]
            if torch.rand((), generator=generator, dtype=p.dtype) * q[token] < p[token]:
                return [child], 0
            residual = (p - q).clamp_min(0)
            p = residual / residual.sum()
        return [], int(torch.multinomial(p, 1, generator=generator))

    counts, exact, samples = _first_token_counts(with_replacement_q)
    assert chi_square_p_value(counts, exact, samples) < 1e-6


def test_sample_walk_with_no_children_is_one_draw_from_p():
    tree = TokenTree.root_only(0, VOCAB)
    p = torch.tensor([0, 0, 1.0, 0, 0, 0], dtype=torch.float64)
    assert sample_walk(tree, lambda node: p, None) == ([], 2)


def test_greedy_walk_follows_argmax_and_stops_at_the_first_miss():
    tree = TokenTree.from_paths(0, [[1, 2, 3], [1, 4]], vocab_size=VOCAB)  # nodes: 1:1 2:2 3:3 4:4
    assert greedy_walk(tree, [1, 4, 5, 5, 5]) == ([1, 4], 5)
    assert greedy_walk(tree, [2, 0, 0, 0, 0]) == ([], 2)


@pytest.mark.parametrize("settings", [DecodeSettings(temperature=0.9), DecodeSettings(temperature=1.3, top_p=0.9)])
def test_sample_and_match_output_depends_only_on_the_seed(registry, settings):
    """Each emitted token is one fresh draw from the target, so drafts change speed, never the sample."""
    model = tiny_model("llama", scale=0.3)
    prompt, run = [3, 4, 5], DecodeSettings(max_new_tokens=25, temperature=settings.temperature,
                                           top_p=settings.top_p, stop_ids=(), seed=11)
    outputs = {}
    for drafter, builder in [("none", "drafted"), ("kit-random-tree", "drafted"), ("kit-random-marginals", "chain")]:
        decoder = make_decoder(registry, dict(drafter=drafter, builder=builder, selector="all", verifier="tree"),
                               model, seed=5)
        generation = decoder.generate(prompt, run)
        outputs[drafter] = (generation.tokens, generation.tau)
    assert len({tokens for tokens, _ in outputs.values()}) == 1, outputs
    assert outputs["kit-random-tree"][1] > 1
