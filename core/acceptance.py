"""Lossless walks down a verified tree: greedy, sample-and-match, and recursive rejection.

Each returns ``(path, bonus)``: accepted node indices below the root and the token the
target emits after them. ``probs_at(node)`` gives the target's processed distribution
after that node's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from specmix.errors import MalformedTreeError
from specmix.tree import TokenTree

ProbsAt = Callable[[int], torch.Tensor]


class Argmaxes(Protocol):
    """The target's argmax after each node's path, by node index (a sequence, or rows read on demand)."""

    def __getitem__(self, node: int, /) -> int: ...


def _child_with_token(tree: TokenTree, node: int, token: int) -> int | None:
    for child in tree.children[node]:
        if tree.token_list[child] == token:
            return child
    return None


def _draw(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def greedy_walk(tree: TokenTree, argmax: Argmaxes) -> tuple[list[int], int]:
    """Follow the child equal to the target's argmax until none is."""
    path, node = [], 0
    while (child := _child_with_token(tree, node, argmax[node])) is not None:
        path.append(child)
        node = child
    return path, argmax[node]


def sample_walk(tree: TokenTree, probs_at: ProbsAt, generator: torch.Generator | None) -> tuple[list[int], int]:
    """Draw from the target at each node and descend while the draw is a child.

    Exact for any candidate set, since every emitted token is a fresh draw from the
    target given the tokens before it.
    """
    path: list[int] = []
    node = 0
    while True:
        token = _draw(probs_at(node), generator)
        child = _child_with_token(tree, node, token)
        if child is None:
            return path, token
        path.append(child)
        node = child


def rejection_walk(tree: TokenTree, probs_at: ProbsAt, generator: torch.Generator | None) -> tuple[list[int], int]:
    """Recursive rejection for children drawn from ``tree.draft_q`` without replacement, in index order.

    Child ``k`` was drawn from q with the earlier siblings removed; it is accepted with
    probability min(1, p/q_k), else p becomes norm(max(0, p - q_k)) and the next child
    is tried. When every child is rejected the bonus is drawn from what remains of p.
    """
    if tree.draft_q is None:
        raise MalformedTreeError("recursive rejection needs the draft distributions (tree.draft_q)")
    path: list[int] = []
    node = 0
    while True:
        p = probs_at(node)
        q = tree.draft_q[node].to(p.dtype).clamp_min(0)
        accepted = None
        for child in tree.children[node]:
            token = tree.token_list[child]
            if q[token] <= 0:
                raise MalformedTreeError(f"node {child} (token {token}) has zero draft probability but was drawn from q")
            q_k = q / q.sum()
            if torch.rand((), generator=generator, dtype=p.dtype) * q_k[token] < p[token]:
                accepted = child
                break
            residual = (p - q_k).clamp_min(0)
            if residual.sum() > 0:
                p = residual / residual.sum()
            q = q.clone()
            q[token] = 0
        if accepted is None:
            return path, _draw(p, generator)
        path.append(accepted)
        node = accepted
