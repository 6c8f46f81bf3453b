"""Value objects that components exchange. Plugins talk to each other only through these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import torch

from specmix.converters import ints
from specmix.errors import MalformedTreeError
from specmix.kernels.node_logits import NodeLogits, as_node_logits
from specmix.settings import DecodeSettings
from specmix.tree import TokenTree

if TYPE_CHECKING:
    from specmix.sizing.cost import CostCurve

HiddenStates = Mapping[int, torch.Tensor]
"""Target hidden states by layer index into HF's ``hidden_states`` tuple (0 = embeddings), each ``[n, hidden]``."""


@attrs.frozen
class Marginals:
    """Per-position draft distributions, top-K only.

    Row ``h`` describes the token at depth ``h + 1`` below the root: ``ids[h]`` are K
    distinct token ids with log-probabilities ``logprobs[h]`` in non-increasing order.
    ``transitions`` (the ``transitions`` capability; optional) makes the positions depend
    on each other: ``transitions[h, i, j]`` is added to the score of ``ids[h, j]`` when the
    previous position took ``ids[h - 1, i]`` (for ``h = 0`` the root came first, and
    every row ``i`` is the same).
    """

    ids: torch.Tensor = attrs.field(eq=False)
    logprobs: torch.Tensor = attrs.field(eq=False)
    vocab_size: int = attrs.field(validator=attrs.validators.gt(0))
    transitions: torch.Tensor | None = attrs.field(default=None, eq=False)

    def __attrs_post_init__(self):
        if self.ids.dim() != 2 or self.ids.shape != self.logprobs.shape:
            raise MalformedTreeError("marginals need ids and logprobs of one shape [H, K], "
                                     f"got {tuple(self.ids.shape)} and {tuple(self.logprobs.shape)}")
        depth, width = self.ids.shape
        if self.transitions is not None and tuple(self.transitions.shape) != (depth, width, width):
            raise MalformedTreeError(f"marginal transitions need shape [H, K, K] = {(depth, width, width)}, "
                                     f"got {tuple(self.transitions.shape)}")
        if self.ids.numel() == 0:
            return
        if int(self.ids.min()) < 0 or int(self.ids.max()) >= self.vocab_size:
            raise MalformedTreeError(f"marginal ids lie outside the vocabulary [0, {self.vocab_size})")
        if bool((self.logprobs[:, 1:] > self.logprobs[:, :-1]).any()):
            raise MalformedTreeError("marginal logprobs must be sorted best first")
        if self.ids.shape[1] > 1 and bool((self.ids.sort(dim=1).values.diff(dim=1) == 0).any()):
            raise MalformedTreeError("marginal ids must be distinct within a position")

    @property
    def depth(self) -> int:
        return self.ids.shape[0]


@attrs.frozen
class Riders:
    """Tokens a drafter wants evaluated in the verification forward, beside the candidate tree.

    Rider ``r`` sits at position ``root position + offsets[r]`` and attends to the cache,
    plus the root where ``visible[r, 0]`` and rider ``j`` where ``visible[r, j + 1]``.
    Riders never see candidate nodes, candidates never see riders, and riders' cache
    entries are discarded after the step. Their logits come back in the verdict.
    """

    tokens: torch.Tensor = attrs.field(eq=False)
    offsets: torch.Tensor = attrs.field(eq=False)
    visible: torch.Tensor = attrs.field(eq=False)

    def __attrs_post_init__(self):
        r = self.tokens.shape[0]
        if self.tokens.dim() != 1 or self.offsets.shape != (r,) or self.visible.shape != (r, r + 1):
            raise MalformedTreeError(f"riders need tokens [R], offsets [R] and visible [R, R+1]; got "
                                     f"{tuple(self.tokens.shape)}, {tuple(self.offsets.shape)}, {tuple(self.visible.shape)}")
        if self.visible.dtype != torch.bool or (r and not bool(self.visible[:, 1:].diagonal().all())):
            raise MalformedTreeError("riders' visibility must be boolean and let every rider see itself")
        if r and int(self.offsets.min()) < 1:
            raise MalformedTreeError("rider offsets start at 1 (the root's own position is offset 0)")

    @property
    def count(self) -> int:
        return self.tokens.shape[0]


@attrs.frozen
class Proposal:
    """What a drafter offers for one step. Every part is optional; the capability beside each
    field names it in ``produces``, and a drafter fills what it declares on every step (an
    empty tree, marginals of depth 0 or no riders are all fine).
    """

    tree: TokenTree | None = None
    """``tree``: a ready candidate tree rooted at the last committed token."""
    marginals: Marginals | None = None
    """``marginals``: per-position distributions for a builder."""
    riders: Riders | None = None
    """``riders``: tokens to evaluate in the verification pass."""
    features: torch.Tensor | None = attrs.field(default=None, eq=False)
    """``features``: the drafter's own hidden state per drafted position ``[H, F]`` (for learned selectors)."""

    @property
    def rider_count(self) -> int:
        return 0 if self.riders is None else self.riders.count


