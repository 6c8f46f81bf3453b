"""Adversarial drafters for the properties: random shapes, wrong tokens, EOS inside trees.

Given an ``oracle`` (the target model itself) they mix true continuations into their
guesses, so that long accepted paths, deep compaction and stop ids mid-tree all occur.
Two of them prove the drafting styles and check what the verifier hands back:
``kit-riders`` drafts in-pass and compares its rider logits with a plain forward;
``kit-features`` is feature-conditioned and compares its feature cache with the
target's hidden states.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from specmix import Capability, Drafter, Marginals, Proposal, Riders, StepContext, TokenTree, Verdict, hookimpl
from specmix.testing.models import tolerance
from specmix.values import HiddenStates

if TYPE_CHECKING:
    from transformers import PreTrainedModel

Register = Callable[[str, Callable[..., Drafter]], None]


class _Oracle:
    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model

    @torch.no_grad()
    def forward(self, ids: Sequence[int], hidden: bool = False) -> Any:
        return self.model(input_ids=torch.tensor([list(ids)], device=self.model.device), output_hidden_states=hidden)

    def greedy(self, ids: Sequence[int], count: int) -> list[int]:
        ids, out = list(ids), []
        for _ in range(count):
            out.append(int(self.forward(ids).logits[0, -1].argmax()))
            ids.append(out[-1])
        return out

    def probs(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.softmax(self.forward(ids).logits[0, -1], dim=-1)


class KitDrafter(Drafter):
    """The kit's drafters: ``seed`` drives their random choices, ``oracle`` (the target) their true guesses."""

    def __init__(self, seed: int = 0, oracle: PreTrainedModel | None = None) -> None:
        self.seed = seed
        self.oracle = None if oracle is None else _Oracle(oracle)

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        self.rng = random.Random(self.seed)

    def _truth(self, ctx: StepContext, count: int) -> list[int]:
        count = min(count, ctx.max_depth)
        if self.oracle is None or count <= 0:
            return [self.rng.randrange(ctx.vocab_size) for _ in range(count)]
        return self.oracle.greedy(ctx.tokens.tolist(), count)


class RandomTreeDrafter(KitDrafter):
    """A random trie each step: a (sometimes corrupted) true path, branches off it, and noise."""

    produces = frozenset({Capability.TREE})

    def propose(self, ctx: StepContext) -> Proposal:
        rng, vocab = self.rng, ctx.vocab_size
        truth = self._truth(ctx, rng.randint(0, 8))
        if truth and rng.random() < 0.3:
            truth[rng.randrange(len(truth))] = rng.randrange(vocab)
        paths = [truth]
        for _ in range(rng.randint(0, 5)):
            cut = rng.randint(0, len(truth))
            paths.append(truth[:cut] + [rng.randrange(vocab) for _ in range(rng.randint(1, 3))])
        rng.shuffle(paths)
        tree = TokenTree.from_paths(ctx.root, paths, vocab)
        if rng.random() < 0.5:
            logprobs = [0.0] + [-rng.expovariate(1.0) for _ in range(tree.size - 1)]
            tree = TokenTree(tokens=tree.tokens, parents=tree.parents, vocab_size=vocab, logprobs=logprobs)
        return Proposal(tree=tree)


class RandomMarginalsDrafter(KitDrafter):
    """Random top-K marginals whose best guess is often the true next token."""

    produces = frozenset({Capability.MARGINALS})

    def propose(self, ctx: StepContext) -> Proposal:
        rng, vocab = self.rng, ctx.vocab_size
        depth, k = min(rng.randint(0, 8), ctx.max_depth), rng.randint(1, min(4, vocab))
        truth = self._truth(ctx, depth)
        ids, logprobs = [], []
        for h in range(depth):
            first = truth[h] if rng.random() < 0.75 else rng.randrange(vocab)
            row = [first] + rng.sample([t for t in range(vocab) if t != first], k - 1)
            ids.append(row)
            logprobs.append(sorted((-rng.expovariate(1.0) for _ in range(k)), reverse=True))
        shape = (depth, k)
        return Proposal(marginals=Marginals(
            ids=torch.tensor(ids, dtype=torch.long).reshape(shape),
            logprobs=torch.tensor(logprobs, dtype=torch.float64).reshape(shape),
            vocab_size=vocab,
        ))


class SampledTreeDrafter(KitDrafter):
    """Children drawn from a stated q without replacement, with q handed over (recursive rejection)."""

    produces = frozenset({Capability.TREE})

    def propose(self, ctx: StepContext) -> Proposal:
        rng, vocab = self.rng, ctx.vocab_size
        generator = torch.Generator().manual_seed(rng.randrange(1 << 30))
        tokens, parents, rows = [ctx.root], [-1], []
        frontier, depth_limit = [(0, ctx.tokens.tolist(), 0)], min(rng.randint(1, 3), ctx.max_depth)
        while frontier:
            node, ids, depth = frontier.pop(0)
            noise = -torch.rand(vocab, dtype=torch.float64, generator=generator).log()  # a Dirichlet(1) draw
            q = noise / noise.sum()
            if depth >= depth_limit:
                rows.append(q)  # a leaf: no children were drawn, so its q is never used
                continue
            if self.oracle is not None:
                q = 0.5 * self.oracle.probs(ids).to("cpu", torch.float64) + 0.5 * q
            rows.append(q)
            remaining = q.clone()
            for _ in range(rng.randint(0, 3)):
                token = int(torch.multinomial(remaining / remaining.sum(), 1, generator=generator))
                remaining[token] = 0
                tokens.append(token)
                parents.append(node)
                frontier.append((len(tokens) - 1, ids + [token], depth + 1))
        # rows were appended in visiting order, which is creation order (breadth first)
        return Proposal(tree=TokenTree(tokens=tokens, parents=parents, vocab_size=vocab, draft_q=torch.stack(rows)))


