"""Whether weights prepacked for oneDNN would make the target's forward cheaper at the sizes a step verifies.

Run with ``python -m pytest benchmarks/test_linear_kernels.py --benchmark-only``. Each group
times the 60 MLP projections of the default model's size (1536 × 576, fp32) over M rows,
once with ``F.linear`` on the plain weights (what the target runs) and once through
``torch.utils.mkldnn.to_mkldnn``'s prepacked layers. Where the prepacked ones are not
faster at every M a step verifies, the target keeps its plain weights.
"""

import pytest
import torch
import torch.utils.mkldnn

LAYERS, IN, OUT = 60, 576, 1536


@pytest.fixture(scope="module")
def layers():
    torch.manual_seed(0)
    return [torch.nn.Linear(IN, OUT, bias=False).eval() for _ in range(LAYERS)]


def _run(layers, rows):
    with torch.no_grad():
        for layer in layers:
            layer(rows)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch has no oneDNN")
@pytest.mark.parametrize("m", [1, 2, 4, 16])
@pytest.mark.parametrize("kernel", ["plain", "mkldnn"])
def test_mlp_projections(benchmark, layers, kernel, m):
    benchmark.group = f"60 projections 576->1536, M={m}"
    chosen = layers if kernel == "plain" else [torch.utils.mkldnn.to_mkldnn(layer) for layer in layers]
    rows = torch.randn(m, IN)
    with torch.no_grad():  # the same numbers either way, to rounding
        assert torch.allclose(chosen[0](rows), layers[0](rows), atol=1e-4)
    benchmark(_run, chosen, rows)
