import attrs
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specmix import DecodeSettings, Marginals, PluginError, Proposal, StepContext, TokenTree
from specmix.plugins.taps.pool_builder import PoolBuilder
from specmix.plugins.taps.scorer import Scorer, ScorerConfig, differentiable_log_reach, edge_inputs, log_reach
from specmix.plugins.taps.training.traces import ancestors, trace, trace_loss, train_scorer
from specmix.testing import tiny_model
from specmix.testing.properties import make_decoder

VOCAB = 12


@st.composite
def marginals(draw):
    depth, width = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    ids, logprobs = [], []
    for _ in range(depth):
        ids.append(draw(st.permutations(range(VOCAB)))[:width])
        logprobs.append(sorted(draw(st.lists(st.floats(-6, 0), min_size=width, max_size=width, unique=True)), reverse=True))
    return Marginals(ids=torch.tensor(ids), logprobs=torch.tensor(logprobs, dtype=torch.float64), vocab_size=VOCAB)


def _ctx(max_depth=10):
    return StepContext(step=0, tokens=torch.tensor([0]), settings=DecodeSettings(), vocab_size=VOCAB, max_depth=max_depth)


@given(marginals(), st.integers(1, 4), st.integers(1, 6), st.integers(0, 30))
def test_the_pool_keeps_the_best_extensions_at_every_depth(m, top_k, beam, nodes):
    tree = PoolBuilder(top_k=top_k, beam=beam, nodes=nodes).build(Proposal(marginals=m), _ctx())
    assert tree.size - 1 <= nodes
    cumulative = tree.cumulative_logprobs().tolist()
    for depth in range(1, tree.max_depth + 1):
        level = [i for i in range(tree.size) if tree.depth_list[i] == depth]
        assert len(level) <= beam
        parents = [i for i in range(tree.size) if tree.depth_list[i] == depth - 1]
        width = min(top_k, m.ids.shape[1])
        # Every extension of this depth's parents left out scores no better than the worst kept one.
        kept = {(tree.parent_list[i], tree.token_list[i]) for i in level}
        worst = min(cumulative[i] for i in level)
        for parent in parents:
            for rank in range(width):
                if (parent, int(m.ids[depth - 1, rank])) not in kept and len(level) == beam:
                    assert cumulative[parent] + float(m.logprobs[depth - 1, rank]) <= worst + 1e-9
        for i in level:
            assert tree.token_list[i] in m.ids[depth - 1, :width].tolist()


def test_the_pool_stops_at_the_room_left():
    m = Marginals(ids=torch.tensor([[1, 2], [3, 4], [5, 6]]), logprobs=torch.log(torch.tensor([[0.6, 0.4]] * 3)).double(),
                  vocab_size=VOCAB)
    assert PoolBuilder(beam=4).build(Proposal(marginals=m), _ctx(max_depth=2)).max_depth == 2
    nothing = Marginals(ids=torch.zeros(0, 2, dtype=torch.long), logprobs=torch.zeros(0, 2, dtype=torch.float64),
                        vocab_size=VOCAB)
    assert PoolBuilder().build(Proposal(marginals=nothing), _ctx()).size == 1


def _scored_tree(seed):
    generator = torch.Generator().manual_seed(seed)
    m = Marginals(ids=torch.stack([torch.randperm(VOCAB, generator=generator)[:3] for _ in range(4)]),
                  logprobs=torch.tensor([[-0.3, -1.5, -2.5]] * 4, dtype=torch.float64), vocab_size=VOCAB)
    proposal = Proposal(marginals=m, features=torch.randn(4, 8, generator=generator))
    tree = PoolBuilder(top_k=3, beam=4).build(proposal, _ctx())
    return tree, proposal


