"""The target's logits at the nodes of one verified tree, computed as they are needed.

The LM head is a fifth of a small model's work per token, and a walk down a verified tree
reads the logits of only the nodes it reaches: the root and the accepted path (a greedy walk,
only their argmax, which :mod:`specmix.screened_head` finds more cheaply still). When the
target's logits are its output embedding applied to its decoder's last hidden state
(checked once per model, :meth:`specmix.Target.lazy_head`), the target keeps those hidden
states and the head runs on the rows asked for, a few at a time; any other model's logits
come whole from its forward, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from specmix.screened_head import ScreenedHead

MAX_WIDTH = 8
"""The most rows :func:`head_width` considers for one call of the head."""


@torch.no_grad()
def head_width(head: torch.nn.Module, repeats: int = 5, slack: float = 1.25) -> int:
    """How many rows one call of ``head`` takes for about the price of one: the most, up to :data:`MAX_WIDTH`,
    whose fastest of ``repeats`` calls costs at most ``slack`` times one row's.

    Kernels change at sizes of their own (on a two-core CPU, four rows of a large head cost
    twice what three do), so the width is measured, not assumed.
    """
    weight = head.weight
    rows = torch.zeros(MAX_WIDTH, weight.shape[1], dtype=weight.dtype, device=weight.device)
    best = [float("inf")] * (MAX_WIDTH + 1)
    for _ in range(repeats):
        for width in range(1, MAX_WIDTH + 1):
            if weight.device.type == "cuda":
                torch.cuda.synchronize(weight.device)
            start = time.perf_counter()
            head(rows[:width])
            if weight.device.type == "cuda":
                torch.cuda.synchronize(weight.device)
            best[width] = min(best[width], time.perf_counter() - start)
    return max(width for width in range(1, MAX_WIDTH + 1) if best[width] <= slack * best[1])


class NodeLogits:
    """Logits ``[N, V]`` at a tree's nodes, whole (:meth:`of` a tensor) or per row (:meth:`lazy`)."""

    def __init__(self, rows: int, vocab: int, full: torch.Tensor | None = None,
                 final: torch.Tensor | None = None, head: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 width: int = 1, screen: ScreenedHead | None = None):
        self.shape = (rows, vocab)
        self.width = width
        """How many rows one call of the head takes for about the price of one: a reader asking for a row
        may bring ``width - 1`` more with it."""
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
             width: int = 1, screen: ScreenedHead | None = None) -> NodeLogits:
        """Logits ``head(final[i])`` for each row ``i`` of ``final [N, D]``, computed when first asked for
        (``width``: see :attr:`width`; ``screen``: a cheaper exact argmax of ``head``, used when a row's argmax is
        asked for before the row)."""
        return cls(final.shape[0], vocab, final=final, head=head, width=width, screen=screen)

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
            fresh = self._head(self._final[torch.tensor(missing, device=self._final.device)])
            if self._full is None:
                self._full = fresh.new_empty(self.shape)
            self._full[missing] = fresh
            for node in missing:
                self._have[node] = True
        return self._full[list(nodes)]

    def __getitem__(self, node: int) -> torch.Tensor:
        """``[V]`` at ``node``, as a row of a logits tensor would be."""
        return self.row(node)

    def row(self, node: int, along: Sequence[int] = ()) -> torch.Tensor:
        """``[V]`` at ``node``; when it must be computed, the rows ``along`` (where a walk may go next) come with it."""
        if not self._have[node]:
            self.rows([node, *along])
        return self._full[node]

    def argmax(self, node: int, along: Sequence[int] = ()) -> int:
        """The argmax of ``node``'s row, screened without the row where that is cheaper; when the row must be
        computed, the rows ``along`` come with it (as in :meth:`row`)."""
        if node not in self._argmax:
            choice = None
            if not self._have[node] and self._screen is not None:
                choice = self._screen.argmax(self._final[node])
            self._argmax[node] = int(self.row(node, along).argmax()) if choice is None else choice
        return self._argmax[node]

    def chosen(self) -> dict[int, int]:
        """The argmax at every node where it is known so far (its row computed or its argmax screened), by node."""
        pending = [node for node, have in enumerate(self._have) if have and node not in self._argmax]
        if pending:  # one reduction over the computed rows, not one per row
            self._argmax.update(zip(pending, self._full[pending].argmax(dim=-1).tolist()))
        return dict(sorted(self._argmax.items()))

    def all(self) -> torch.Tensor:
        """``[N, V]`` at every node."""
        if not all(self._have):
            self.rows(range(self.shape[0]))
        return self._full
