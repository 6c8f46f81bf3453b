"""The decoding loop: prefill, then (propose → build → select → verify → commit → observe) per step."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import torch

from specmix import contract
from specmix.composition import Composition, Slot
from specmix.errors import ConfigurationError, DecoderBusyError
from specmix.interfaces import Drafter, TreeBuilder
from specmix.settings import DecodeSettings
from specmix.sizing.cost import CostCurve
from specmix.sizing.measure import cost_curve_for
from specmix.sizing.mixing import Drafters, drafting_policy
from specmix.step_timer import StepTimer
from specmix.target import Target
from specmix.text import Prompt, TextStream, encode
from specmix.tree import TokenTree
from specmix.values import Generation, Proposal, Step, StepContext, StepStats, Verdict

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class Decoder:
    """Lossless speculative decoding of one HF decoder model with one composition of plugins.

    Build one from a registry's composition (``Decoder(model, Registry.load().compose("ngram"))``)
    or let :func:`specmix.load` resolve names and load the model.

    A decoder runs one generation at a time: it owns the target's cache and its
    components' state. Starting a second ``generate`` or ``stream`` before the first has
    finished (from another thread, or by interleaving streams) raises
    :class:`DecoderBusyError`; build one decoder per thread (they may share the model).
    """

    def __init__(self, model: PreTrainedModel, composition: Composition, *, tokenizer: PreTrainedTokenizerBase | None = None,
                 cost_curve: CostCurve | None = None, static: bool | None = None, cache_dir: str | os.PathLike | None = None,
                 fast: bool | None = None):
        """``static``: bucketed forward sizes over a fixed-capacity cache, as CUDA graphs on CUDA (None: on CUDA only).
        ``cache_dir``: where measured cost curves are kept (default: ``$SPECMIX_CACHE_DIR`` or ``~/.cache/specmix``).
        ``fast``: the fast CPU paths (:mod:`specmix.kernels`), on specmix's own copy of a model it did not load, which
        it never changes; None: on for a model :func:`specmix.load` loaded, off for the caller's own."""
        self.target = Target(model, static, cache=cache_dir, fast=fast)
        self.tokenizer = tokenizer
        self.composition = composition
        self._cost_curve, self._cache_dir = cost_curve, cache_dir
        self._running = threading.Lock()
        for slot in composition.slots:
            with slot.blame("attach"):
                slot.component.attach(self.target)
        self.layers = tuple(sorted({layer for slot in composition.drafters for layer in slot.component.hidden_layers}))
        self.target.check_layers(self.layers)
        self._drafting = drafting_policy(len(composition.drafters),
                                         [slot.component.calibrated for slot in composition.drafters])

    @property
    def cost_curve(self) -> CostCurve:
        """This target's T(N) on this device, measured on first use and cached on disk."""
        if self._cost_curve is None:
            self._cost_curve = cost_curve_for(self.target, cache=self._cache_dir)
        return self._cost_curve

    def prepare(self) -> None:
        """Do the one-time work the composition needs (measuring the cost curve) before anything is timed."""
        if self.composition.needs_cost_curve:
            _ = self.cost_curve

    def generate(self, prompt: Prompt, settings: DecodeSettings | None = None, *, chat: bool | None = None) -> Generation:
        """Decode ``prompt`` (token ids, a string, or chat messages) to the end."""
        self.prepare()
        start = time.perf_counter()
        tokens: list[int] = []
        steps, chunks, reason = [], [], None
        for step in self.stream(prompt, settings, chat=chat):
            tokens.extend(step.tokens)
            steps.append(step.stats)
            chunks.append(step.text)
            reason = step.stop_reason
        text = "".join(chunks) if self.tokenizer is not None else None
        assert reason is not None, "a stream ends on the step that gives a reason to stop"
        return Generation(tuple(tokens), tuple(steps), time.perf_counter() - start, reason, text)

    def stream(self, prompt: Prompt, settings: DecodeSettings | None = None, *, chat: bool | None = None) -> Iterator[Step]:
        """Yield each step's committed tokens (and text) as soon as they are committed.

        A string prompt goes through the tokenizer's chat template when it has one, unless
        ``chat=False``; chat messages always do.
        """
        if not self._running.acquire(blocking=False):
            raise DecoderBusyError("this decoder is already running a generation; a Decoder runs one at a time, "
                                   "so build one per thread (decoders may share a model)")
        try:
            yield from self._steps(prompt, settings or DecodeSettings(), chat)
        finally:
            self._running.release()

    def _steps(self, prompt: Prompt, settings: DecodeSettings, chat: bool | None) -> Iterator[Step]:
        run = _Run(self, self._check_prompt(encode(self.tokenizer, prompt, chat)), settings)
        self._prefill(run.prompt)
        for index in itertools.count():
            timer, ctx = StepTimer(), run.context(index)
            tree, proposal = self._propose(ctx, timer)
            with timer("select"):
                tree = self._select(tree, proposal, ctx)
            proposal = run.riders_in_context(proposal)
            with timer("verify"):
                verdict = self._verify(tree, proposal, ctx)
            committed, reason = run.commit(verdict)
            if reason is None:
                contract.check_cache(self.composition.verifier, self.target, run.tokens, new=len(verdict.path) + 1)
            self._observe(verdict, ctx, timer)
            yield run.step(committed, reason, _stats(index, proposal, verdict, committed, timer, self._drafting))
            if reason:
                return

    def _prefill(self, prompt: torch.Tensor) -> None:
        """Every prompt token but the last into the cache; each drafter starts from their hidden states."""
        self.target.reset()
        hidden = self.target.prefill(prompt[:-1], self.layers)
        for drafter in self.composition.drafters:
            with drafter.blame("start"):
                drafter.component.start(prompt, hidden)

    def _propose(self, ctx: StepContext, timer: StepTimer) -> tuple[TokenTree, Proposal]:
        """Each drafter proposes and its builder builds; the trees are merged into one."""
        proposals: list[Proposal] = []
        trees: list[TokenTree] = []
        for drafter, builder in zip(self.composition.drafters, self.composition.builders):
            with timer("draft"):
                proposals.append(_proposed(drafter, ctx))
            with timer("build"):
                trees.append(_built(builder, proposals[-1], ctx))
        with timer("build"):
            return self._drafting.merge(trees, proposals, ctx)

    def _select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        selector = self.composition.selector
        with selector.blame("select"):
            return contract.checked_tree(selector, selector.component.select(tree, proposal, ctx), ctx)

    def _verify(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> Verdict:
        verifier = self.composition.verifier
        with verifier.blame("verify"):
            verdict = verifier.component.verify(self.target, tree, proposal, ctx, self.layers)
            return contract.checked_verdict(verifier, verdict, tree, proposal, self.layers)

    def _observe(self, verdict: Verdict, ctx: StepContext, timer: StepTimer) -> None:
        selector = self.composition.selector
        with timer("observe"):
            with selector.blame("observe"):
                selector.component.observe(verdict, ctx)
            views = self._drafting.share(verdict)
        for drafter, view in zip(self.composition.drafters, views):
            with timer("observe"), drafter.blame("observe"):
                drafter.component.observe(view, ctx)

    def _check_prompt(self, prompt: Sequence[int] | torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(prompt)
        if ids.numel() == 0:
            raise ConfigurationError("the prompt is empty; give at least one token id")
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ConfigurationError(f"a prompt is a 1-D sequence of token ids, got shape {tuple(ids.shape)} of {ids.dtype}")
        ids = ids.to(torch.long)
        bad = ids[(ids < 0) | (ids >= self.target.vocab_size)]
        if bad.numel():
            raise ConfigurationError(f"prompt token ids {bad[:5].tolist()} lie outside the vocabulary "
                                     f"[0, {self.target.vocab_size})")
        if ids.numel() >= self.target.max_length:
            raise ConfigurationError(f"the prompt has {ids.numel()} tokens; this model's context holds "
                                     f"{self.target.max_length}")
        return ids


def _proposed(drafter: Slot[Drafter], ctx: StepContext) -> Proposal:
    with drafter.blame("propose"):
        return contract.checked_proposal(drafter, drafter.component.propose(ctx), ctx)


def _built(builder: Slot[TreeBuilder], proposal: Proposal, ctx: StepContext) -> TokenTree:
    with builder.blame("build"):
        return contract.checked_tree(builder, builder.component.build(proposal, ctx), ctx)


def _stats(index: int, proposal: Proposal, verdict: Verdict, committed: tuple[int, ...], timer: StepTimer,
           drafting: Drafters) -> StepStats:
    return StepStats(step=index, tree_size=verdict.tree.size, riders=proposal.rider_count, accepted=len(verdict.path),
                     committed=len(committed), accepted_from=drafting.credit(verdict),
                     **{f"{part}_s": seconds for part, seconds in timer.seconds.items()})


class _Run:
    """One generation in progress: the committed tokens, the room left, and what stops it."""

    def __init__(self, decoder: Decoder, prompt: torch.Tensor, settings: DecodeSettings):
        target = decoder.target
        self.target, self.settings, self.prompt = target, settings, prompt
        outside = [token for token in settings.stop_ids or () if token >= target.vocab_size]
        if outside:
            raise ConfigurationError(f"stop ids {outside[:5]} lie outside the vocabulary [0, {target.vocab_size})")
        self.stop_ids = frozenset(target.eos_ids if settings.stop_ids is None else settings.stop_ids)
        self.cost = decoder.cost_curve if decoder.composition.needs_cost_curve else None
        self.generator = torch.Generator()
        if settings.seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(settings.seed)
        self.text = None if decoder.tokenizer is None else TextStream(decoder.tokenizer)
        self.tokens, self.produced = prompt.tolist(), 0
        # Committed ids as one tensor that grows in place: each step's context is a view of it, not a copy.
        self.buffer = torch.empty(len(self.tokens) + settings.max_new_tokens, dtype=torch.long)
        self.buffer[: len(self.tokens)] = prompt

    def context(self, index: int) -> StepContext:
        room = min(self.settings.max_new_tokens - self.produced, self.target.max_length - len(self.tokens))
        cost = None if self.cost is None else self.cost.at(len(self.tokens))
        return StepContext(step=index, tokens=self.buffer[: len(self.tokens)], settings=self.settings,
                           vocab_size=self.target.vocab_size, max_depth=room - 1, cost=cost, generator=self.generator,
                           stop_ids=self.stop_ids)

    def riders_in_context(self, proposal: Proposal) -> Proposal:
        """The proposal without its riders if any would sit past the model's context (its drafter then sees no rider logits)."""
        riders = proposal.riders
        if riders is None or riders.count == 0:
            return proposal
        if len(self.tokens) - 1 + int(riders.offsets.max()) < self.target.max_length:
            return proposal
        return Proposal(tree=proposal.tree, marginals=proposal.marginals, features=proposal.features)

    def commit(self, verdict: Verdict) -> tuple[tuple[int, ...], str | None]:
        """Append the verdict's tokens up to a stop id; the tokens committed and why generation ends, if it does."""
        committed = verdict.committed
        stop_at = next((i for i, token in enumerate(committed) if token in self.stop_ids), None)
        if stop_at is not None:
            committed = committed[: stop_at + 1]
        start = len(self.tokens)
        self.tokens.extend(committed)
        self.buffer[start: len(self.tokens)] = torch.tensor(committed)
        self.produced += len(committed)
        reason = (
            "stop" if stop_at is not None
            else "length" if self.produced >= self.settings.max_new_tokens
            else "context" if len(self.tokens) >= self.target.max_length
            else None
        )
        return committed, reason

    def step(self, committed: tuple[int, ...], reason: str | None, stats: StepStats) -> Step:
        text = "" if self.text is None else self.text.push(committed, final=bool(reason))
        return Step(committed, stats, reason, text)
