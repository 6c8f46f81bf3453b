"""``ConformanceSuite``: subclass it, pin the components you ship, and pytest runs every property on them."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given

from specmix import Composition, DecodeSettings, Registry
from specmix.testing.properties import GreedyCase, check_greedy_identical, check_sampling_distribution, kit_registry
from specmix.testing.strategies import greedy_cases, kit_settings

SAMPLING = (
    DecodeSettings(temperature=0.8),
    DecodeSettings(temperature=1.0, top_k=3),
    DecodeSettings(temperature=0.7, top_p=0.8),
)


class ConformanceSuite:
    """Every registered composition that fits and uses the pinned components must be lossless.

    Class attributes: ``drafter``, ``builder``, ``selector``, ``verifier`` pin a component
    by name (None: every registered one); ``options`` gives options per kind;
    ``extra_plugins`` are plugin objects to register for the suite; ``sampling_samples``
    is the sample count of each chi-square test. The ``specmix`` pytest plugin
    parametrises ``composition`` with every fitting composition. ``mixes`` lists compositions of
    several drafters to check (``{"drafter": "a+b", "builder": "drafted+chain", ...}``); a
    suite that pins nothing and lists mixes checks those alone.
    """

    drafter: str | None = None
    builder: str | None = None
    selector: str | None = None
    verifier: str | None = None
    options: Mapping[str, Mapping] = {}
    mixes: tuple[Mapping[str, str], ...] = ()
    extra_plugins: tuple = ()
    sampling_samples: int = 800

    @classmethod
    def registry(cls) -> Registry:
        return kit_registry(cls.extra_plugins)

    @classmethod
    def composition_names(cls) -> list[dict[str, str]]:
        pinned = {kind: getattr(cls, kind) for kind in ("drafter", "builder", "selector", "verifier")}
        registry = cls.registry()
        singles = [] if cls.mixes and not any(pinned.values()) else list(registry.compositions(options=cls.options, **pinned))
        return [_names(composition) for composition in singles] + [dict(names) for names in cls.mixes]


    @given(case=greedy_cases())
    @kit_settings()
    def test_greedy_identical(self, composition: dict[str, str], case: GreedyCase) -> None:
        check_greedy_identical(self.registry(), composition, case, self.options)

    def test_sampling_distribution(self, composition: dict[str, str]) -> None:
        for index, settings in enumerate(SAMPLING):
            check_sampling_distribution(self.registry(), composition, settings,
                                        samples=self.sampling_samples, family=("llama", "qwen3")[index % 2],
                                        options=self.options)


def _names(composition: Composition) -> dict[str, str]:
    join = lambda slots: "+".join(slot.name for slot in slots)  # noqa: E731
    return {"drafter": join(composition.drafters), "builder": join(composition.builders),
            "selector": composition.selector.name, "verifier": composition.verifier.name}
