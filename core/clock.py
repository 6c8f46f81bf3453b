"""Wall-clock seconds: of the parts of one decoding step, and the fastest of repeated calls."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator


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


def fastest(call: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` timed calls of ``call``, after one that warms up."""
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best
