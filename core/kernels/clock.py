"""Wall-clock seconds: of the parts of one decoding step, and the fastest of repeated calls."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence


class StepClock:
    """``with clock("draft"): ...`` adds the seconds that part took; ``seconds`` maps parts to their totals."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - start


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
