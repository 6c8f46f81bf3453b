"""The decoding loop: prefill, then (propose → build → select → verify → commit → observe) per step."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import torch

from specmix import contract
from specmix.composition import Composition, Slot
from specmix.errors import ConfigurationError, DecoderBusyError
from specmix.kernels.clock import StepClock
from specmix.settings import DecodeSettings
from specmix.sizing.cost import CostCurve
from specmix.sizing.measure import cost_curve_for
from specmix.sizing.mixing import Mix, Solo
from specmix.sizing.payoff import DrafterPayoff
from specmix.sizing.step_costs import StepCosts
from specmix.sizing.step_rate import StepRate
from specmix.target import Target
from specmix.text import Prompt, TextStream, encode
from specmix.values import Generation, Proposal, Step, StepContext, StepStats, Verdict

STEP_PARTS = ("draft", "build", "select", "verify", "observe")
"""The parts of a step that :class:`StepStats` times (a step with no drafter asked has no drafting time)."""


class Decoder:
    """Lossless speculative decoding of one HF decoder model with one composition of plugins.

    Build one from a registry's composition (``Decoder(model, Registry.load().compose("ngram"))``)
    or let :func:`specmix.load` resolve names and load the model.

    A decoder runs one generation at a time: it owns the target's cache and its
    components' state. Starting a second ``generate`` or ``stream`` before the first has
    finished (from another thread, or by interleaving streams) raises
    :class:`DecoderBusyError`; build one decoder per thread (they may share the model).
    """

    def __init__(self, model, composition: Composition, *, tokenizer=None, cost_curve: CostCurve | None = None,
                 static: bool | None = None, cache_dir=None, learn_costs: bool | None = None):
        """``static``: bucketed forward sizes over a fixed-capacity cache, as CUDA graphs on CUDA (None: on CUDA only).
        ``cache_dir``: where measured cost curves are kept (default: ``$SPECMIX_CACHE_DIR`` or ``~/.cache/specmix``).
        ``learn_costs``: scale the cost curve by what this decoder's steps take against it (:attr:`step_costs`), and
        weigh each position against the tokens per second its steps bring (:attr:`step_rate`); None: unless
        ``cost_curve`` is given, which is then taken as it is, each step sized for its own best rate."""
        self.target = Target(model, static, cache=cache_dir)
        self.tokenizer = tokenizer
        self.composition = composition
        self._cost_curve, self._cache_dir = cost_curve, cache_dir
        self._running = threading.Lock()
        for slot in composition.slots:
            with slot.blame("attach"):
                slot.component.attach(self.target)
        self.layers = tuple(sorted({layer for slot in composition.drafters for layer in slot.component.hidden_layers}))
        self.target.check_layers(self.layers)
        # A composition that sizes its work by the cost curve also has its drafters earn their place on it.
        count = len(composition.drafters)
        priced = composition.needs_cost_curve
        calibrated = [slot.component.calibrated for slot in composition.drafters]
        self._mix = Solo(DrafterPayoff(1) if priced else None, calibrated[0]) if count == 1 else Mix(
            count, payoff=DrafterPayoff(Mix.slots(count)) if priced else None, calibrated=calibrated)
        learn = cost_curve is None if learn_costs is None else learn_costs
        self.step_costs = StepCosts() if learn else None
        """What this decoder's steps took against the cost curve's price, kept across generations; selectors and
        the drafter payoff see the curve scaled by it (None: the curve as it is)."""
        self.step_rate = StepRate() if learn else None
        """The tokens per second this decoder's steps bring, kept across generations; selectors size trees against
        it (None: each step for its own best rate)."""

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
        tokens, steps, chunks, reason = [], [], [], None
        for step in self.stream(prompt, settings, chat=chat):
            tokens.extend(step.tokens)
            steps.append(step.stats)
            chunks.append(step.text)
            reason = step.stop_reason
        text = "".join(chunks) if self.tokenizer is not None else None
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
        drafters, builders, selector, verifier = (self.composition.drafters, self.composition.builders,
                                                  self.composition.selector, self.composition.verifier)
        self.target.reset()
        hidden = self.target.prefill(run.prompt[:-1], self.layers)
        for drafter in drafters:
            with drafter.blame("start"):
                drafter.component.start(run.prompt, hidden)
        self._mix.start()
        for index in itertools.count():
            began_step = time.perf_counter()
            ctx, clock = run.context(index), StepClock()
            proposals, trees, spent = [], [], []
            for number, (drafter, builder) in enumerate(zip(drafters, builders)):
                began = time.perf_counter()
                if self._mix.ask(number, trees):
                    with clock("draft"):
                        proposals.append(_proposed(drafter, ctx))
                    with clock("build"):
                        trees.append(_built(builder, proposals[-1], ctx))
                else:
                    proposals.append(None)
                    trees.append(None)
                spent.append(time.perf_counter() - began)
            with clock("build"):
                tree, proposal = self._mix.merge(trees, proposals, ctx)
            with clock("select"), selector.blame("select"):
                tree = contract.checked_tree(selector, selector.component.select(tree, proposal, ctx), ctx)
            verified = run.riders_in_context(proposal)
            self.target.pad_to = None if ctx.cost is None else ctx.cost.padded_size
            forwarded = self.target.tree_seconds
            with clock("verify"), verifier.blame("verify"):
                verdict = verifier.component.verify(self.target, tree, verified, ctx, self.layers)
                verdict = contract.checked_verdict(verifier, verdict, tree, verified, self.layers)
            # The tree forward alone where it can be timed: head rows the walk reads cost by how far it goes, not by
            # the tree's size, and would make large trees, which accept more, look dearer than they are.
            forwarded = None if forwarded is None else self.target.tree_seconds - forwarded
            run.record_cost(verdict, forwarded or clock.seconds["verify"])
            committed, reason = run.commit(verdict)
            if reason is None:
                contract.check_cache(verifier, self.target, run.tokens, new=len(verdict.path) + 1)
            with clock("observe"):
                with selector.blame("observe"):
                    selector.component.observe(verdict, ctx)
                for source, (drafter, view) in enumerate(zip(drafters, self._mix.share(verdict))):
                    began = time.perf_counter()
                    with drafter.blame("observe"):
                        drafter.component.observe(view, ctx)
                    spent[source] += time.perf_counter() - began
            self._mix.settle(verdict, spent, clock.seconds, len(committed), ctx.cost)
            if self.step_rate is not None:
                self.step_rate.record(len(committed), time.perf_counter() - began_step)
            yield run.step(committed, reason, _stats(index, verified, verdict, committed, clock, self._mix.credit(verdict),
                                                         self._mix.asked))
            if reason:
                return

    def _check_prompt(self, prompt) -> torch.Tensor:
        ids = torch.as_tensor(prompt)
        if ids.numel() == 0:
            raise ConfigurationError("the prompt is empty; give at least one token id")
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ConfigurationError(f"a prompt is a 1-D sequence of token ids, got shape {tuple(ids.shape)} of {ids.dtype}")
        ids = ids.to(torch.long)
        bad = ids[(ids < 0) | (ids >= self.target.vocab_size)]
        if bad.numel():
            raise ConfigurationError(
                f"prompt token ids {bad[:5].tolist()} lie outside the vocabulary [0, {self.target.vocab_size})"
            )
        if ids.numel() >= self.target.max_length:
            raise ConfigurationError(
                f"the prompt has {ids.numel()} tokens; this model's context holds {self.target.max_length}"
            )
        return ids


def _proposed(drafter: Slot, ctx: StepContext) -> Proposal:
    with drafter.blame("propose"):
        return contract.checked_proposal(drafter, drafter.component.propose(ctx), ctx)


def _built(builder: Slot, proposal: Proposal, ctx: StepContext):
    with builder.blame("build"):
        return contract.checked_tree(builder, builder.component.build(proposal, ctx), ctx)


def _stats(index: int, proposal: Proposal, verdict: Verdict, committed: tuple[int, ...], clock: StepClock,
           credit: tuple[int, ...], asked: list[bool]) -> StepStats:
    return StepStats(step=index, tree_size=verdict.tree.size, riders=proposal.rider_count, accepted=len(verdict.path),
                     committed=len(committed), accepted_from=credit, asked=tuple(asked),
                     **{f"{part}_s": clock.seconds.get(part, 0.0) for part in STEP_PARTS})


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
        self.step_costs = decoder.step_costs
        self.step_rate = decoder.step_rate
        self.curve_here: CostCurve | None = None  # the unscaled curve at the current step's context
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
        return StepContext(step=index, tokens=self.buffer[: len(self.tokens)], settings=self.settings,
                           vocab_size=self.target.vocab_size, max_depth=room - 1,
                           cost=self.priced(), generator=self.generator, stop_ids=self.stop_ids,
                           rate=None if self.cost is None or self.step_rate is None else self.step_rate.rate)

    def priced(self) -> CostCurve | None:
        """The curve at this step's context (kept for :meth:`record_cost`), scaled by what steps have taken."""
        self.curve_here = None if self.cost is None else self.cost.at(len(self.tokens))
        if self.curve_here is None or self.step_costs is None:
            return self.curve_here
        return self.step_costs.scaled(self.curve_here)

    def record_cost(self, verdict: Verdict, seconds: float) -> None:
        """Record what verifying took against the step's unscaled curve's price for the forward it ran."""
        if self.curve_here is None or self.step_costs is None:
            return
        riders = 0 if verdict.rider_logits is None else verdict.rider_logits.shape[0]
        forward = verdict.tree.size + riders
        positions = forward if self.target.pad_to is None else self.target.pad_to(forward)
        self.step_costs.record(positions, seconds, self.curve_here)

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
