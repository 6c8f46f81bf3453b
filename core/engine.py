"""The decoding loop: prefill, then propose → build → select → verify → commit → observe."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator, Mapping

import attrs
import torch

from specmix.composition import Composition, Slot
from specmix.cost import CostCurve, cost_curve_for
from specmix.errors import ConfigurationError, PluginError
from specmix.settings import DecodeSettings
from specmix.target import Target
from specmix.text import Prompt, TextStream, encode
from specmix.tree import TokenTree
from specmix.values import Generation, Proposal, Step, StepContext, StepStats


class Decoder:
    """Lossless speculative decoding of one HF decoder model with one composition of plugins."""

    def __init__(self, model, composition: Composition, *, tokenizer=None, cost_curve: CostCurve | None = None,
                 static: bool | None = None):
        """``static``: bucketed forward sizes over a fixed-capacity cache, as CUDA graphs on CUDA (None: on CUDA only)."""
        self.target = Target(model, static)
        self.tokenizer = tokenizer
        self.composition = composition
        self._cost_curve = cost_curve
        for slot in composition.slots:
            slot.call("attach", self.target)
        self.target.check_layers(composition.drafter.component.hidden_layers)

    @classmethod
    def compose(
        cls,
        model,
        method: str | None = None,
        *,
        registry=None,
        options: Mapping[str, Mapping] | None = None,
        cost_curve: CostCurve | None = None,
        **components: str,
    ) -> Decoder:
        """A decoder for ``model`` from a method name and/or component names (``drafter="ngram"``, ...)."""
        from specmix.registry import Registry

        registry = registry or Registry.load()
        return cls(model, registry.compose(method, options=options, **components), cost_curve=cost_curve)

    @classmethod
    def from_pretrained(
        cls,
        model=None,
        method: str | None = "vanilla",
        *,
        tokenizer=None,
        dtype: str = "float32",
        cache: str | None = None,
        device: str | None = None,
        registry=None,
        options: Mapping[str, Mapping] | None = None,
        cost_curve: CostCurve | None = None,
        static: bool | None = None,
        **components: str,
    ) -> Decoder:
        """A decoder with text in and out.

        ``model`` is an HF id, a local directory or ``.gguf`` file, an already loaded model
        (then pass its ``tokenizer``), or None for the embedded default model
        (SmolLM2-135M-Instruct, converted once into the cache directory).
        """
        from specmix.loading import load_model
        from specmix.registry import Registry

        if model is None or isinstance(model, (str, os.PathLike)):
            model, tokenizer = load_model(model, dtype=dtype, cache=cache, device=device)
        registry = registry or Registry.load()
        composition = registry.compose(method, options=options, **components)
        return cls(model, composition, tokenizer=tokenizer, cost_curve=cost_curve, static=static)

    @property
    def cost_curve(self) -> CostCurve:
        """This target's T(N) on this device, measured on first use and cached on disk."""
        if self._cost_curve is None:
            self._cost_curve = cost_curve_for(self.target)
        return self._cost_curve

    def prepare(self) -> None:
        """Do the one-time work the composition needs (measuring the cost curve) before anything is timed."""
        if self.composition.consumes("cost-curve"):
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
        settings = settings or DecodeSettings()
        target, (drafter, builder, selector, verifier) = self.target, self.composition.slots
        prompt = self._check_prompt(encode(self.tokenizer, prompt, chat))
        text = None if self.tokenizer is None else TextStream(self.tokenizer)
        stop_ids = frozenset(target.eos_ids if settings.stop_ids is None else settings.stop_ids)
        cost = self.cost_curve if self.composition.consumes("cost-curve") else None
        generator = torch.Generator()
        if settings.seed is None:
            generator.seed()
        else:
            generator.manual_seed(settings.seed)
        layers = drafter.component.hidden_layers

        target.reset()
        drafter.call("start", prompt, target.prefill(prompt[:-1], layers))
        tokens, produced = prompt.tolist(), 0
        for index in itertools.count():
            room = min(settings.max_new_tokens - produced, target.max_length - len(tokens))
            ctx = StepContext(index, torch.tensor(tokens), settings, target.vocab_size, room - 1, cost, generator, stop_ids)
            clock = [time.perf_counter()]
            proposal = drafter.call("propose", ctx)
            clock.append(time.perf_counter())
            tree = self._checked(builder, builder.call("build", proposal, ctx), ctx)
            clock.append(time.perf_counter())
            tree = self._checked(selector, selector.call("select", tree, proposal, ctx), ctx)
            clock.append(time.perf_counter())
            verdict = verifier.call("verify", target, tree, self._riders_in_context(proposal, ctx), ctx, layers)
            clock.append(time.perf_counter())
            drafter.call("observe", verdict, ctx)
            clock.append(time.perf_counter())

            committed = verdict.committed
            stop_at = next((i for i, token in enumerate(committed) if token in stop_ids), None)
            if stop_at is not None:
                committed = committed[: stop_at + 1]
            tokens.extend(committed)
            produced += len(committed)
            seconds = [b - a for a, b in zip(clock, clock[1:])]
            stats = StepStats(index, tree.size, _rider_count(proposal), len(verdict.path), len(committed), *seconds)
            reason = (
                "stop" if stop_at is not None
                else "length" if produced >= settings.max_new_tokens
                else "context" if len(tokens) >= target.max_length
                else None
            )
            yield Step(committed, stats, reason, "" if text is None else text.push(committed, final=bool(reason)))
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

    def _checked(self, slot: Slot, tree, ctx: StepContext) -> TokenTree:
        """The tree a builder or selector returned, checked against the step and cut to the room left."""
        problem = None
        if not isinstance(tree, TokenTree):
            problem = f"returned {type(tree).__name__}, not a TokenTree"
        elif tree.root != ctx.root:
            problem = f"returned a tree rooted at token {tree.root}, but the last committed token is {ctx.root}"
        elif tree.vocab_size != ctx.vocab_size:
            problem = f"returned a tree over {tree.vocab_size} tokens; the target has {ctx.vocab_size}"
        if problem:
            raise PluginError(f"{slot.describe()} from plugin '{slot.plugin}' {problem}", plugin=slot.plugin,
                              component=slot.name)
        return tree.truncated(ctx.max_depth)

    def _riders_in_context(self, proposal: Proposal, ctx: StepContext) -> Proposal:
        """Drop riders that would sit past the model's context; the drafter sees no rider logits then."""
        riders = proposal.riders
        if riders is None or riders.count == 0 or len(ctx.tokens) - 1 + int(riders.offsets.max()) < self.target.max_length:
            return proposal
        return attrs.evolve(proposal, riders=None)


def _rider_count(proposal: Proposal) -> int:
    return 0 if proposal.riders is None else proposal.riders.count
