"""Which matrix kernel makes the target's forward cheapest at the sizes a step verifies.

Run with ``python -m pytest benchmarks/test_linear_kernels.py --benchmark-only -n 0``. Each
group times the 60 MLP projections of the default model's size (1536 × 576, fp32) over M
rows four ways: ``F.linear`` on the plain weights, the same product posed as
``weight @ rows.T`` (:func:`specmix.kernels.row_kernels.column_linear`), MKL's packed GEMM over
weights laid out for it once (:func:`specmix.kernels.row_kernels.packed_linear`) — the target takes
either of these where :class:`specmix.kernels.row_kernels.RowKernels` measures it faster — and weights
prepacked by ``torch.utils.mkldnn.to_mkldnn``. Sixty distinct weights, as in a forward, so
that they come from memory and not from a cache one of them would fit.
"""

import pytest
import torch
import torch.utils.mkldnn

from specmix.kernels.row_kernels import can_pack, column_linear, pack, packed_linear

LAYERS, IN, OUT = 60, 576, 1536


@pytest.fixture(scope="module")
def layers():
    torch.manual_seed(0)
    return [torch.nn.Linear(IN, OUT, bias=False).eval() for _ in range(LAYERS)]


def _run(calls, rows):
    with torch.no_grad():
        for call in calls:
            call(rows)


def _kernels(layers, kernel):
    if kernel == "plain":
        return layers
    if kernel == "columns":
        return [lambda rows, layer=layer: column_linear(rows, layer.weight) for layer in layers]
    if kernel == "packed":
        copies = [pack(layer.weight) for layer in layers]
        return [lambda rows, layer=layer, copy=copy: packed_linear(rows, copy, layer.weight)
                for layer, copy in zip(layers, copies)]
    return [torch.utils.mkldnn.to_mkldnn(layer) for layer in layers]


@pytest.mark.parametrize("m", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("kernel", ["plain", "columns", "packed", "mkldnn"])
def test_mlp_projections(benchmark, layers, kernel, m):
    if kernel == "mkldnn" and not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    if kernel == "packed" and not can_pack():
        pytest.skip("this torch has no MKL packed GEMM")
    benchmark.group = f"60 projections 576->1536, M={m}"
    chosen = _kernels(layers, kernel)
    rows = torch.randn(m, IN)
    with torch.no_grad():  # the same numbers either way, to rounding
        assert torch.allclose(chosen[0](rows), layers[0](rows), atol=1e-4)
    benchmark(_run, chosen, rows)
