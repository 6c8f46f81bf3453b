"""Linear layers over a few rows, computed by whichever of three kernels is measured fastest.

A target forward over a tree of a few tokens is a stack of matrix products with a few
rows, bound by reading the weights. How fast a BLAS library reads them depends on how a
product is posed, and differs between machines:

- ``plain``: ``F.linear``, as the model would compute it.
- ``columns``: the same product posed as ``weight @ rows.T`` (:func:`column_linear`). On a
  two-core AMD EPYC with torch 2.13's MKL, ``F.linear`` over one to eight rows read the
  default model's 1536 × 576 weights at a third of the machine's memory speed, while this
  read them at full speed, and a one-token forward took 31 ms instead of 54.
- ``packed``: MKL's packed GEMM over a copy of the weight laid out for it once
  (:func:`packed_linear`; the kernel torch's own compiler uses for float32 linear layers on
  CPU). Unpacked, MKL rearranges the weight on every call of two rows or more. On a two-core
  Intel Xeon the 60 MLP projections of the default model over four rows took 11.7 ms packed
  against 16.5 plain. The copy costs the weight's memory again, so it is made only where it
  wins and only while it takes at most half of the memory available.

So the choice is measured per weight shape and row count (:meth:`RowKernels.measure`) over
the model's own layers, never assumed. It applies only inside :func:`active` on the thread
that entered it: the target enters it around its own forwards, so the same model run by
anything else (HF ``generate`` included) computes exactly as before. The kernels compute the
same sums in other orders; results differ by float32 rounding, as between any two BLAS kernels.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import cast

import attrs
import torch
import torch.nn.functional as F

from specmix.errors import SpecmixWarning
from specmix.kernels.clock import fastest
from specmix.paths import cache_dir, write_atomically

MAX_ROWS = 16
"""The most rows for which a kernel other than ``F.linear`` is considered."""

PLAIN, COLUMNS, PACKED = "plain", "columns", "packed"

_chosen = threading.local()


def column_linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(input, weight, bias)`` posed as ``weight @ rows.T`` (a lone row is doubled, as one row takes a
    slower matrix-vector path)."""
    rows = input.reshape(-1, input.shape[-1]).contiguous()
    count = rows.shape[0]
    if count == 1:
        rows = rows.expand(2, -1).contiguous()
    out = torch.mm(weight, rows.t()) if bias is None else torch.addmm(bias[:, None], weight, rows.t())
    return out.t()[:count].contiguous().reshape(*input.shape[:-1], weight.shape[0])


def can_pack() -> bool:
    """Whether this torch offers MKL's packed GEMM (an x86 build with MKL)."""
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_reorder_linear_weight")


def pack(weight: torch.Tensor) -> torch.Tensor:
    """``weight [out, in]`` laid out for MKL's packed GEMM (one layout serves every row count)."""
    return torch.ops.mkl._mkl_reorder_linear_weight(weight.detach(), MAX_ROWS)


