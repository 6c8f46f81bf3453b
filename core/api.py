"""``specmix.load``: names in, a ready decoder out (model loading, plugin registry and engine together)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from specmix.composition import KINDS
from specmix.cost import CostCurve
from specmix.engine import Decoder
from specmix.loading import load_model
from specmix.registry import Registry


def load(
    model=None,
    method: str | None = None,
    *,
    tokenizer=None,
    dtype: str = "float32",
    cache: str | os.PathLike | None = None,
    device: str | None = None,
    registry: Registry | None = None,
    options: Mapping[str, Mapping] | None = None,
    cost_curve: CostCurve | None = None,
    static: bool | None = None,
    **components: str,
) -> Decoder:
    """A decoder with text in and out.

    ``model`` is an HF id, a local directory or ``.gguf`` file, an already loaded model
    (then pass its ``tokenizer``), or None for the embedded default model
    (SmolLM2-135M-Instruct, converted once into the cache directory). ``method`` names a
    preset (default: the installed default method, unless every component is named);
    ``drafter=``, ``builder=``, ``selector=``, ``verifier=`` name components that replace
    the preset's, and ``options`` gives options per kind: ``{"selector": {"budget": 8}}``.
    ``cache`` is where the converted default model and measured cost curves are kept.
    """
    registry = registry or Registry.load()
    if method is None and not all(components.get(kind) for kind in KINDS):
        method = registry.default_method()
    composition = registry.compose(method, options=options, **components)  # names and options first: they fail fast
    if model is None or isinstance(model, (str, os.PathLike)):
        model, tokenizer = load_model(model, dtype=dtype, cache=cache, device=device)
    return Decoder(model, composition, tokenizer=tokenizer, cost_curve=cost_curve, static=static, cache_dir=cache)
