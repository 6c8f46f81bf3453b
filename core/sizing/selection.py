"""Choosing nodes by their chance of being accepted: the rule every reach-based selector shares."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specmix.errors import ConfigurationError
from specmix.interfaces import Selector
from specmix.sizing.calibration import DepthScale
from specmix.sizing.cost import CostCurve
from specmix.tree import TokenTree
from specmix.values import Proposal, StepContext, Verdict


def most_reached(reach: Sequence[float], cost: CostCurve | None, budget: int | None = None, extra_tokens: int = 0,
                 rate: float | None = None) -> list[int]:
    """Node indices to keep (root first): the best by ``reach``, as many as ``budget`` or as pay on ``cost``
    (at ``rate`` tokens per second where given, see :meth:`CostCurve.best_size`).

    ``reach[0]`` is the root's. Reach must never grow down a path; then every best-first
    prefix is prefix-closed (ties keep index order, which puts parents first).
    """
    order = sorted(range(1, len(reach)), key=lambda i: -float(reach[i]))
    gains = [float(reach[i]) for i in order]
    if budget is not None:
        count = min(budget, len(gains))
    else:
        assert cost is not None, "sized by the cost curve, a selector needs it (needs_cost_curve)"
        count = cost.best_size(gains, extra_tokens=extra_tokens, rate=rate)
    return [0, *order[:count]]


class ReachSelector(Selector):
    """A selector that keeps the nodes most likely to be reached, as many as ``budget`` or as pay on the cost curve.

    Subclasses say how likely each node is to be reached (:meth:`reach`); reach must
    never grow down a path. Riders ride in the same forward, so they count in its size.

    Sized by the cost curve, it prices nodes on what the target takes rather than on what
    the scores claim: each node's chance of following its parent is calibrated online from
    the verdicts on earlier trees (:class:`~specmix.sizing.calibration.DepthScale`: the claims at
    each depth scaled by what the target took of them), unless the scores are acceptance odds already
    (``Proposal.calibrated``, see :meth:`learns`) or ``calibrate`` is off. On MT-bench
    (default model, greedy) the diffusion drafter's trees as ``ddtree`` and ``taps`` kept
    them were expected to bring about twice the tokens the target accepted, so trees sized
    on the claims verified more than paid.
    """

    def __init__(self, budget: int | None = None, calibrate: bool = True, calibration_memory: float | None = 256.0):
        if budget is not None and budget < 0:
            raise ConfigurationError(f"budget must be >= 0 nodes, got {budget}")
        self.budget = budget
        self.calibration = DepthScale(calibration_memory) if calibrate else None
        """The odds learnt from verdicts, kept across generations: how a scorer's claims fare is a property of the
        scorer and the target more than of one prompt."""
        self._claims: tuple[TokenTree, list[tuple[int, float]]] | None = None
        """The tree chosen this step and each of its nodes' (depth, claim), for observe."""

    @property
    def needs_cost_curve(self) -> bool:  # type: ignore[override]  # Component's is a plain attribute
        return self.budget is None

    def reach(self, tree: TokenTree, proposal: Proposal) -> torch.Tensor:
        """Each node's chance ``[N]`` of being reached (1 at the root)."""
        raise NotImplementedError

    def learns(self, proposal: Proposal) -> bool:
        """Whether this step's reach is calibrated against verdicts: unless the proposal's scores are acceptance odds
        already. A selector whose reach is its own (a trained scorer) says always."""
        return not proposal.calibrated

    def select(self, tree: TokenTree, proposal: Proposal, ctx: StepContext) -> TokenTree:
        self._claims = None
        if tree.size == 1:
            return tree
        reach = self.reach(tree, proposal).tolist()
        calibrating = self.calibration is not None and self.budget is None and self.learns(proposal)
        if calibrating:
            reach, claims = self._calibrated(tree, reach)
        keep = most_reached(reach, ctx.cost, self.budget, proposal.rider_count, ctx.rate)
        chosen = tree.subtree(keep)
        if calibrating:
            self._claims = chosen, [claims[node] for node in sorted(keep)]
        return chosen

    def _calibrated(self, tree: TokenTree, reach: list[float]) -> tuple[list[float], list[tuple[int, float]]]:
        """Reach on the calibrated scale, and each node's depth and claimed chance of following its parent."""
        assert self.calibration is not None, "called only while calibrating"
        calibrated, claims = [1.0] * tree.size, [(0, 1.0)] * tree.size
        for node in range(1, tree.size):
            parent, depth = tree.parent_list[node], tree.depth_list[node]
            claimed = min(1.0, reach[node] / reach[parent]) if reach[parent] > 0 else 0.0
            claims[node] = depth, claimed
            calibrated[node] = calibrated[parent] * self.calibration.estimate(depth, claimed)
        return calibrated, claims

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        """Every verified node whose parent the walk reached counts for its depth: taken if the walk went through it."""
        if self._claims is None:
            return
        chosen, claims = self._claims
        assert self.calibration is not None, "claims are kept only while calibrating"
        index = {(chosen.parent_list[node], chosen.token_list[node]): node for node in range(1, chosen.size)}
        tree, reached, mapped = verdict.tree, {0, *verdict.path}, [0]
        for node in range(1, tree.size):
            key = (mapped[tree.parent_list[node]], tree.token_list[node])
            if key not in index:  # not the tree this selector chose: nothing to learn from
                break
            mapped.append(index[key])
            if tree.parent_list[node] in reached:
                depth, claimed = claims[mapped[node]]
                self.calibration.record(depth, claimed, node in reached)
        self._claims = None
