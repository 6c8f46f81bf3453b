"""Calibrating draft scores online: how often the target continues a verified node.

Drafters without a model of their own (n-gram lookup, pools of earlier predictions)
have counts but no probabilities. A selector that weighs acceptance against forward
time needs probabilities, so such drafters learn them from verdicts as they go.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable

from specmix.errors import ConfigurationError
from specmix.values import Verdict


class ContinuationOdds:
    """Per key, the chance that the target accepts one of a verified node's children.

    Each verdict adds evidence for every node the walk reached that had children: a
    success if the walk went on below it. The estimate is the posterior mean under a
    Beta prior with mean ``prior`` worth ``weight`` observations.
    """

    def __init__(self, prior: float = 0.5, weight: float = 2.0):
        if not 0 < prior < 1 or weight <= 0:
            raise ConfigurationError(f"prior must lie in (0, 1) and weight be positive, got {prior} and {weight}")
        self.prior, self.weight = prior, weight
        self.reset()

    def reset(self) -> None:
        """Forget all evidence (a new generation starts)."""
        self.counts: dict[Hashable, list[int]] = defaultdict(lambda: [0, 0])  # key -> [continued, tried]

    def logprob(self, key: Hashable) -> float:
        continued, tried = self.counts[key]
        return math.log((continued + self.prior * self.weight) / (tried + self.weight))

    def record(self, verdict: Verdict, key: Callable[[int], Hashable]) -> None:
        """Count the reached nodes of ``verdict.tree`` that had children, under ``key(node)``."""
        reached = (0, *verdict.path)
        for position, node in enumerate(reached):
            if verdict.tree.children[node]:
                counts = self.counts[key(node)]
                counts[0] += position + 1 < len(reached)
                counts[1] += 1
