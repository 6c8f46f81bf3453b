"""The ``diffusion`` drafter: one block-diffusion pass per step, conditioned on the target's hidden states."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specmix import Capability, ConfigurationError, Drafter, Marginals, Proposal
from specmix.plugins.diffusion.network import BlockDrafter, DrafterConfig, head_over
from specmix.plugins.trained import weights_dir

TRAIN_HINT = "train one with `specmix train diffusion --target MODEL --out DIR` and pass -o drafter.weights=DIR"
SHIPPED = Path(__file__).parent / "weights"
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

    produces = frozenset({Capability.MARGINALS, Capability.FEATURES})
    consumes = frozenset({Capability.HIDDEN_STATES})
    test_options = {"random_layers": 1}

    def __init__(self, weights: str | None = None, top_k: int = 8, block_size: int | None = None,
                 vocab: int | None = 8192, random_layers: int | None = None, seed: int = 0):
        if top_k < 1 or (block_size is not None and block_size < 2) or (vocab is not None and vocab < 1):
            raise ConfigurationError("top_k and vocab must be >= 1 and block_size >= 2")
        self.weights, self.top_k, self.block_size, self.vocab = weights, top_k, block_size, vocab
        self.random_layers, self.seed = random_layers, seed

    def attach(self, target):
        model = target.model
        if self.random_layers:
            config = DrafterConfig.for_target(model, self.random_layers, intermediate_size=2 * model.config.hidden_size)
            with torch.random.fork_rng():
                torch.manual_seed(self.seed)
                self.net = BlockDrafter(config)
        else:
            directory, config = weights_dir.find(DrafterConfig, target.fingerprint, chosen=self.weights, shipped=SHIPPED,
                                                 what="diffusion drafter", hint=TRAIN_HINT)
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
        if size < 2:  # no room left to draft
            width = self.net.config.hidden_size
            return Proposal(marginals=Marginals(ids=torch.zeros(0, self.top_k, dtype=torch.long),
                                                logprobs=torch.zeros(0, self.top_k, dtype=torch.float64),
                                                vocab_size=ctx.vocab_size),
                            features=torch.zeros(0, width, dtype=self.head.weight.dtype))
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

