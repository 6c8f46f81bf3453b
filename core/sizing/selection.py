"""Choosing nodes by their chance of being accepted: the rule every reach-based selector shares."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specmix.errors import ConfigurationError
from specmix.interfaces import Selector
from specmix.sizing.cost import CostCurve
from specmix.tree import TokenTree
from specmix.values import Proposal, StepContext


def most_reached(reach: Sequence[float], cost: CostCurve | None, budget: int | None = None,
                 extra_tokens: int = 0) -> list[int]:
    """Node indices to keep (root first): the best by ``reach``, as many as ``budget`` or as pay on ``cost``.

    ``reach[0]`` is the root's. Reach must never grow down a path; then every best-first
    prefix is prefix-closed (ties keep index order, which puts parents first).
    """
    order = sorted(range(1, len(reach)), key=lambda i: -float(reach[i]))
    gains = [float(reach[i]) for i in order]
    if budget is not None:
        count = min(budget, len(gains))
    else:
        assert cost is not None, "sized by the cost curve, a selector needs it (needs_cost_curve)"
        count = cost.best_size(gains, extra_tokens=extra_tokens)
    return [0, *order[:count]]


class ReachSelector(Selector):
    """A selector that keeps the nodes most likely to be reached, as many as ``budget`` or as pay on the cost curve.

    Subclasses say how likely each node is to be reached (:meth:`reach`); reach must
    never grow down a path. Riders ride in the same forward, so they count in its size.
    """

    def __init__(self, budget: int | None = None):
        if budget is not None and budget < 0:
            raise ConfigurationError(f"budget must be >= 0 nodes, got {budget}")
        self.budget = budget

    @property
    def needs_cost_curve(self) -> bool:  # type: ignore[override]  # Component's is a plain attribute
        return self.budget is None

    def reach(self, tree: TokenTree, proposal: Proposal) -> torch.Tensor:
        """Each node's chance ``[N]`` of being reached (1 at the root)."""
        raise NotImplementedError

    def select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        if tree.size == 1:
            return tree
        reach = self.reach(tree, proposal).tolist()
        return tree.subtree(most_reached(reach, ctx.cost, self.budget, proposal.rider_count))
