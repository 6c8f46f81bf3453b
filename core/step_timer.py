"""The wall-clock seconds of one decoding step: per part, per drafter, and the whole step."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

PARTS = ("draft", "build", "select", "verify", "observe")
"""The parts of a step that :class:`~specmix.values.StepStats` reports (a step that asks no drafter has no draft time)."""


class StepTimer:
    """``with timer("draft", drafter=0): ...`` adds the seconds to the part, and to that drafter's own spend."""

    def __init__(self, drafters: int):
        self.began = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self.spent = [0.0] * drafters
        """Per drafter, the seconds of its own calls (propose, build, observe)."""

    @contextlib.contextmanager
    def __call__(self, part: str, drafter: int | None = None) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[part] += elapsed
            if drafter is not None:
                self.spent[drafter] += elapsed

    def total(self) -> float:
        """Seconds since the step began."""
        return time.perf_counter() - self.began
