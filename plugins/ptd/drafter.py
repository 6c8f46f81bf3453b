"""The ``ptd`` drafter (Progressive Tree Drafting): the target drafts for itself, training-free.

Each step the progressive draft tree rides in the verification forward as riders; the
target's argmax at each rider grows the tree, and every rider's subtree is merged into
a pool of continuations keyed by its token. The candidate tree for the next step is the
pool's trie for the last committed token, which also learns the target's argmax at every
verified node whose logits the verifier computed. Candidates are deterministic (argmaxes),
so sampling uses sample-and-match and stays exact.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from specmix import Capability, Drafter, Proposal, StepContext, Verdict
from specmix.plugins.ptd.draft_tree import ProgressiveDraftTree
from specmix.plugins.ptd.pool import CandidatePool
from specmix.plugins.ptd.rider_budget import RiderBudget
from specmix.sizing.odds import ContinuationOdds
from specmix.values import HiddenStates


class PTDDrafter(Drafter):
    """Options (defaults chosen on a 2-core CPU, where T(N) rises steeply past N = 1; see the README):

    ``spine`` spine subtrees (4); ``max_children`` per draft node (2); ``max_depth`` of a
    spine subtree before it steps (6); ``max_riders`` draft nodes per forward (8);
    ``linked_spine`` (True; False with ``max_children=1`` gives independent linear
    branches, the Self-Draft/lookahead ablation); ``pool_nodes`` per key (60);
    ``candidate_depth`` (8); ``seed`` for the seed chains (0); ``prior`` chance that the
    target continues a candidate before any evidence (0.5); ``adaptive_riders`` (True):
    send 0, a quarter, half or all of ``max_riders`` riders, whichever has recently given the
    most tokens per second on the measured cost curve (:mod:`specmix.plugins.ptd.rider_budget`),
    so that PTD falls back to plain decoding where its riders do not pay.
    """

    produces = frozenset({Capability.TREE, Capability.RIDERS})
    consumes = frozenset({Capability.RIDER_LOGITS})
    calibrated = True  # its candidates' odds of going on are learnt from verdicts, as the lookup's are

    def __init__(self, spine: int = 4, max_children: int = 2, max_depth: int = 6, max_riders: int = 8,
                 linked_spine: bool = True, pool_nodes: int = 60, candidate_depth: int = 8, seed: int = 0,
                 prior: float = 0.5, adaptive_riders: bool = True) -> None:
        self.options: dict[str, Any] = dict(spine=spine, max_children=max_children, max_depth=max_depth, max_riders=max_riders,
                            linked_spine=linked_spine)
        self.pool_nodes, self.candidate_depth, self.seed = pool_nodes, candidate_depth, seed
        self.odds = ContinuationOdds(prior)
        self.draft = ProgressiveDraftTree(**self.options)
        arms = {0, max_riders // 4, max_riders // 2, max_riders} if adaptive_riders else {max_riders}
        self.budget = RiderBudget(arms)

    @property
    def needs_cost_curve(self) -> bool:  # type: ignore[override]  # Component's is a plain attribute
        return len(self.budget.arms) > 1

    def start(self, prompt: torch.Tensor, hidden: HiddenStates) -> None:
        self.draft = ProgressiveDraftTree(**self.options)
        self.draft.seed(prompt.tolist(), random.Random(self.seed))
        self.pool = CandidatePool(self.pool_nodes)
        self.odds.reset()
        self.budget.reset()
        self.sending = max(self.budget.arms)  # the rider count of the step being verified

    def propose(self, ctx: StepContext) -> Proposal:
        tree = self.pool.tree(ctx.root, ctx.vocab_size, min(self.candidate_depth, ctx.max_depth),
                              lambda depth: self.odds.logprob(depth > 1))
        self.sending = self.budget.choose() if ctx.cost is not None else max(self.budget.arms)
        return Proposal(tree=tree, riders=self.draft.riders(self.sending))

    def observe(self, verdict: Verdict, ctx: StepContext) -> None:
        tree, logits = verdict.tree, verdict.node_logits
        # What the target chose after every verified node where that is known (all of them, or the ones the walk
        # read where the head runs on those alone) extends the trie just verified.
        self.pool.add(tree.root, ([tree.token_list[i] for i in tree.path(node)] + [choice]
                                  for node, choice in logits.chosen().items()))
        if verdict.rider_logits is not None:
            sent = self.draft.sent
            self.draft.grow(verdict.rider_logits.argmax(dim=-1).tolist(), ctx.stop_ids)
            for node in sent:
                self.pool.add(node.token, node.paths())
        self.odds.record(verdict, lambda node: tree.depth_list[node] >= 1)
        if ctx.cost is not None:
            riders = 0 if verdict.rider_logits is None else verdict.rider_logits.shape[0]
            self.budget.record(self.sending, len(verdict.committed), tree.size + riders, ctx.cost)

