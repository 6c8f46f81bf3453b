"""The lossless properties, as plain functions that raise AssertionError on a violation."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import torch
from transformers import DynamicCache

from specmix import CostCurve, Decoder, DecodeSettings, Registry
from specmix.testing.drafters import KIT_DRAFTERS, KitDrafter, KitPlugin
from specmix.testing.models import kit_static, tiny_model, tolerance
from specmix.testing.reference import next_logits, reference_greedy, reference_sequence_probs

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from specmix import Target

CURVE = CostCurve(sizes=(1, 2, 4, 8, 16, 32, 64), seconds=(79, 112, 138, 140, 143, 162, 220))
"""The shape of T(N) for a 135M model on a 2-core CPU (ms); tests use it instead of timing anything."""


def kit_registry(extra_plugins: Iterable[object] = ()) -> Registry:
    """Installed plugins plus the kit's drafters plus ``extra_plugins``; a broken plugin is an error here."""
    return Registry.load(extra_plugins=(KitPlugin(), *extra_plugins), strict=True)


def make_decoder(registry: Registry, names: Mapping[str, str], model: PreTrainedModel, seed: int,
                 options: Mapping[str, Mapping] | None = None,
                 cost_curve: CostCurve = CURVE) -> Decoder:
    """A decoder for ``names`` (``"a+b"`` mixes drafters) with each component's ``test_options`` under
    ``options``; kit drafters get ``seed`` and the model as their oracle; ``cost_curve`` stands for T(N)."""
    merged: dict[str, dict] = {}
    kit: dict[str, object] = {}
    for kind, joined in names.items():
        parts = joined.split("+")
        for name in parts:
            prefix = f"{name}." if len(parts) > 1 else ""
            defaults = getattr(registry.get(kind, name).factory, "test_options", {})
            merged.setdefault(kind, {}).update({prefix + key: value for key, value in defaults.items()})
            if kind == "drafter" and name in KIT_DRAFTERS:
                kit.update({prefix + "seed": seed, prefix + "oracle": model})
    for kind, value in (options or {}).items():
        merged.setdefault(kind, {}).update(value)
    merged.setdefault("drafter", {}).update(kit)
    return Decoder(model, registry.compose(options=merged, **names), cost_curve=cost_curve, static=kit_static())


@attrs.frozen
class GreedyCase:
    family: str
    model_seed: int
    prompt: tuple[int, ...]
    settings: DecodeSettings
    drafter_seed: int


def check_cache_matches_rebuild(target: Target, model: PreTrainedModel, committed: Sequence[int]) -> None:
    """The compacted cache equals one built by a plain forward over all committed tokens but the last."""
    rebuilt = DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.tensor([list(committed[:-1])], device=model.device), use_cache=True,
              **{target._cache_keyword: rebuilt})
    assert target.length == len(committed) - 1, f"cache holds {target.length} tokens, expected {len(committed) - 1}"
    for index, (ours, theirs) in enumerate(zip(target.cache.layers, rebuilt.layers)):
        for name in ("keys", "values"):
            a, b = getattr(ours, name), getattr(theirs, name)
            close = tolerance(a.dtype)
            assert a.shape == b.shape and torch.allclose(a, b, atol=close, rtol=close), \
                f"layer {index} {name} differ from a rebuild"


def check_greedy_identical(registry: Registry, names: Mapping[str, str], case: GreedyCase,
                           options: Mapping[str, Mapping] | None = None,
                           check_cache: bool = True, cost_curve: CostCurve = CURVE) -> None:
    """Greedy output is token-for-token the target's own; optionally the cache is checked after every step."""
    model = tiny_model(case.family, case.model_seed)
    decoder = make_decoder(registry, names, model, case.drafter_seed, options, cost_curve)
    tokens: list[int] = []
    for step in decoder.stream(case.prompt, case.settings):
        tokens.extend(step.tokens)
        if check_cache and step.stop_reason is None:
            check_cache_matches_rebuild(decoder.target, model, [*case.prompt, *tokens])
    expected = reference_greedy(model, case.prompt, case.settings)
    if tokens != expected:
        assert_parting_at_a_rounding_tie(model, case.prompt, tokens, expected, decoder.composition.label)


