"""Calibrating draft scores online: how often the target continues a verified node.

Drafters without a model of their own (n-gram lookup, pools of earlier predictions)
have counts but no probabilities. A selector that weighs acceptance against forward
time needs probabilities, so such drafters learn them from verdicts as they go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping

from specmix.errors import ConfigurationError
from specmix.sizing.estimate import BetaOdds
from specmix.values import Verdict


class ContinuationOdds:
    """Per key, the chance that the target accepts one of a verified node's children.

    Each verdict adds evidence for every node the walk reached that had children: a
    success if the walk went on below it. The estimate is the posterior mean under a
    Beta prior with mean ``prior`` worth ``weight`` observations.

    ``priors`` may give some keys a prior mean of their own (say, measured offline on
    held-out text); the others start from ``prior``.

    Two options keep the estimate exploring, so that a bad stretch early in a generation
    does not switch drafting off for good (when nothing is verified, no evidence comes
    back): ``explore`` adds that many standard deviations of the posterior to the mean
    (an optimistic estimate that shrinks as evidence accumulates), and ``memory`` keeps
    only about that many recent observations per key (older ones fade geometrically).
    """

    def __init__(self, prior: float = 0.5, weight: float = 2.0, explore: float = 0.0, memory: float | None = None,
                 priors: Mapping[Hashable, float] | None = None):
        if not 0 < prior < 1 or weight <= 0:
            raise ConfigurationError(f"prior must lie in (0, 1) and weight be positive, got {prior} and {weight}")
        outside = [key for key, mean in (priors or {}).items() if not 0 < mean < 1]
        if outside:
            raise ConfigurationError(f"priors must lie in (0, 1); the ones for {outside[:3]} do not")
        if explore < 0 or (memory is not None and memory <= 1):
            raise ConfigurationError(f"explore must be >= 0 and memory > 1, got {explore} and {memory}")
        self.prior, self.priors = prior, dict(priors or {})
        self.odds = BetaOdds(weight=weight, explore=explore, memory=memory)

    def reset(self) -> None:
        """Forget all evidence (a new generation starts)."""
        self.odds.reset()

    def probability(self, key: Hashable) -> float:
        return self.odds.estimate(key, prior=self.priors.get(key, self.prior))

    def logprob(self, key: Hashable) -> float:
        return math.log(self.probability(key))

    def fade(self) -> None:
        """Let every key's evidence fade by one observation's worth with no new one (a step spent not drafting),
        so that a drafter that stopped gets tried again in time."""
        self.odds.fade()

    def evidence(self, key: Hashable) -> tuple[float, float]:
        """How often the target went on under ``key``, and how often it was tried (both fading)."""
        return self.odds.evidence(key)

    @property
    def evidence_by_key(self) -> dict[Hashable, tuple[float, float]]:
        """The evidence under every key observed since the last reset."""
        return {key: self.odds.evidence(key) for key in self.odds.counts}

    def count(self, key: Hashable, continued: bool) -> None:
        """One observation under ``key``: the target went on (or not)."""
        self.odds.record(key, continued)

    def record(self, verdict: Verdict, key: Callable[[int], Hashable]) -> None:
        """Count the reached nodes of ``verdict.tree`` that had children, under ``key(node)``."""
        reached = (0, *verdict.path)
        for position, node in enumerate(reached):
            if verdict.tree.children[node]:
                self.count(key(node), position + 1 < len(reached))
