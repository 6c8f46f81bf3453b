"""Choosing nodes by their chance of being accepted: the rule every reach-based selector shares."""

from __future__ import annotations

from collections.abc import Sequence

from specmix.cost import CostCurve


def most_reached(reach: Sequence[float], cost: CostCurve | None, budget: int | None = None, extra_tokens: int = 0) -> list[int]:
    """Node indices to keep (root first): the best by ``reach``, as many as ``budget`` or as pay on ``cost``.

    ``reach[0]`` is the root's. Reach must never grow down a path; then every best-first
    prefix is prefix-closed (ties keep index order, which puts parents first).
    """
    order = sorted(range(1, len(reach)), key=lambda i: -float(reach[i]))
    gains = [float(reach[i]) for i in order]
    count = min(budget, len(gains)) if budget is not None else cost.best_size(gains, extra_tokens=extra_tokens)
    return [0, *order[:count]]
