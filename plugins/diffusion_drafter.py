"""The ``diffusion`` drafter: one block-diffusion pass per step, conditioned on the target's hidden states."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specmix import ConfigurationError, Drafter, Marginals, Method, Proposal, hookimpl
from specmix.plugins import weights_dir
from specmix.plugins.diffusion_model import BlockDrafter, DrafterConfig, head_over, tapped_layers

TRAIN_HINT = "train one with `specmix train diffusion --target MODEL --out DIR` and pass -o drafter.weights=DIR"
PACKAGED = Path(__file__).parent / "drafters"
VOCAB_FILE = "vocab.json"
"""Beside a drafter's weights: the token ids of its training responses, most frequent first."""


class DiffusionDrafter(Drafter):
    """DFlash-style drafting: a few layers read fused features of tapped target layers.

    Options: ``weights`` (a directory holding ``config.json`` and ``model.pt``; default:
    the drafter shipped for this target, if any), ``top_k`` ids per position in the
    marginals (8), ``block_size`` (the trained one, 16, or smaller), ``vocab`` (8192; see
    below), and ``random_layers`` to build an untrained drafter of that many layers
    instead — losslessness never depends on the drafter, so tests use it.

    The LM head over the block is most of a drafting pass's cost (15 positions × the whole
    vocabulary). When the weights directory lists its training responses' tokens
    (``vocab.json``), the drafter drafts over at most the ``vocab`` most frequent of them
    (None: the whole vocabulary). The draft only steers what is verified, so output is
    unchanged; a token outside the list is simply never proposed.
    """

    produces = frozenset({"marginals", "features"})
    consumes = frozenset({"hidden-states"})
    test_options = {"random_layers": 1}

    def __init__(self, weights: str | None = None, top_k: int = 8, block_size: int | None = None,
                 vocab: int | None = 8192, random_layers: int | None = None, seed: int = 0):
        if top_k < 1 or (block_size is not None and block_size < 2) or (vocab is not None and vocab < 1):
            raise ConfigurationError("top_k and vocab must be >= 1 and block_size >= 2")
        self.weights, self.top_k, self.block_size, self.vocab = weights, top_k, block_size, vocab
        self.random_layers, self.seed = random_layers, seed

    def attach(self, target):
        model = target.model
        fingerprint = target.fingerprint
        if self.random_layers:
            hidden = model.config.hidden_size
            head_dim = 64 if hidden % 64 == 0 else hidden
            config = DrafterConfig(hidden_size=hidden, num_layers=self.random_layers, num_heads=hidden // head_dim,
                                   head_dim=head_dim, intermediate_size=2 * hidden,
                                   taps=tapped_layers(target.num_layers, self.random_layers), target=fingerprint)
            with torch.random.fork_rng():
                torch.manual_seed(self.seed)
                self.net = BlockDrafter(config)
        else:
            directory = (Path(self.weights) if self.weights
                         else weights_dir.packaged(PACKAGED, DrafterConfig, target=fingerprint))
            if directory is None:
                raise ConfigurationError(f"no trained diffusion drafter ships for this target ({fingerprint}); {TRAIN_HINT}")
            config = weights_dir.config_for_target(DrafterConfig, directory, fingerprint, "drafter", TRAIN_HINT)
            self.net = weights_dir.load_weights(BlockDrafter(config), directory)
        self.net = self.net.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)
        self.embed, self.head = model.get_input_embeddings(), model.get_output_embeddings()
        self.draft_ids, self.draft_head = None, self.head
        listed = None if self.random_layers or self.vocab is None else directory / VOCAB_FILE
        if listed is not None and listed.exists():
            self.draft_ids = torch.tensor(json.loads(listed.read_text())[: self.vocab], device=target.device)
            self.draft_head = head_over(self.head, self.draft_ids)
        self.hidden_layers = config.taps
        self.block = min(self.block_size or config.block_size, config.block_size)

    def _append(self, hidden) -> None:
        features = self.net.features(torch.cat([hidden[layer] for layer in self.hidden_layers], dim=-1))
        positions = torch.arange(self.length, self.length + features.shape[0], device=features.device)
        for index, (keys, values) in enumerate(self.net.context(features, positions)):
            old_keys, old_values = self.context[index]
            self.context[index] = (torch.cat([old_keys, keys], dim=-2), torch.cat([old_values, values], dim=-2))
        self.length += features.shape[0]

    @torch.no_grad()
    def start(self, prompt, hidden):
        config, device, dtype = self.net.config, self.head.weight.device, self.head.weight.dtype
        empty = torch.zeros(config.num_heads, 0, config.head_dim, device=device, dtype=dtype)
        self.context, self.length = [(empty, empty) for _ in range(config.num_layers)], 0
        self._append(hidden)

    @torch.no_grad()
    def propose(self, ctx):
        size = min(self.block, ctx.max_depth + 1)
        if size < 2:
            return Proposal()
        block = self.net.block_inputs(self.embed(ctx.tokens[-1:].to(self.head.weight.device)), size)
        positions = torch.arange(self.length, self.length + size, device=block.device)
        hidden = self.net(block, positions, self.context)[1:]
        logprobs = torch.log_softmax(self.draft_head(hidden).float(), dim=-1)
        top = logprobs.topk(min(self.top_k, logprobs.shape[-1]), dim=-1)
        ids = top.indices if self.draft_ids is None else self.draft_ids[top.indices]
        return Proposal(marginals=Marginals(ids=ids.cpu(), logprobs=top.values.double().cpu(),
                                            vocab_size=ctx.vocab_size), features=hidden)

    @torch.no_grad()
    def observe(self, verdict, ctx):
        self._append(verdict.hidden)


@hookimpl
def register_drafters(register):
    register("diffusion", DiffusionDrafter)


@hookimpl
def register_methods(register):
    register(Method(
        name="dflash",
        drafter="diffusion",
        builder="chain",
        selector="all",
        verifier="tree",
        description="DFlash: a trained block-diffusion drafter proposes a block; its top-1 chain is verified whole.",
    ))
    register(Method(
        name="ddtree",
        drafter="diffusion",
        builder="best-first",
        selector="budget",
        verifier="tree",
        description="DDTree: a best-first tree over the diffusion drafter's marginals, sized by the cost curve.",
    ))
