"""The ``diffusion`` drafter: one block-diffusion pass per step, conditioned on the target's hidden states."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specmix import Capability, ConfigurationError, Drafter, Marginals, Proposal, StepContext, Target, Verdict
from specmix.kernels.row_kernels import active
from specmix.plugins.diffusion import formats
from specmix.plugins.diffusion.dflash_net import DFlashNet
from specmix.plugins.diffusion.network import BlockDrafter, DrafterConfig, head_over, tapped_layers
from specmix.plugins.trained import weights_dir
from specmix.sizing.odds import ContinuationOdds
from specmix.values import HiddenStates

TRAIN_HINT = "train one with `specmix train diffusion --target MODEL --out DIR` and pass -o drafter.weights=DIR"
SHIPPED = Path(__file__).parent / "weights"
DEFAULT_ARCH = formats.SPECMIX
"""Which of the drafters shipped for a target loads when none is asked for: the one with the higher held-out τ."""
VOCAB_FILE = "vocab.json"
"""Beside a drafter's weights: the token ids of its training responses, most frequent first."""
ARCHS = (formats.SPECMIX, formats.DFLASH, formats.DFLASH2)


class DiffusionDrafter(Drafter):
    """DFlash-style drafting: a few layers read fused features of tapped target layers.

    Options:

    - ``weights``: a drafter directory, specmix's format or a DFlash / DFlash 2 checkpoint
      (see :mod:`specmix.plugins.diffusion.formats`), or a Hugging Face repo id of one;
      default: the drafter shipped for this target, if any.
    - ``arch``: ``specmix``, ``dflash`` or ``dflash2``: the kind of drafter to load (a
      checkpoint of another kind is refused; a DFlash 2 checkpoint serves as ``dflash``
      too), which shipped one, and what ``random_layers`` builds. Default: any.
    - ``top_k`` ids per position in the marginals (8; a DFlash 2 drafter gives its
      selector's top-K with the transition scores between consecutive positions);
      ``block_size`` (the trained one, or smaller); ``vocab`` (8192; see below).
    - ``draft_after_prompt``: whether to draft on the first step, from the prompt's last
      token. DFlash's own loop does not (its first token comes from the prompt's forward
      alone), so by default DFlash checkpoints do not, and specmix's, trained for it, do.
    - ``random_layers``: build an untrained drafter of that many layers instead
      (losslessness never depends on the drafter, so tests use it); ``seed`` for it.
    - ``adaptive_block``: draft only as many positions as have recently been worth it
      (each accepted, once reached, at least ``min_gain`` of the time, with some optimism
      so that positions are retried), and skip the pass when not even the first is.

    The LM head over the block is most of a drafting pass's cost (15 positions × the whole
    vocabulary). When the weights directory lists its training responses' tokens
    (``vocab.json``), the drafter drafts over at most the ``vocab`` most frequent of them
    (None: the whole vocabulary). The draft only steers what is verified, so output is
    unchanged; a token outside the list is simply never proposed.
    """

    produces = frozenset({Capability.MARGINALS, Capability.FEATURES})
    consumes = frozenset({Capability.HIDDEN_STATES})
    test_options = {"random_layers": 1}

    context: list[tuple[torch.Tensor, torch.Tensor]]
    pending: list[torch.Tensor]
    drafted: torch.Tensor | None

    def __init__(self, weights: str | None = None, arch: str | None = None, top_k: int = 8, block_size: int | None = None,
                 vocab: int | None = 8192, draft_after_prompt: bool | None = None, random_layers: int | None = None,
                 seed: int = 0, adaptive_block: bool = False, min_gain: float = 0.05) -> None:
        if top_k < 1 or (block_size is not None and block_size < 2) or (vocab is not None and vocab < 1):
            raise ConfigurationError("top_k and vocab must be >= 1 and block_size >= 2")
        if arch is not None and arch not in ARCHS:
            raise ConfigurationError(f"arch must be one of {', '.join(ARCHS)}, not {arch!r}")
        self.weights, self.arch, self.top_k, self.block_size, self.vocab = weights, arch, top_k, block_size, vocab
        self.draft_after_prompt, self.random_layers, self.seed = draft_after_prompt, random_layers, seed
        self.reach = ContinuationOdds(prior=0.5, explore=1.0, memory=64) if adaptive_block else None
        self.min_gain = min_gain

    def attach(self, target: Target) -> None:
        model = target.model
        directory = None
        if self.random_layers:
            self.net = self._random(target)
        else:
            directory = self._directory(target)
            self.net = self._load(directory, target)
        self.net = self.net.to(device=target.device, dtype=target.dtype).eval().requires_grad_(False)
        self.embed, self.head = model.get_input_embeddings(), model.get_output_embeddings()
        self.draft_ids, self.draft_head = None, self.head
        listed = None if directory is None or self.vocab is None else directory / VOCAB_FILE
        if listed is not None and listed.exists():
            self.draft_ids = torch.tensor(json.loads(listed.read_text())[: self.vocab], device=target.device)
            self.draft_head = head_over(self.head, self.draft_ids)
        # Its own layers, the draft head included, take the faster matrix kernels as the target's do: a drafting pass
        # over a short block is as weight-bound as a target forward over a few tokens.
        self.kernels = target.kernels_for(torch.nn.ModuleList([self.net, self.draft_head]))
        self.hidden_layers = self.net.taps
        self.block = min(self.block_size or self.net.block_size, self.net.block_size)
        dflash = isinstance(self.net, DFlashNet)
        self.after_prompt = not dflash if self.draft_after_prompt is None else self.draft_after_prompt
        self.selector = self.net.candidate_selector if isinstance(self.net, DFlashNet) and self.net.second_version else None
        self.width = self.top_k if self.selector is None else self.selector.top_k

    def _random(self, target: Target) -> BlockDrafter | DFlashNet:
        model, layers = target.model, self.random_layers
        assert layers is not None  # attach builds a random drafter only when random_layers is set
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            if self.arch in (formats.DFLASH, formats.DFLASH2):
                second = dict(conv_kernel_size=3, conv_group_size=model.config.hidden_size // 4, selector_rank=4,
                              selector_top_k=4) if self.arch == formats.DFLASH2 else {}
                net = DFlashNet.for_target(model, layers, tapped_layers(target.num_layers, layers), block_size=16,
                                           mask_token_id=target.vocab_size - 1, **second)
                net.reset_parameters(std=0.3)
                return net
            config = DrafterConfig.for_target(model, layers, intermediate_size=2 * model.config.hidden_size)
            return BlockDrafter(config)

    def _directory(self, target: Target) -> Path:
        if self.weights:
            return formats.resolve(self.weights)
        wanted = self.arch or DEFAULT_ARCH
        directory = formats.shipped(SHIPPED, target.fingerprint, wanted)
        if directory is None:
            kind = "" if wanted == formats.SPECMIX else f"{wanted} "
            raise ConfigurationError(f"no trained {kind}diffusion drafter ships for this target ({target.fingerprint}); "
                                     f"{TRAIN_HINT}")
        return directory

    def _load(self, directory: Path, target: Target) -> BlockDrafter | DFlashNet:
        kind = formats.detect(directory)
        if self.arch is not None and kind != self.arch and (self.arch, kind) != (formats.DFLASH, formats.DFLASH2):
            raise ConfigurationError(f"the drafter in {directory} is a {kind} drafter; arch {self.arch} needs a "
                                     f"{self.arch} one")
        if kind != formats.SPECMIX:
            return formats.load_dflash(directory, target)
        _, config = weights_dir.find(DrafterConfig, target.fingerprint, chosen=str(directory), shipped=SHIPPED,
                                     what="drafter", hint=TRAIN_HINT)
        return weights_dir.load_weights(BlockDrafter(config), directory)

    def catch_up(self) -> None:
        """Bring the context up to the committed tokens: the hidden states kept since the last pass, in one batch.

        A drafter that drafts nothing for some steps (the first, or where its adaptive block finds nothing worth
        drafting) would otherwise pay a small fusion and key-value pass after each of them; one pass over all the
        rows costs about what one row does.
        """
        if not self.pending:
            return
        tapped = torch.cat(self.pending)
        self.pending = []
        with active(self.kernels):
            features = self.net.features(tapped)
            positions = torch.arange(self.length, self.length + features.shape[0], device=features.device)
            injected = self.net.context(features, positions)
        for index, (keys, values) in enumerate(injected):
            old_keys, old_values = self.context[index]
            self.context[index] = (torch.cat([old_keys, keys], dim=-2), torch.cat([old_values, values], dim=-2))
        self.length += features.shape[0]

    def _keep(self, hidden: HiddenStates) -> None:
        self.pending.append(torch.cat([hidden[layer] for layer in self.hidden_layers], dim=-1))

    @torch.no_grad()
    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        self.context, self.length = self.net.empty_context(self.head.weight.device, self.head.weight.dtype), 0
        self.pending, self.drafted = [], None
        if self.reach is not None:
            self.reach.reset()
        self._keep(hidden)

    def _worth(self, size: int) -> int:
        """The block size worth drafting: positions kept while the chance of reaching them stays above ``min_gain``."""
        assert self.reach is not None  # propose asks only with adaptive_block on
        chance, kept = 1.0, 1
        while kept < size:
            chance *= self.reach.probability(kept - 1)  # position kept - 1 of the block's drafted ones
            if chance < self.min_gain:
                break
            kept += 1
        return kept

    def _nothing(self, ctx: StepContext) -> Proposal:
        width = self.width
        return Proposal(marginals=Marginals(ids=torch.zeros(0, width, dtype=torch.long),
                                            logprobs=torch.zeros(0, width, dtype=torch.float64), vocab_size=ctx.vocab_size),
                        features=torch.zeros(0, self.head.weight.shape[1], dtype=self.head.weight.dtype))

    @torch.no_grad()
    def propose(self, ctx: StepContext) -> Proposal:
        # The block runs one position past what the output has room to accept, as the DFlash authors' does:
        # a shorter block of masks would draft other tokens. The extra position is drafted, not proposed.
        size = min(self.block, ctx.max_depth + 2)
        if self.reach is not None:
            size = self._worth(size)
            if size < 2:
                self.reach.fade()
        self.drafted = None
        if size < 2 or ctx.max_depth == 0 or (ctx.step == 0 and not self.after_prompt):  # no room, no gain, not yet
            return self._nothing(ctx)
        self.catch_up()
        first = ctx.tokens[-1:].to(self.head.weight.device)
        block = self.net.block_inputs(self.embed, first, size)
        positions = torch.arange(self.length, self.length + size, device=block.device)
        with active(self.kernels):
            hidden = self.net(block, positions, self.context)[1 : 1 + ctx.max_depth]
            logits = self.net.logits(hidden, self.draft_head)
        logprobs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        top = logprobs.topk(min(self.width, logprobs.shape[-1]), dim=-1)
        ids = top.indices if self.draft_ids is None else self.draft_ids[top.indices]
        transitions = None if self.selector is None else self.selector.transitions(hidden, first, ids).double().cpu()
        self.drafted = ids.cpu()
        return Proposal(marginals=Marginals(ids=ids.cpu(), logprobs=top.values.double().cpu(), vocab_size=ctx.vocab_size,
                                            transitions=transitions), features=hidden)

    @torch.no_grad()
    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        self._keep(verdict.hidden)
        if self.reach is not None and self.drafted is not None:  # None too when a mix had this step go without it
            self._learn_reach(verdict.tokens)
        self.drafted = None

    def _learn_reach(self, accepted: tuple[int, ...]) -> None:
        """Per drafted position, whether the target went on through one of its candidates, given it got there."""
        assert self.drafted is not None and self.reach is not None  # observe asks only with both
        for position in range(self.drafted.shape[0]):
            hit = position < len(accepted) and accepted[position] in self.drafted[position].tolist()
            self.reach.count(position, hit)
            if not hit:
                break
