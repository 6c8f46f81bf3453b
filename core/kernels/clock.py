"""Wall-clock seconds: the fastest of repeated calls, for choosing between kernels."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def fastest(calls: Sequence[Callable[[], object]], repeats: int,
            timer: Callable[[], float] = time.perf_counter) -> list[float]:
    """Per call, the fastest of ``repeats`` timed calls after one that warms up, the calls taking turns in each round
    so that a passing disturbance of the machine slows them alike; ``timer`` reads the seconds."""
    best = [float("inf")] * len(calls)
    for _ in range(repeats + 1):
        for index, call in enumerate(calls):
            start = timer()
            call()
            best[index] = min(best[index], timer() - start)
    return best
