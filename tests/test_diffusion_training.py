import pytest
import torch

from specmix.plugins.diffusion.network import BlockDrafter, DrafterConfig, head_over, tapped_layers
from specmix.plugins.diffusion.training.loss import Example, TrainSettings, block_loss, frequent_tokens, learning_rate, train
from specmix.plugins.diffusion.training.start import start_from_target
from specmix.settings import DecodeSettings
from specmix.target import fingerprint
from specmix.testing import reference_greedy, tiny_model


def _examples(model, count=6):
    generator = torch.Generator().manual_seed(0)
    examples = []
    for _ in range(count):
        prompt = torch.randint(2, 32, (6,), generator=generator).tolist()
        response = reference_greedy(model, prompt, DecodeSettings(max_new_tokens=30, stop_ids=()))
        examples.append(Example(ids=tuple(prompt + response), response_start=len(prompt)))
    return examples


def _net(model):
    config = DrafterConfig(hidden_size=16, num_layers=1, num_heads=2, head_dim=8, intermediate_size=32,
                           taps=tapped_layers(2, 1), block_size=4, target=fingerprint(model))
    torch.manual_seed(0)
    return BlockDrafter(config).to(torch.float64)


def test_training_on_a_tiny_target_lowers_the_loss():
    model = tiny_model("llama")
    losses = train(_net(model), model, _examples(model), TrainSettings(steps=120, lr=3e-3, anchors=4, gamma=2.0))
    assert sum(losses[-20:]) / 20 < 0.8 * sum(losses[:20]) / 20


def test_an_interrupted_training_resumes_where_its_checkpoint_left_off(tmp_path):
    model = tiny_model("llama")
    examples = _examples(model, count=3)
    settings = TrainSettings(steps=40, lr=3e-3, anchors=4, gamma=2.0, checkpoint_every=10)
    whole = _net(model)
    expected = train(whole, model, examples, settings)

    def interrupt(step, loss):
        if step == 24:
            raise KeyboardInterrupt

    checkpoint = tmp_path / "state.pt"
    with pytest.raises(KeyboardInterrupt):
        train(_net(model), model, examples, settings, checkpoint, progress=interrupt)
    assert torch.load(checkpoint, weights_only=False)["step"] == 20
    resumed = _net(model)
    assert train(resumed, model, examples, settings, checkpoint) == pytest.approx(expected)
    for name, tensor in resumed.state_dict().items():
        assert torch.allclose(tensor, whole.state_dict()[name])


def test_learning_rate_warms_up_then_decays():
    settings = TrainSettings(steps=100, lr=1.0, warmup=0.1)
    rates = [learning_rate(step, settings) for step in range(100)]
    assert rates[0] < rates[9] == 1.0 and rates[50] < 1.0 and rates[-1] < 0.01


def test_a_restricted_vocabulary_is_the_softmax_over_those_tokens_and_skips_other_targets():
    model = tiny_model("llama")
    example = _examples(model, count=1)[0]
    net, embed, head = _net(model), model.get_input_embeddings(), model.get_output_embeddings()
    ids = torch.tensor(example.ids)
    tapped = torch.cat([model(input_ids=ids[None], output_hidden_states=True).hidden_states[1][0]], dim=-1).detach()
    anchors = [example.response_start, example.response_start + 5]

    def loss(vocab):
        with torch.no_grad():
            restricted = head if vocab is None else head_over(head, vocab)
            return float(block_loss(net, embed, restricted, ids, tapped, anchors, 2.0, vocab))

    vocabulary = head.weight.shape[0]
    assert loss(torch.arange(vocabulary).flip(0)) == pytest.approx(loss(None))
    targets = {int(ids[a + k]) for a in anchors for k in range(1, 4)}
    assert loss(torch.tensor(sorted(targets))) < loss(None)  # the same targets against fewer competitors
    outsider = next(token for token in range(vocabulary) if token not in targets)
    assert loss(torch.tensor([outsider])) == 0.0  # every target outside the vocabulary is skipped


def test_frequent_tokens_are_counted_in_responses_only():
    examples = [Example(ids=(9, 9, 9, 1, 2, 2), response_start=3), Example(ids=(9, 2, 3, 3, 3, 3), response_start=1)]
    assert frequent_tokens(examples, 2).tolist() == [3, 2]


def test_a_drafter_started_from_the_target_reads_the_context_as_the_target_s_last_layer_does():
    model = tiny_model("llama")  # two query heads share one key/value head
    net = _net(model)
    assert start_from_target(net, model)
    with torch.no_grad():
        hidden = model(input_ids=torch.arange(2, 12)[None], output_hidden_states=True).hidden_states[net.config.taps[-1]][0]
        last = model.model.layers[-1]
        normed = last.input_layernorm(hidden)
        close = dict(atol=1e-5)  # the drafter's norms compute in float32
        assert torch.allclose(net.features(hidden), normed, **close)
        _, values = net.context(net.features(hidden), torch.arange(10))[0]
        theirs = last.self_attn.v_proj(normed).view(10, 1, 8).transpose(0, 1)
        assert torch.allclose(values, theirs.expand(2, -1, -1), **close)
    assert torch.equal(net.norm.weight, model.model.norm.weight)


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])  # projection biases; query/key norms
def test_a_target_whose_layers_differ_from_a_draft_layer_leaves_the_drafter_as_it_was(family):
    model = tiny_model(family)
    net = _net(model)
    before = {name: tensor.clone() for name, tensor in net.state_dict().items()}
    assert not start_from_target(net, model)
    assert all(torch.equal(before[name], tensor) for name, tensor in net.state_dict().items())
