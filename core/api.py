"""``specmix.load``: names in, a ready decoder out (model loading, plugin registry and engine together)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

from specmix.composition import KINDS
from specmix.engine import Decoder
from specmix.errors import ConfigurationError, PluginError, SpecmixWarning
from specmix.models.loading import load_model
from specmix.registry import Registry
from specmix.sizing.cost import CostCurve

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def load(
    model: str | os.PathLike | PreTrainedModel | None = None,
    method: str | None = None,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    dtype: str = "float32",
    cache: str | os.PathLike | None = None,
    device: str | None = None,
    registry: Registry | None = None,
    options: Mapping[str, Mapping] | None = None,
    cost_curve: CostCurve | None = None,
    static: bool | None = None,
    fast: bool | None = None,
    **components: str,
) -> Decoder:
    """A decoder with text in and out.

    ``model`` is an HF id, a local directory or ``.gguf`` file, an already loaded model
    (then pass its ``tokenizer``), or None for the embedded default model
    (SmolLM2-135M-Instruct, converted once into the cache directory). ``method`` names a
    preset (default: the highest-ranked method offered as default whose components run on
    this model, unless every component is named; a warning says when one gave way);
    ``drafter=``, ``builder=``, ``selector=``, ``verifier=`` name components that replace
    the preset's, and ``options`` gives options per kind: ``{"selector": {"budget": 8}}``.
    ``cache`` is where the converted default model and measured cost curves are kept.
    ``fast`` turns specmix's fast CPU paths on or off; by default they apply to a model loaded here, and a model passed
    in is left exactly as it was (see :class:`Decoder`).
    """
    registry = registry or Registry.load()
    named = method is not None or all(components.get(kind) for kind in KINDS)
    candidates = [method] if named else registry.default_methods()
    composition = registry.compose(candidates[0], options=options, **components)  # names and options fail fast
    if model is None or isinstance(model, (str, os.PathLike)):
        model, tokenizer = load_model(model, dtype=dtype, cache=cache, device=device)
    for name, fallback in zip(candidates, [*candidates[1:], None]):
        try:
            return Decoder(model, composition, tokenizer=tokenizer, cost_curve=cost_curve, static=static,
                           cache_dir=cache, fast=fast)
        except (ConfigurationError, PluginError) as exc:
            # A default whose parts do not fit this target (a drafter trained for another) gives way to the next.
            if fallback is None or not _unfit(exc):
                raise
            warnings.warn(f"the default method '{name}' does not run on this model ({exc}); running '{fallback}'",
                          SpecmixWarning, stacklevel=2)
            composition = registry.compose(fallback, options=options, **components)
    raise AssertionError("unreachable: the last candidate has no fallback, so it returned or raised")


def _unfit(exc: Exception) -> bool:
    """Whether ``exc`` says a component does not fit the target, as opposed to a fault."""
    return isinstance(exc, ConfigurationError) or isinstance(exc.__cause__, ConfigurationError)