@attrs.frozen
class Verdict:
    """The outcome of verifying one tree.

    ``path`` holds accepted node indices below the root, in order; ``tokens`` their
    tokens; ``bonus`` the token the target chose after the last accepted node. The cache
    afterwards holds the root and the accepted nodes. ``logits`` are the target's raw
    logits at every tree node ``[N, V]``; ``node_logits`` gives them row by row, computing
    only the rows asked for (built from ``logits=``, a tensor or :class:`NodeLogits`).
    """

    tree: TokenTree
    path: tuple[int, ...]
    bonus: int
    node_logits: NodeLogits = attrs.field(alias="logits", converter=as_node_logits, eq=False)
    rider_logits: torch.Tensor | None = attrs.field(default=None, eq=False)
    """``rider-logits``: the target's logits at every rider of the verified proposal ``[R, V]`` (None without riders)."""
    hidden: HiddenStates = attrs.field(factory=dict, eq=False)
    """``hidden-states``: the drafter's layers at the root and accepted nodes, each ``[1 + len(path), D]``."""
    tokens: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self):
        for parent, child in zip((0,) + self.path, self.path):
            if self.tree.parent_list[child] != parent:
                raise MalformedTreeError(f"verdict path {self.path} is not a root path of its tree")
        object.__setattr__(self, "tokens", tuple(self.tree.token_list[i] for i in self.path))

    @property
    def logits(self) -> torch.Tensor:
        """``[N, V]``: the target's logits at every tree node (the rows not yet computed are computed now)."""
        return self.node_logits.all()

    @property
    def committed(self) -> tuple[int, ...]:
        """Tokens this step adds to the output: the accepted path, then the bonus."""
        return self.tokens + (self.bonus,)


@attrs.frozen(kw_only=True)
class StepContext:
    """What every component may read during one step.

    ``tokens`` are the committed ids (prompt and output), ending with the root.
    ``max_depth`` is the deepest a candidate may sit this step: a step commits its
    accepted path and one bonus token, so a path may use all the room left in the output
    and in the model's context but one place. ``cost`` is the measured cost curve over this
    step's context length when a component needs it. ``stop_ids`` end generation (the settings' or the model's EOS
    ids). ``generator`` drives verification sampling only; drafters that sample use their own.
    """

    step: int
    tokens: torch.Tensor = attrs.field(eq=False)
    settings: DecodeSettings
    vocab_size: int
    max_depth: int
    cost: CostCurve | None = attrs.field(default=None, eq=False)
    generator: torch.Generator | None = attrs.field(default=None, eq=False)
    stop_ids: frozenset[int] = frozenset()

    @property
    def root(self) -> int:
        return int(self.tokens[-1])


@attrs.frozen(kw_only=True)
class StepStats:
    """Counts and wall-clock seconds of one decoding step: the tree verified, the riders beside
    it, the drafted tokens accepted (and which drafter proposed them), the tokens committed,
    and the time each call took ("build" includes merging the trees of several drafters)."""

    step: int
    tree_size: int
    riders: int
    accepted: int
    committed: int
    draft_s: float
    build_s: float
    select_s: float
    verify_s: float
    observe_s: float
    accepted_from: tuple[int, ...] = ()
    """Per drafter of the composition, how many of the accepted nodes it had proposed."""


@attrs.frozen
class Generation:
    """A finished generation: new token ids (and their text, given a tokenizer), per-step statistics, totals."""

    tokens: tuple[int, ...]
    steps: tuple[StepStats, ...]
    seconds: float
    stop_reason: str
    text: str | None = None

    @property
    def tau(self) -> float:
        """Mean tokens committed per target forward (accepted drafts plus the bonus)."""
        return len(self.tokens) / max(1, len(self.steps))

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else float("inf")


@attrs.frozen
class Step:
    """What one decoding step committed, and its text when the decoder has a tokenizer.

    ``stop_reason`` is set on the last step only: ``"stop"`` (a stop id), ``"length"``
    (max_new_tokens) or ``"context"`` (the model's context is full).
    """

    tokens: tuple[int, ...]
    stats: StepStats
    stop_reason: str | None = None
    text: str = ""


@attrs.frozen
class Run:
    """One method's output for one prompt. Step counts exist for specmix methods only; the
    per-step fields are missing from journals written before they were recorded."""

    tokens: tuple[int, ...] = attrs.field(converter=ints)
    seconds: float
    steps: int | None
    accepted: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(ints))
    """Drafted tokens the target accepted, per step."""
    verified: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(ints))
    """Positions each step's verification forward ran: the tree, root included, and any riders."""
    draft_s: float | None = None
    """Seconds spent drafting, building and selecting trees, over all steps."""
    accepted_from: dict[str, int] | None = None
    """For a mix of drafters: how many accepted tokens each drafter had proposed (a token may count for several)."""
    carried: dict[str, dict] | None = None
    """Per drafter that remembers earlier generations, what it held when this prompt ran (:meth:`Drafter.carried`)."""
