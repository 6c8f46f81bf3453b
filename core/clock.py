"""Wall-clock seconds of the parts of one decoding step."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


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