def assert_parting_at_a_rounding_tie(model: PreTrainedModel, prompt: Sequence[int], ours: Sequence[int], expected: Sequence[int],
                                     label: str) -> None:
    """Fails unless greedy output ``ours`` parts from the target's ``expected`` only where the target's two
    candidates lie within its precision's rounding (never in fp64).

    In bf16 or fp32 on a GPU, a tree forward and the reference's full recomputation run other
    kernels and round differently, so a near-tie may go either way; from there the outputs are
    two different texts and are compared no further. Parting anywhere else is a real difference.
    """
    message = f"{label} gave {list(ours)}; the target alone gives {list(expected)}"
    at = next((i for i, (a, b) in enumerate(zip(ours, expected)) if a != b), None)
    assert at is not None and model.dtype != torch.float64, message
    logits = next_logits(model, [*prompt, *expected[:at]]).double()
    gap = float(logits[expected[at]] - logits[ours[at]])
    allowed = tolerance(model.dtype) * (1 + float(logits.abs().max()))
    assert gap <= allowed, (f"{message}: they part at token {at}, where the target prefers its own by {gap:.3g}, "
                            f"more than {str(model.dtype).removeprefix('torch.')} rounding ({allowed:.3g})")


def chi_square_p_value(observed: Mapping, expected_probs: Mapping, samples: int) -> float:
    """Pearson's test with cells of expected count < 5 pooled; the p-value of observing this or worse."""
    impossible = [seq for seq in observed if expected_probs.get(seq, 0.0) == 0.0]
    assert not impossible, f"sampled sequences the target can never produce: {impossible[:3]}"
    statistic, cells, pooled_obs, pooled_exp = 0.0, 0, 0.0, 0.0
    for seq, prob in expected_probs.items():
        expected = prob * samples
        if expected < 5:
            pooled_obs, pooled_exp = pooled_obs + observed.get(seq, 0), pooled_exp + expected
            continue
        statistic += (observed.get(seq, 0) - expected) ** 2 / expected
        cells += 1
    if pooled_exp > 0:
        statistic += (pooled_obs - pooled_exp) ** 2 / pooled_exp
        cells += 1
    dof = max(cells - 1, 1)
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def check_sampling_distribution(registry: Registry, names: Mapping[str, str], settings: DecodeSettings,
                                samples: int = 1500, length: int = 2, family: str = "llama",
                                options: Mapping[str, Mapping] | None = None,
                                alpha: float = 1e-4) -> float:
    """The first ``length`` sampled tokens follow the target's exact processed distribution (chi-square).

    Seeds are fixed, so the verdict is reproducible; ``alpha`` bounds the false alarm rate.
    """
    model = tiny_model(family, seed=7, vocab_size=6, scale=0.6)
    prompt = (2, 3, 4)
    run = attrs.evolve(settings, max_new_tokens=length, stop_ids=())
    exact = reference_sequence_probs(model, prompt, run, length)
    counts: collections.Counter[tuple[int, ...]] = collections.Counter()
    # One decoder for every sample, as a user's would be: drafters keep no state past start();
    # the kit's drafters draw their random trees from a new seed each time.
    decoder = make_decoder(registry, names, model, 0, options)
    kit = [slot.component for slot in decoder.composition.drafters if isinstance(slot.component, KitDrafter)]
    for seed in range(samples):
        for drafter in kit:
            drafter.seed = seed
        counts[decoder.generate(prompt, attrs.evolve(run, seed=seed)).tokens] += 1
    p_value = chi_square_p_value(counts, exact, samples)
    assert p_value > alpha, f"sampled sequences do not follow the target (chi-square p = {p_value:.2e})"
    return p_value
