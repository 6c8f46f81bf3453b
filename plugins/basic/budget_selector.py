"""The ``budget`` selector: the best prefix-closed subtree by draft score, sized by the cost curve or a fixed budget."""

import torch

from specmix import Capability, ConfigurationError, Proposal, ReachSelector, TokenTree


class BudgetSelector(ReachSelector):
    """Keeps the nodes most likely to be reached, best first.

    A node's reach is its path probability under the drafter (``exp`` of cumulative
    log-probs). Trees without draft scores get ``prior / siblings`` per edge. Reach never
    grows down a path, so any best-first prefix is prefix-closed. The node count is
    ``budget`` if given, else the count that maximises expected tokens per second on the
    measured cost curve, riders included in the forward size.
    """

    uses = frozenset({Capability.LOGPROBS})

    def __init__(self, budget: int | None = None, prior: float = 0.5) -> None:
        super().__init__(budget)
        if not 0 < prior <= 1:
            raise ConfigurationError(f"prior must lie in (0, 1], got {prior}")
        self.prior = prior

    def reach(self, tree: TokenTree, proposal: Proposal | None = None) -> torch.Tensor:
        cumulative = tree.cumulative_logprobs()
        if cumulative is not None:
            return cumulative.exp()
        reach = torch.ones(tree.size, dtype=torch.float64)
        for node in range(1, tree.size):
            parent = tree.parent_list[node]
            reach[node] = reach[parent] * self.prior / len(tree.children[parent])
        return reach
