import itertools

import torch
from hypothesis import given
from hypothesis import strategies as st

from specmix import DecodeSettings, Marginals, Proposal, StepContext
from specmix.plugins.basic.best_first_builder import BestFirstBuilder


@st.composite
def marginals(draw):
    depth, width, vocab = draw(st.integers(1, 4)), draw(st.integers(1, 3)), 12
    ids, logprobs = [], []
    for _ in range(depth):
        ids.append(draw(st.permutations(range(vocab)))[:width])
        logprobs.append(sorted(draw(st.lists(st.floats(-6, 0), min_size=width, max_size=width, unique=True)), reverse=True))
    return Marginals(ids=torch.tensor(ids), logprobs=torch.tensor(logprobs, dtype=torch.float64), vocab_size=vocab)


@given(marginals(), st.integers(0, 20))
def test_keeps_the_most_probable_prefix_closed_set(m, budget):
    ctx = StepContext(step=0, tokens=torch.tensor([0]), settings=DecodeSettings(), vocab_size=12, max_depth=10)
    tree = BestFirstBuilder(nodes=budget).build(Proposal(marginals=m), ctx)
    # Brute force: every rank tuple, scored by its path; the kept set must be a top-`budget` one.
    lp = m.logprobs.tolist()
    scores = sorted(
        (sum(lp[d][r] for d, r in enumerate(ranks)) for depth in range(1, m.depth + 1)
         for ranks in itertools.product(range(m.ids.shape[1]), repeat=depth)),
        reverse=True,
    )
    kept = [] if tree.size == 1 else sorted(tree.cumulative_logprobs()[1:].tolist(), reverse=True)
    assert len(kept) == min(budget, len(scores))
    assert all(abs(a - b) < 1e-9 for a, b in zip(kept, scores))
    for node in range(1, tree.size):  # each node's token is its rank's token at its depth
        depth = tree.depth_list[node]
        assert tree.token_list[node] in m.ids[depth - 1].tolist()