def packed_linear(input: torch.Tensor, packed: torch.Tensor, weight: torch.Tensor,
                  bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(input, weight, bias)`` through MKL's packed GEMM over ``packed`` (:func:`pack` of ``weight``)."""
    # The row count must be passed as the packed size, or torch computes through the plain weight instead.
    return torch.ops.mkl._mkl_linear(input, packed, weight, bias, input.numel() // input.shape[-1])


@attrs.frozen
class RowKernels:
    """For each weight shape ``(out, in)``, the kernel measured fastest at each row count where it is not
    ``F.linear``: ``{(out, in): {rows: "columns" or "packed"}}``."""

    chosen: Mapping[tuple[int, ...], Mapping[int, str]] = attrs.field(
        converter=lambda value: {tuple(shape): {int(rows): kernel for rows, kernel in by_rows.items()}
                                 for shape, by_rows in value.items()})

    @chosen.validator
    def _known(self, attribute, value):
        unknown = {kernel for by_rows in value.values() for kernel in by_rows.values()} - {COLUMNS, PACKED}
        if unknown:
            raise ValueError(f"unknown matrix kernels {sorted(unknown)}; known: {COLUMNS}, {PACKED}")

    @property
    def any(self) -> bool:
        return any(self.chosen.values())

    @property
    def digest(self) -> str:
        """A short name for this choice: what is measured over these kernels (the cost curve) is kept under it."""
        return hashlib.sha1(self.to_json().encode()).hexdigest()[:8]

    def to_json(self) -> str:
        return json.dumps({f"{out}x{inp}": {str(rows): kernel for rows, kernel in sorted(by_rows.items())}
                           for (out, inp), by_rows in sorted(self.chosen.items())}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> RowKernels:
        return cls({tuple(int(n) for n in shape.split("x")): by_rows for shape, by_rows in json.loads(text).items()})

    def kernel(self, weight: torch.Tensor, rows: int) -> str:
        return self.chosen.get(tuple(weight.shape), {}).get(rows, PLAIN)

    def packs(self, shape: tuple[int, ...]) -> bool:
        return PACKED in self.chosen.get(tuple(shape), {}).values()

    @classmethod
    def measure(cls, layers: list[torch.nn.Linear], repeats: int = 5, max_rows: int = MAX_ROWS,
                packing: bool | None = None) -> RowKernels:
        """Time the kernels over every layer of each weight shape at once (so the weights come from memory, as in
        a forward, not from a cache that one weight would fit), for 1 to ``max_rows`` rows; the fastest of
        ``repeats`` rounds in which they take turns decides, and another kernel must beat ``F.linear`` by 5% to be
        taken. ``packing``: whether the packed kernel is tried (by default where :func:`can_pack`)."""
        by_shape: dict[tuple[int, ...], list[torch.Tensor]] = {}
        for layer in layers:
            by_shape.setdefault(tuple(layer.weight.shape), []).append(layer.weight.detach())
        packing = can_pack() if packing is None else packing
        chosen = {}
        with torch.no_grad():
            for shape, weights in by_shape.items():
                probe = torch.randn(max_rows, shape[1], dtype=weights[0].dtype, device=weights[0].device,
                                    generator=torch.Generator(device=weights[0].device).manual_seed(0))
                packed = [pack(weight) for weight in weights] if packing else None
                chosen[shape] = {rows: kernel for rows in range(1, max_rows + 1)
                                 if (kernel := _fastest(weights, packed, probe[:rows], repeats)) != PLAIN}
        return cls(chosen)


def _fastest(weights: list[torch.Tensor], packed: list[torch.Tensor] | None, rows: torch.Tensor, repeats: int) -> str:
    kernels: dict[str, Callable] = {
        PLAIN: lambda: [F.linear(rows, weight) for weight in weights],
        COLUMNS: lambda: [column_linear(rows, weight) for weight in weights],
    }
    if packed is not None:
        kernels[PACKED] = lambda: [packed_linear(rows, copy, weight) for copy, weight in zip(packed, weights)]
    seconds = dict(zip(kernels, fastest(list(kernels.values()), repeats)))
    best = min(seconds, key=seconds.__getitem__)
    return best if seconds[best] < 0.95 * seconds[PLAIN] else PLAIN


class SwitchedLinear(torch.nn.Linear):
    """An ``nn.Linear`` that, inside :func:`active` on this thread, takes the kernel measured fastest for its rows.

    ``packed``, set by :func:`switch_layers` where the packed kernel is chosen for this shape, is the weight laid out
    for it; it is a copy, made when the layer is switched."""

    packed: torch.Tensor | None = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        kernels = getattr(_chosen, "kernels", None)
        if kernels is not None and input.dim():
            kernel = kernels.kernel(self.weight, input.numel() // input.shape[-1])
            if kernel == COLUMNS:
                return column_linear(input, self.weight, self.bias)
            if kernel == PACKED and self.packed is not None:
                return packed_linear(input, self.packed, self.weight, self.bias)
        return F.linear(input, self.weight, self.bias)


@contextlib.contextmanager
def active(kernels: RowKernels | None) -> Iterator[None]:
    """Run switched layers on ``kernels``' choice on this thread (None: as plain ``nn.Linear``)."""
    outer = getattr(_chosen, "kernels", None)
    _chosen.kernels = kernels
    try:
        yield
    finally:
        _chosen.kernels = outer


_measured: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The choice for each module switched, by the module object: a target's copy of a caller's model is switched, and
remembered, apart from the model it copies, with which it shares only weights."""


def switch_layers(model: torch.nn.Module, name: str, cache: str | os.PathLike | None = None) -> RowKernels | None:
    """The kernels for ``model``'s float32 CPU linear layers, measured once per model and machine (kept under
    ``matrix-kernels/`` in the cache directory, see :func:`specmix.paths.cache_dir`, in a file named ``name``: see
    :mod:`specmix.identity`); where another kernel wins anywhere the layers become :class:`SwitchedLinear`,
    which compute as before outside :func:`active`. None where no layer runs faster."""
    if model in _measured:
        return _measured[model]
    layers = [module for module in model.modules() if isinstance(module, torch.nn.Linear)
              and type(module) in (torch.nn.Linear, SwitchedLinear)  # exactly these (isinstance narrows the type)
              and module.weight.device.type == "cpu" and module.weight.dtype == torch.float32]
    kernels = _kernels_for(layers, name, cache) if layers else None
    if kernels is not None and kernels.any:
        kernels = _affordable(kernels, layers)
        for layer in layers:
            layer.__class__ = SwitchedLinear
            switched = cast(SwitchedLinear, layer)  # as its class now says
            switched.packed = pack(layer.weight) if kernels.packs(layer.weight.shape) else None
    else:
        kernels = None
    _measured[model] = kernels
    return kernels


def _affordable(kernels: RowKernels, layers: list[torch.nn.Linear]) -> RowKernels:
    """``kernels``, without the packed kernel where its copies of the weights would take more than half of the
    memory available now (or where this torch cannot pack, as a choice read back on another build may ask)."""
    copies = sum(layer.weight.numel() * layer.weight.element_size() for layer in layers
                 if kernels.packs(layer.weight.shape))
    if not copies or (can_pack() and copies <= _available_memory() / 2):
        return kernels
    warnings.warn(f"the packed matrix kernel would copy {copies / 2**20:.0f} MiB of weights, more than half of the "
                  "memory available (or this torch cannot pack); the other kernels are used", SpecmixWarning,
                  stacklevel=3)
    return RowKernels({shape: {rows: kernel for rows, kernel in by_rows.items() if kernel != PACKED}
                       for shape, by_rows in kernels.chosen.items()})


def _available_memory() -> int:
    """Bytes of memory available now (physical memory where the system does not say)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def _kernels_for(layers: list[torch.nn.Linear], name: str, cache: str | os.PathLike | None) -> RowKernels:
    path = cache_dir(cache) / "matrix-kernels" / f"{name}-torch{torch.__version__}.json"
    shapes = {tuple(layer.weight.shape) for layer in layers}
    try:
        kernels = RowKernels.from_json(path.read_text())
        if set(kernels.chosen) == shapes:
            return kernels
    except FileNotFoundError:
        pass
    except (ValueError, TypeError, AttributeError) as exc:
        warnings.warn(f"the kernel choice cached in {path} is unreadable ({exc}); measuring it again", SpecmixWarning,
                      stacklevel=3)
    print(f"specmix: timing matrix kernels (once per model and machine; cached in {path.parent})",
          file=sys.stderr, flush=True)
    kernels = RowKernels.measure(layers)
    write_atomically(path, kernels.to_json())
    return kernels
