"""Linear layers over a few rows, computed as ``weight @ rows.T`` where that is measured to be faster.

A target forward over a tree of a few tokens is a stack of matrix products with a few
rows, bound by reading the weights. How fast a BLAS library reads them depends on how a
product is posed: on a two-core AMD EPYC with torch 2.13's MKL, ``F.linear`` over one to
eight rows read the default model's 1536 × 576 weights at a third of the machine's memory
speed, while the same product posed as ``weight @ rows.T`` (two rows where there is one)
read them at full speed, and a one-token forward took 31 ms instead of 54. Past a dozen
rows the plain kernel wins again, and another machine may differ altogether, so the choice
is measured per weight shape and row count (:meth:`RowKernels.measure`) over the model's own
layers, never assumed.

The choice applies only inside :func:`active` on the thread that entered it: the target
enters it around its own forwards, so the same model run by anything else (HF ``generate``
included) computes exactly as before. Both kernels compute the same sums in another order;
results differ by float32 rounding, as between any two BLAS kernels.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping

import attrs
import torch
import torch.nn.functional as F

from specmix.clock import fastest
from specmix.errors import SpecmixWarning
from specmix.paths import cache_dir, write_atomically

MAX_ROWS = 16
"""The most rows for which the column kernel is considered."""

_chosen = threading.local()


@attrs.frozen
class RowKernels:
    """For each weight shape ``(out, in)``, the row counts at which ``weight @ rows.T`` beats ``F.linear``."""

    faster: Mapping[tuple[int, int], frozenset[int]] = attrs.field(
        converter=lambda value: {tuple(shape): frozenset(rows) for shape, rows in value.items()})

    @property
    def any(self) -> bool:
        return any(self.faster.values())

    @property
    def digest(self) -> str:
        """A short name for this choice: what is measured over these kernels (the cost curve) is kept under it."""
        return hashlib.sha1(self.to_json().encode()).hexdigest()[:8]

    def to_json(self) -> str:
        return json.dumps({f"{out}x{inp}": sorted(rows) for (out, inp), rows in sorted(self.faster.items())}, indent=1)

    def takes_columns(self, weight: torch.Tensor, rows: int) -> bool:
        return rows in self.faster.get(tuple(weight.shape), ())

    @classmethod
    def measure(cls, layers: list[torch.nn.Linear], repeats: int = 5, max_rows: int = MAX_ROWS) -> RowKernels:
        """Time both kernels over every layer of each weight shape at once (so the weights come from memory, as in
        a forward, not from a cache that one weight would fit), for 1 to ``max_rows`` rows; the fastest of
        ``repeats`` rounds decides, and the column kernel must win by 5% to be taken."""
        by_shape: dict[tuple[int, int], list[torch.Tensor]] = {}
        for layer in layers:
            by_shape.setdefault(tuple(layer.weight.shape), []).append(layer.weight.detach())
        faster = {}
        with torch.no_grad():
            for shape, weights in by_shape.items():
                probe = torch.randn(max_rows, shape[1], dtype=weights[0].dtype, device=weights[0].device,
                                    generator=torch.Generator(device=weights[0].device).manual_seed(0))
                faster[shape] = frozenset(rows for rows in range(1, max_rows + 1)
                                          if _columns_win(weights, probe[:rows], repeats))
        return cls(faster)


def _columns_win(weights: list[torch.Tensor], rows: torch.Tensor, repeats: int) -> bool:
    plain, columns = fastest([lambda: [F.linear(rows, weight) for weight in weights],
                              lambda: [column_linear(rows, weight) for weight in weights]], repeats)
    return columns < 0.95 * plain


def column_linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(input, weight, bias)`` posed as ``weight @ rows.T`` (a lone row is doubled, as one row takes a
    slower matrix-vector path)."""
    rows = input.reshape(-1, input.shape[-1]).contiguous()
    count = rows.shape[0]
    if count == 1:
        rows = rows.expand(2, -1).contiguous()
    out = torch.mm(weight, rows.t()) if bias is None else torch.addmm(bias[:, None], weight, rows.t())
    return out.t()[:count].contiguous().reshape(*input.shape[:-1], weight.shape[0])


class SwitchedLinear(torch.nn.Linear):
    """An ``nn.Linear`` that, inside :func:`active` on this thread, takes the kernel measured faster for its rows."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        kernels = getattr(_chosen, "kernels", None)
        if kernels is not None and input.dim() and kernels.takes_columns(self.weight, input.numel() // input.shape[-1]):
            return column_linear(input, self.weight, self.bias)
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


def switch_layers(model: torch.nn.Module, name: str, cache=None) -> RowKernels | None:
    """The kernels for ``model``'s float32 CPU linear layers, measured once per model and machine (kept under
    ``row-kernels/`` in the cache directory, see :func:`specmix.paths.cache_dir`, in a file named ``name``: see
    :mod:`specmix.identity`); where the column kernel wins anywhere the layers become :class:`SwitchedLinear`,
    which compute as before outside :func:`active`. None where no layer runs faster."""
    if model in _measured:
        return _measured[model]
    layers = [module for module in model.modules() if type(module) in (torch.nn.Linear, SwitchedLinear)
              and module.weight.device.type == "cpu" and module.weight.dtype == torch.float32]
    kernels = _kernels_for(layers, name, cache) if layers else None
    if kernels is not None and kernels.any:
        for layer in layers:
            layer.__class__ = SwitchedLinear
    else:
        kernels = None
    _measured[model] = kernels
    return kernels


def _kernels_for(layers: list[torch.nn.Linear], name: str, cache) -> RowKernels:
    path = cache_dir(cache) / "row-kernels" / f"{name}-torch{torch.__version__}.json"
    shapes = {tuple(layer.weight.shape) for layer in layers}
    try:
        stored = json.loads(path.read_text())
        kernels = RowKernels({tuple(int(n) for n in shape.split("x")): rows for shape, rows in stored.items()})
        if set(kernels.faster) == shapes:
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
