"""The greedy argmax of a float32 LM head, found through a float16 copy of its weight, and exactly the float32 one.

On a CPU one row of a large head is one pass over its whole weight, bound by memory: for
the default model (49,152 × 576) that is 8.6 ms of a 52 ms token on two cores. A float16
copy is half the bytes and, with float32 accumulation, about three times faster. Its logit
for token ``v`` is within a bound of the float32 one that follows from the rounding of the
inputs (unit roundoff ``u = 2**-11`` each), the accumulation and the output::

    |logit_v - screened_v| <= (2u + u²) · |h| · |w_v| + γ · |h| · |w_v| + u/(1 - u) · |screened_v|

with ``γ`` the float32 accumulation bound for ``D`` terms (:func:`_gamma`), paid once more for
each float32 computation being compared, since two float32 kernels summing in different
orders may differ by that much. Only tokens whose screened logit comes within their bound of
the best lower end can be the argmax of any float32 computation of the row; when one token
is left it is that argmax, when a few are left their rows of the weight decide in float32,
and when two of those are still closer than float32 rounding can tell apart the whole
float32 row is read, as it would be without screening.

Sampling needs whole distributions and reads whole rows; only the greedy argmax is screened.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from specmix.errors import SpecmixWarning
from specmix.kernels.clock import fastest
from specmix.paths import write_atomically

HALF_ROUNDOFF = 2.0 ** -11
"""Unit roundoff of float16 (11 significant bits)."""

SINGLE_ROUNDOFF = 2.0 ** -24
"""Unit roundoff of float32."""


def _gamma(terms: int) -> float:
    """The classic bound on the relative error of a float32 sum of ``terms`` products, in any order."""
    return terms * SINGLE_ROUNDOFF / (1 - terms * SINGLE_ROUNDOFF)


class ScreenedHead:
    """The argmax of ``head(h)`` for a bias-free float32 linear ``head``, read through a float16 copy."""

    def __init__(self, weight: torch.Tensor):
        if weight.dtype != torch.float32:
            raise ValueError(f"a screened head reads a float32 weight, got {weight.dtype}")
        self.weight = weight.detach()
        self.half = self.weight.to(torch.float16)
        dim = weight.shape[1]
        u, gamma = HALF_ROUNDOFF, _gamma(dim)
        # Row norms in float64, then rounded up, so that float32 rounding never shrinks a bound.
        norms = self.weight.double().norm(dim=1)
        self._norm_factor = ((2 * u + u * u + 3 * gamma * (1 + u) ** 2) * norms * (1 + 1e-6)).float()
        self._output_factor = u / (1 - u) * (1 + 1e-6)
        self._pair_factor = (2 * gamma * norms * (1 + 1e-6)).float()
        """How far two float32 computations of one logit may differ, per unit of ``|h|``."""

    @classmethod
    def for_head(cls, head: torch.nn.Module, repeats: int = 10, record: Path | None = None) -> ScreenedHead | None:
        """A screened copy of ``head`` where it is a bias-free float32 linear layer whose float16 products
        accumulate in float32 (checked on a probe) and reading it is at least 5% faster than one float32 row; else
        None. With ``record``, a file, the timing is done once: its verdict is kept there and read back after, so
        that every process on a machine decides alike (timed afresh, a close call went either way between runs)."""
        weight = getattr(head, "weight", None)
        if not isinstance(head, torch.nn.Linear) or head.bias is not None or weight.dtype != torch.float32:
            return None
        screened = cls(weight)
        if not screened._accumulates_in_float32():
            return None
        faster = _recorded(record)
        if faster is None:
            probe = torch.randn(weight.shape[1], dtype=weight.dtype, device=weight.device,
                                generator=torch.Generator(device=weight.device).manual_seed(0))
            plain, fast = fastest([lambda: int(head(probe[None]).argmax()), lambda: screened.argmax(probe)], repeats)
            faster = fast < 0.95 * plain
            if record is not None:
                write_atomically(record, json.dumps({"screen": faster, "row_seconds": plain, "screen_seconds": fast}))
        return screened if faster else None

    @torch.no_grad()
    def argmax(self, hidden: torch.Tensor) -> int | None:
        """The argmax of the float32 logits ``weight @ hidden`` (``hidden [D]``), or None where two tokens
        are closer than float32 rounding separates (then the caller reads the whole row)."""
        hidden = hidden.to(torch.float32)
        length = float(hidden.norm())
        screened = torch.nn.functional.linear(hidden.to(torch.float16)[None], self.half)[0].float()
        bound = self._norm_factor * length + self._output_factor * screened.abs()
        floor = float((screened - bound).max())
        contenders = torch.nonzero(screened + bound >= floor).flatten()
        if contenders.numel() == 1:
            return int(contenders[0])
        exact = self.weight.index_select(0, contenders) @ hidden
        order = exact.argsort(descending=True)
        best, runner = contenders[order[0]], contenders[order[1:]]
        margin = length * (self._pair_factor[best] + self._pair_factor[runner])
        if bool((exact[order[0]] - exact[order[1:]] > margin).all()):
            return int(best)
        return None

    def _accumulates_in_float32(self) -> bool:
        """Whether this device sums float16 products in float32, as the bound assumes: on a probe over the
        weight's first rows, every float16 logit is within output rounding and float32 accumulation of the
        same float16 inputs summed exactly (a float16 sum of hundreds of terms strays far further)."""
        rows = self.half[:4096]  # the kernel the head runs on, over a slice that keeps the float64 check small
        probe = torch.randn(1, rows.shape[1], generator=torch.Generator().manual_seed(1)).to(rows.device, torch.float16)
        screened = torch.nn.functional.linear(probe, rows)[0].double()
        exact = (probe.double() @ rows.double().T)[0]
        magnitude = probe.double().abs() @ rows.double().abs().T
        allowed = HALF_ROUNDOFF / (1 - HALF_ROUNDOFF) * screened.abs() + _gamma(rows.shape[1]) * magnitude[0]
        return bool(((screened - exact).abs() <= allowed).all())


def _recorded(record: Path | None) -> bool | None:
    """Whether the screen was timed faster in ``record`` (None: no record, or one that cannot be read)."""
    if record is None:
        return None
    try:
        return bool(json.loads(Path(record).read_text())["screen"])
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as exc:
        warnings.warn(f"the head screen choice kept in {record} is unreadable ({exc}); timing it again",
                      SpecmixWarning, stacklevel=3)
        return None
