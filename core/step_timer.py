"""The wall-clock seconds of one decoding step, per part."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

PARTS = ("draft", "build", "select", "verify", "observe")
"""The parts of a step that :class:`~specmix.values.StepStats` reports."""


class StepTimer:
    """``with timer("draft"): ...`` adds the seconds to the part."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PARTS, 0.0)

    @contextlib.contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] += time.perf_counter() - start