class RiderDrafter(KitDrafter):
    """In-pass drafting: a Jacobi-style guess rides in the verification forward; its logits refine the guess."""

    produces = frozenset({Capability.TREE, Capability.RIDERS})
    consumes = frozenset({Capability.RIDER_LOGITS})

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        super().start(prompt, hidden)
        self.guess: list[int] = []

    def propose(self, ctx: StepContext) -> Proposal:
        width = min(self.rng.randint(0, 4), ctx.max_depth)
        vocab = ctx.vocab_size
        guess = (self.guess + [self.rng.randrange(vocab) for _ in range(width)])[:width]
        self.sent = guess
        tree = TokenTree.from_paths(ctx.root, [guess], vocab)
        visible = torch.ones(width, width + 1, dtype=torch.bool).tril(diagonal=1)
        riders = Riders(tokens=torch.tensor(guess, dtype=torch.long), offsets=torch.arange(1, width + 1), visible=visible)
        return Proposal(tree=tree, riders=riders)

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        logits = verdict.rider_logits
        if logits is None:
            self.guess = []
            return
        if logits.shape != (len(self.sent), ctx.vocab_size):
            raise AssertionError(f"rider logits of shape {tuple(logits.shape)} for {len(self.sent)} riders")
        if self.oracle is not None:
            for i in range(len(self.sent)):
                expected = self.oracle.forward(ctx.tokens.tolist() + self.sent[: i + 1]).logits[0, -1]
                close = tolerance(expected.dtype)
                if not torch.allclose(logits[i].to(expected.dtype), expected, atol=close, rtol=close):
                    raise AssertionError(f"rider {i} logits differ from a plain forward over its visible path")
        predictions = logits.argmax(dim=-1).tolist()
        self.guess = predictions[len(verdict.path) + 1:]


class FeatureDrafter(KitDrafter):
    """Feature-conditioned drafting: a random readout of cached target hidden states at accepted positions."""

    produces = frozenset({Capability.MARGINALS, Capability.FEATURES})
    consumes = frozenset({Capability.HIDDEN_STATES})
    hidden_layers = (1, 2)

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        super().start(prompt, hidden)
        self.features = {layer: states.clone() for layer, states in hidden.items()}

    def propose(self, ctx: StepContext) -> Proposal:
        cached = len(ctx.tokens) - 1
        for layer, states in self.features.items():
            if states.shape[0] != cached:
                raise AssertionError(f"layer {layer} feature cache holds {states.shape[0]} positions, the target {cached}")
        if self.oracle is not None and cached:
            out = self.oracle.forward(ctx.tokens[:-1].tolist(), hidden=True)
            for layer, states in self.features.items():
                close = tolerance(states.dtype)
                if not torch.allclose(states, out.hidden_states[layer][0], atol=close, rtol=close):
                    raise AssertionError(f"layer {layer} features differ from the target's hidden states")
        rng, vocab = self.rng, ctx.vocab_size
        depth, k = (rng.randint(1, 6), min(3, vocab)) if cached else (0, 1)
        last = self.features[self.hidden_layers[-1]]
        if depth == 0:
            return Proposal(marginals=Marginals(ids=torch.zeros(0, k, dtype=torch.long),
                                                logprobs=torch.zeros(0, k, dtype=torch.float64), vocab_size=vocab),
                            features=last.new_zeros(0, last.shape[1]))
        generator = torch.Generator().manual_seed(rng.randrange(1 << 30))
        last = last[-1].to("cpu", torch.float64)
        weights = torch.randn(depth, last.shape[0], vocab, dtype=torch.float64, generator=generator)
        logprobs = torch.log_softmax(torch.einsum("d,hdv->hv", last, weights), dim=-1)
        top = logprobs.topk(k, dim=-1)
        features = last.expand(depth, -1).clone()
        return Proposal(marginals=Marginals(ids=top.indices, logprobs=top.values, vocab_size=vocab), features=features)

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        for layer in self.hidden_layers:
            self.features[layer] = torch.cat([self.features[layer], verdict.hidden[layer]])


class KitPlugin:
    """Registers the kit's drafters; tests add it to a registry, users never see it installed."""

    @hookimpl
    def register_drafters(self, register: Register) -> None:
        register("kit-random-tree", RandomTreeDrafter)
        register("kit-random-marginals", RandomMarginalsDrafter)
        register("kit-sampled-tree", SampledTreeDrafter)
        register("kit-riders", RiderDrafter)
        register("kit-features", FeatureDrafter)


KIT_DRAFTERS = ("kit-random-tree", "kit-random-marginals", "kit-sampled-tree", "kit-riders", "kit-features")


class ReplayDrafter(Drafter):
    """An oracle of set acceptance: it knows the target's greedy text ``path`` (prompt and continuation)
    and proposes its next ``length`` tokens as a chain, so every step commits ``length + 1`` tokens.

    For measuring the engine, not its losslessness: what it drafts is right by construction.
    """

    produces = frozenset({Capability.TREE})

    def __init__(self, path: list | None = None, length: int = 1) -> None:
        self.path, self.length = list(path or ()), length

    def propose(self, ctx: StepContext) -> Proposal:
        start = len(ctx.tokens)
        chain = self.path[start:start + min(self.length, max(ctx.max_depth, 0))]
        if self.path[:start] != ctx.tokens.tolist():
            chain = []
        return Proposal(tree=TokenTree.from_paths(ctx.root, [chain], ctx.vocab_size))


class ReplayPlugin:
    """Registers ``kit-replay``; measurements add it to a registry, the conformance suites do not."""

    @hookimpl
    def register_drafters(self, register: Register) -> None:
        register("kit-replay", ReplayDrafter)
