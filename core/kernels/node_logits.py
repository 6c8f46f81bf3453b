"""The target's logits at the nodes of one verified tree, computed as they are needed.

The LM head is a fifth of a small model's work per token, and a walk down a verified tree
reads the logits of only the nodes it reaches: the root and the accepted path (a greedy walk,
only their argmax, which :mod:`specmix.kernels.screened_head` finds more cheaply still). When the
target's logits are its output embedding applied to its decoder's last hidden state
(checked once per model, :meth:`specmix.Target.lazy_head`), the target keeps those hidden
states and the head runs on the rows asked for, a few at a time; any other model's logits
come whole from its forward, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

import attrs
import torch

from specmix.converters import floats
from specmix.kernels.clock import fastest
from specmix.kernels.screened_head import ScreenedHead

MAX_WIDTH = 8
"""The most rows :class:`HeadCosts` measures one call of the head over."""


def _synchronized(call: Callable[[], object], device: torch.device) -> Callable[[], None]:
    """``call``, then a wait for ``device`` to finish its kernels, so that a timer reads their time."""
    def run() -> None:
        call()
        torch.cuda.synchronize(device)
    return run


@attrs.frozen
class HeadCosts:
    """What reading the LM head costs: one call over 1, 2, ... :data:`MAX_WIDTH` rows, and one screened argmax.

    Kernels change at sizes of their own (on a two-core CPU, four rows of a large head cost
    less than three), so the costs are measured, not assumed.
    """

    rows: tuple[float, ...] = attrs.field(converter=floats)
    """Seconds for one call over ``w`` rows at index ``w - 1``."""
    screen: float | None = None
    """Seconds for one screened argmax (:mod:`specmix.kernels.screened_head`), where the head has a screen."""
    slack: float = 1.25

    @classmethod
    @torch.no_grad()
    def measure(cls, head: torch.nn.Module, screen: ScreenedHead | None = None, repeats: int = 5,
                slack: float = 1.25, timer: Callable[[], float] = time.perf_counter) -> HeadCosts:
        """The fastest of ``repeats`` calls of ``head`` at each width, and of ``screen``, taking turns, as ``timer``
        reads the seconds."""
        weight = cast(torch.Tensor, head.weight)  # a head's weight is a parameter, not a submodule
        generator = torch.Generator(device=weight.device).manual_seed(0)
        # Random rows, not zeros: on zeros every token ties, and a screen reads the whole weight again to decide.
        rows = torch.randn(MAX_WIDTH, weight.shape[1], dtype=weight.dtype, device=weight.device, generator=generator)
        calls: list[Callable[..., object]] = [lambda width=width: head(rows[:width]) for width in range(1, MAX_WIDTH + 1)]
        if screen is not None:
            calls.append(lambda: screen.argmax(rows[0]))
        if weight.device.type == "cuda":
            calls = [_synchronized(call, weight.device) for call in calls]
        seconds = fastest(calls, repeats, timer)
        return cls(seconds[:MAX_WIDTH], seconds[MAX_WIDTH] if screen is not None else None, slack)

    @property
    def width(self) -> int:
        """How many rows one call takes for about the price of one: the most whose call costs at most ``slack``
        times one row's."""
        return max(width for width in range(1, len(self.rows) + 1) if self.rows[width - 1] <= self.slack * self.rows[0])

    def rows_to_read(self, chances: Sequence[float]) -> int:
        """How many rows a greedy walk should compute in one call at a node whose row it lacks: that node's and
        the next ones down its likeliest way, which the walk reads with ``chances`` (each given it reads the
        node); or 0 to screen the node's argmax alone, as is cheaper where the walk is unlikely to go on.

        The call is worth its price when it costs less than the screened argmaxes it saves, on average."""
        if self.screen is None:
            return 0  # nothing to weigh the call against: the screen as it is
        best, saved, screened = 0, 0.0, self.screen
        for width in range(1, min(len(chances) + 1, len(self.rows)) + 1):
            if width > 1:
                screened += self.screen * chances[width - 2]
            if screened - self.rows[width - 1] > saved:
                best, saved = width, screened - self.rows[width - 1]
        return best


