"""Hypothesis strategies shared by the properties."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from specmix import DecodeSettings
from specmix.testing.models import FAMILIES
from specmix.testing.properties import GreedyCase

PROFILE_VARIABLE = "SPECMIX_HYPOTHESIS_PROFILE"
PROFILES: dict[str, dict[str, Any]] = {
    "ci": dict(max_examples=25, derandomize=True),
    "dev": dict(max_examples=8),
    "dry": dict(max_examples=2, derandomize=True),
    "thorough": dict(max_examples=300),
}
for _name, _values in PROFILES.items():
    settings.register_profile(
        f"specmix-{_name}",
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
        **_values,
    )


def kit_settings() -> settings:
    """The profile named by ``$SPECMIX_HYPOTHESIS_PROFILE`` (``ci``, ``dev``, ``dry`` or ``thorough``; default ``ci``)."""
    return settings.get_profile(f"specmix-{os.environ.get(PROFILE_VARIABLE, 'ci').removeprefix('specmix-')}")


@st.composite
def greedy_cases(draw: st.DrawFn, vocab_size: int = 32) -> GreedyCase:
    """A tiny model, a prompt, length and stop ids that sometimes cut generation short, and a drafter seed."""
    prompt = draw(st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=40))
    stops = draw(st.one_of(
        st.none(),  # the model's EOS
        st.just(()),
        st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=3).map(tuple),
    ))
    settings_ = DecodeSettings(max_new_tokens=draw(st.integers(1, 40)), stop_ids=stops)
    return GreedyCase(
        family=draw(st.sampled_from(sorted(FAMILIES))),
        model_seed=draw(st.integers(0, 2)),
        prompt=tuple(prompt),
        settings=settings_,
        drafter_seed=draw(st.integers(0, 1 << 16)),
    )
