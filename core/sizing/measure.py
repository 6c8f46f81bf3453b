"""Measuring the cost curve T(N) of a target on the device in use, and keeping it on disk."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from specmix.errors import SpecmixWarning
from specmix.identity import measured_name
from specmix.paths import cache_dir, write_atomically
from specmix.sizing.cost import CostCurve
from specmix.target import Target
from specmix.tree import TokenTree

# Dense at the small end, where CPU forward time jumps between neighbouring sizes (3 -> 4 here).
DEFAULT_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
CONTEXT, LONGER_CONTEXT = 256, 1024
"""The cache lengths curves are measured over: long prompts cost more per position."""


def measure(target: Target, sizes: Sequence[int] = DEFAULT_SIZES, context: int = CONTEXT, repeats: int = 7,
            longer: int | None = LONGER_CONTEXT) -> CostCurve:
    """Fastest of ``repeats`` forward times of a causal chain of N new tokens over a ``context``-token cache,
    and over a ``longer`` one too where the model's context has room (None: over one length only).

    The fastest, not the median: other work on the machine only ever adds time. Each is a
    tree forward whose root's argmax is then read, as in a step that accepts nothing: where
    the target applies its LM head only to the rows a walk reads (:attr:`Target.lazy_head`),
    the head runs on that row alone (or is screened, :attr:`Target.screen`).
    """
    sizes = _measurable(target, sizes)
    context, longer = _contexts(target, sizes, context, longer)
    short = _times(target, sizes, context, repeats)
    if longer is None:
        return CostCurve(sizes=sizes, seconds=short, context=context)
    return CostCurve(sizes=sizes, seconds=short, context=context, longer=_times(target, sizes, longer, repeats),
                     longer_context=longer)


def _contexts(target: Target, sizes: Sequence[int], context: int, longer: int | None) -> tuple[int, int | None]:
    """The cache lengths that fit beside the largest size (the longer one None where it would not be longer)."""
    room = target.max_length - sizes[-1] - 1
    context = max(1, min(context, room))
    return context, None if longer is None or min(longer, room) <= context else min(longer, room)


def _times(target: Target, sizes: Sequence[int], context: int, repeats: int) -> list[float]:
    generator = torch.Generator().manual_seed(0)
    target.reset()
    target.prefill(torch.randint(target.vocab_size, (context,), generator=generator))
    chains = [torch.randint(target.vocab_size, (n,), generator=generator).tolist() for n in sizes]
    trees = [TokenTree.from_paths(chain[0], [chain[1:]] if len(chain) > 1 else [], target.vocab_size)
             for chain in chains]
    samples: list[list[float]] = [[] for _ in sizes]
    # Rounds over every size, not every repeat of one size in a row: a stretch of other work on the machine
    # then slows one round of all sizes, which the fastest of the rounds leaves out, instead of every sample
    # of one size: a false dip or step the selector would chase. A size faster than a smaller one is kept as
    # measured (matrix kernels change with the row count); forwards are then padded up to it.
    for round_ in range(repeats + 1):  # the first round warms up
        for samples_of, tree in zip(samples, trees):
            start = time.perf_counter()
            target.forward_tree(tree).node_logits.argmax(0)  # what a step that accepts nothing pays
            if round_:
                samples_of.append(time.perf_counter() - start)
            target.compact(torch.arange(0))
    target.reset()
    return [min(times) for times in samples]


def _measurable(target: Target, sizes: Sequence[int]) -> list[int]:
    return [n for n in sizes if n + 2 <= target.max_length]


def _cache_file(target: Target, cache: str | os.PathLike | None = None) -> Path:
    """Where this target's curve is kept: named by what determines it (the model's architecture and
    weights, the device (a CPU by its kind), dtype, thread count, torch version, and whether the LM head runs on every
    row), not by where the model was loaded from."""
    # Measured with the LM head on a row, not on every token, and its argmax screened in float16 where it is.
    head = ("-rowhead" if target.lazy_head else "") + ("-screened" if target.screen is not None else "")
    # "rounds": measured in rounds over all sizes; "raw": each size's own time, not raised to a smaller size's
    # (such a curve never pads); a curve measured otherwise is measured again.
    # Forwards over its own choice of matrix kernels (specmix.kernels.row_kernels), named by that choice.
    # The attention implementation too: a caller's model keeps its own where specmix's would be grouped.
    attention = getattr(target.model.config, "_attn_implementation", None) or "default"
    name = f"{measured_name(target.model)}{head}{target.kernels_name}-{attention}-rounds-raw"
    return cache_dir(cache) / "cost-curves" / f"{name}-torch{torch.__version__}.json"


def _cached(path: Path, sizes: list[int], longer: int | None) -> CostCurve | None:
    """The curve stored at ``path`` if it is readable and measured at ``sizes`` (and over a longer cache when
    ``longer`` says one fits); a damaged file is reported once."""
    if not path.exists():
        return None
    try:
        curve = CostCurve.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and ConfigurationError are ValueErrors
        warnings.warn(f"the cost curve cached in {path} is unreadable ({exc}); measuring it again", SpecmixWarning,
                      stacklevel=3)
        return None
    if list(curve.sizes) != sizes or (curve.longer is None and longer is not None):
        return None  # measured at other sizes, or over one cache length where two fit
    return curve


def cost_curve_for(target: Target, cache: str | os.PathLike | None = None, remeasure: bool = False) -> CostCurve:
    """The cached curve for this model, device and dtype, measured and saved on first use.

    Curves live in ``cost-curves/`` under the cache directory (``cache``, else
    ``$SPECMIX_CACHE_DIR``, else ``~/.cache/specmix``). A curve measured at other sizes
    than today's defaults, or a damaged file, is measured again; files are replaced
    atomically, so an interrupted measurement never leaves half a file.
    """
    path = _cache_file(target, cache)
    sizes = _measurable(target, DEFAULT_SIZES)
    curve = None if remeasure else _cached(path, sizes, _contexts(target, sizes, CONTEXT, LONGER_CONTEXT)[1])
    if curve is not None:
        return curve
    print(f"specmix: measuring this model's forward time T(N) on {target.device.type} (once; cached in {path.parent})",
          file=sys.stderr, flush=True)
    curve = measure(target)
    write_atomically(path, json.dumps(curve.to_json(), indent=1))
    return curve