class NodeLogits:
    """Logits ``[N, V]`` at a tree's nodes, whole (:meth:`of` a tensor) or per row (:meth:`lazy`)."""

    def __init__(self, rows: int, vocab: int, full: torch.Tensor | None = None,
                 final: torch.Tensor | None = None, head: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 costs: HeadCosts | None = None, screen: ScreenedHead | None = None):
        self.shape = (rows, vocab)
        self.costs = costs
        self.width = 1 if costs is None else costs.width
        """How many rows one call of the head takes for about the price of one: a reader asking for a row may bring
        ``width - 1`` more with it."""
        self._full, self._final, self._head, self._screen = full, final, head, screen
        self._have = [full is not None] * rows
        self._argmax: dict[int, int] = {}

    @classmethod
    def of(cls, value: NodeLogits | torch.Tensor) -> NodeLogits:
        """``value`` as node logits (a tensor ``[N, V]`` is taken whole)."""
        if isinstance(value, NodeLogits):
            return value
        return cls(value.shape[0], value.shape[-1], full=value)

    @classmethod
    def lazy(cls, final: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor], vocab: int,
             costs: HeadCosts | None = None, screen: ScreenedHead | None = None) -> NodeLogits:
        """Logits ``head(final[i])`` for each row ``i`` of ``final [N, D]``, computed when first asked for
        (``costs``: what calls of ``head`` and ``screen`` cost, see :attr:`width` and :meth:`argmax`; ``screen``: a
        cheaper exact argmax of ``head``, used when a row's argmax is asked for before the row)."""
        return cls(final.shape[0], vocab, final=final, head=head, costs=costs, screen=screen)

    @property
    def computed(self) -> int:
        """How many rows have been computed so far (all of them for whole logits)."""
        return sum(self._have)

    def has(self, node: int) -> bool:
        """Whether ``node``'s row is computed already."""
        return self._have[node]

    def rows(self, nodes: Sequence[int]) -> torch.Tensor:
        """``[len(nodes), V]``, computing the missing rows in one call of the head."""
        missing = sorted({node for node in nodes if not self._have[node]})
        if missing:
            assert self._head is not None and self._final is not None, "only lazy logits have rows missing"
            fresh = self._head(self._final[torch.tensor(missing, device=self._final.device)])
            if self._full is None:
                self._full = fresh.new_empty(self.shape)
            self._full[missing] = fresh
            for node in missing:
                self._have[node] = True
        return self._filled[list(nodes)]

    def __getitem__(self, node: int) -> torch.Tensor:
        """``[V]`` at ``node``, as a row of a logits tensor would be."""
        return self.row(node)

    def row(self, node: int, along: Sequence[int] = ()) -> torch.Tensor:
        """``[V]`` at ``node``; when it must be computed, the rows ``along`` (where a walk may go next) come with it."""
        if not self._have[node]:
            self.rows([node, *along])
        return self._filled[node]

    def argmax(self, node: int, along: Sequence[int] = (), chances: Sequence[float] = ()) -> int:
        """The argmax of ``node``'s row; when the row must be computed, as many of the rows ``along`` as one call
        takes for about the price of one come with it (:attr:`width`). Where the head has a screen, the argmax is
        screened without the row, unless ``chances`` (the chance that a walk reads each node ``along``, given it
        reads this one) say that computing this row and the next ones in one call costs less, on average, than
        screening each (:meth:`HeadCosts.rows_to_read`)."""
        if node not in self._argmax:
            choice = None
            if not self._have[node] and self._screen is not None:
                count = 0 if self.costs is None else self.costs.rows_to_read(chances[:len(along)])
                if count:
                    self.rows([node, *along[:count - 1]])
                else:
                    assert self._final is not None, "only lazy logits have a screen"
                    choice = self._screen.argmax(self._final[node])
            self._argmax[node] = int(self.row(node, along[:self.width - 1]).argmax()) if choice is None else choice
        return self._argmax[node]

    def chosen(self) -> dict[int, int]:
        """The argmax at every node where it is known so far (its row computed or its argmax screened), by node."""
        pending = [node for node, have in enumerate(self._have) if have and node not in self._argmax]
        if pending:  # one reduction over the computed rows, not one per row
            self._argmax.update(zip(pending, self._filled[pending].argmax(dim=-1).tolist()))
        return dict(sorted(self._argmax.items()))

    def all(self) -> torch.Tensor:
        """``[N, V]`` at every node."""
        if not all(self._have):
            self.rows(range(self.shape[0]))
        return self._filled

    @property
    def _filled(self) -> torch.Tensor:
        """The rows computed so far, ``[N, V]``: made with the first row computed, and read only after it."""
        assert self._full is not None, "no row is computed yet"
        return self._full


def as_node_logits(value: NodeLogits | torch.Tensor) -> NodeLogits:
    """:meth:`NodeLogits.of`, as the converter of the ``logits`` fields that take either."""
    return NodeLogits.of(value)
