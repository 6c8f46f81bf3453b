"""The tokens per second a decoder's steps bring: what a verified position must earn at the margin.

A selector that sizes each step for that step's own best tokens per second,
``(1 + E[tokens]) / T(N)``, asks the nodes of a rich step (a long lookup match, where many
tokens are likely) to beat that step's high rate and lets the nodes of a poor step off with
its low one. Tokens per second over a generation is a ratio of sums, and it is highest when
every step maximises its surplus at the overall rate ``R``, ``1 + E[tokens] - R * T(N)``
(Dinkelbach's method for ratio objectives): a node is then verified exactly when the tokens
it is expected to bring beat ``R`` times what it adds to the forward, in every step alike.
``R`` is estimated as the decoder's recent tokens per second over whole steps (drafting, the
LM head and the rest of a step included), kept across generations like the step costs.
"""

from __future__ import annotations

from specmix.sizing.estimate import DecayingAverage


class StepRate:
    """Committed tokens per second over about the last ``memory`` steps (older ones fade geometrically)."""

    def __init__(self, memory: float | None = 64.0):
        self.per_second = DecayingAverage(memory)  # tokens over seconds
        self.step = DecayingAverage(memory)  # seconds per step

    def record(self, tokens: int, seconds: float) -> None:
        """One step committed ``tokens`` in ``seconds``."""
        self.per_second.add(tokens, weight=seconds)
        self.step.add(seconds)

    @property
    def rate(self) -> float | None:
        """Recent tokens per second (None before the first step)."""
        return self.per_second.mean

    @property
    def step_seconds(self) -> float | None:
        """A recent step's mean time (None before the first step)."""
        return self.step.mean