def test_scorer_conditionals_sum_to_one_per_parent_and_reach_falls_down_paths():
    torch.manual_seed(0)
    tree, proposal = _scored_tree(0)
    scorer = Scorer(ScorerConfig(embed_dim=6, feature_dim=8))
    embedding = torch.nn.Embedding(VOCAB, 6)
    with torch.no_grad():
        child, other = scorer.conditional_logprobs(edge_inputs(tree, proposal), embedding)
    for parent in range(tree.size):
        if tree.children[parent]:
            total = other[parent].exp() + sum(child[c].exp() for c in tree.children[parent])
            assert abs(float(total) - 1) < 1e-5
    reach = log_reach(child, tree.parents)
    assert all(reach[c] <= reach[tree.parent_list[c]] for c in range(1, tree.size))
    assert torch.allclose(differentiable_log_reach(child.double(), ancestors(tree.parents).double()), reach)


def test_a_scorer_learns_which_children_the_target_continues_with():
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(VOCAB, 6)
    traces = []
    for seed in range(24):
        tree, proposal = _scored_tree(seed)
        logits = torch.full((tree.size, VOCAB), -5.0)
        logits[:, 7] = 5.0  # the target always continues with token 7
        traces.append(trace(tree, proposal, logits))
    scorer = Scorer(ScorerConfig(embed_dim=6, feature_dim=8))
    losses = train_scorer(scorer, embedding, traces, "argmax", epochs=30, batch=4)
    assert sum(losses[-6:]) / 6 < 0.5 * sum(losses[:6]) / 6
    with torch.no_grad():
        first = trace_loss(Scorer(ScorerConfig(embed_dim=6, feature_dim=8)), embedding, traces[0], "probs")
        assert torch.isfinite(first)
        tree, proposal = _scored_tree(99)
        child, _ = scorer.conditional_logprobs(edge_inputs(tree, proposal), embedding)
    sevens = [c for c in range(1, tree.size) if tree.token_list[c] == 7]
    others = [c for c in range(1, tree.size) if tree.token_list[c] != 7]
    assert sevens and min(child[c] for c in sevens) > max(child[c] for c in others)


def test_a_scorer_trained_for_another_target_is_refused_by_name(registry, tmp_path):
    names = dict(drafter="diffusion", builder="pool", selector="learned", verifier="tree")
    trained = Scorer(ScorerConfig(embed_dim=32, drafter="diffusion", target="llama-somewhere-else"))
    trained.save(tmp_path / "scorer")
    with pytest.raises(PluginError, match="trained for llama-somewhere-else.*specmix train scorer"):
        make_decoder(registry, names, tiny_model("llama"), seed=0,
                     options={"selector": {"random_init": False, "weights": str(tmp_path / "scorer")}})
    with pytest.raises(PluginError, match="no trained scorer ships for this target.*specmix train scorer"):
        make_decoder(registry, names, tiny_model("llama"), seed=0, options={"selector": {"random_init": False}})


def test_the_learned_selector_shrinks_the_tree_when_the_scorer_doubts_it(registry):
    decoder = make_decoder(registry, dict(drafter="diffusion", builder="pool", selector="learned", verifier="tree"),
                           tiny_model("llama"), seed=0)
    selector = decoder.composition.selector.component
    tree, proposal = _scored_tree(0)
    proposal = attrs.evolve(proposal, features=None)
    tree = TokenTree(tokens=tree.tokens, parents=tree.parents, vocab_size=decoder.target.vocab_size,
                     logprobs=tree.logprobs)
    ctx = StepContext(step=0, tokens=torch.tensor([0]), settings=DecodeSettings(), vocab_size=decoder.target.vocab_size,
                      max_depth=10, cost=decoder.cost_curve)
    confident, doubtful = selector.scorer, None
    with torch.no_grad():
        selector.reach(tree, proposal)  # builds the untrained scorer
        confident = selector.scorer
        for module in confident.other:
            if isinstance(module, torch.nn.Linear):
                module.weight.zero_()
                module.bias.zero_()
        confident.other[-1].bias.fill_(-20.0)  # never "other": the target always continues inside the tree
        big = selector.select(tree, proposal, ctx).size
        confident.other[-1].bias.fill_(20.0)  # always "other": no child is worth a slot
        doubtful = selector.select(tree, proposal, ctx).size
    assert doubtful == 1 < big
