"""The conformance kit's properties on the device, precision and static-shape mode that
``SPECMIX_KIT_DEVICE``, ``SPECMIX_KIT_DTYPE`` and ``SPECMIX_KIT_STATIC`` name (run by
``benchmarks/gpu_check.py``; not part of the test suite).

A fixed set of compositions that between them use every path of the engine and the tree
verifier: plain decoding, drafted trees under the cost curve, recursive rejection, riders,
hidden states, marginals builders, and the built-in drafters. ``GPU_CHECK_COMPOSITIONS``
(a number) keeps only the first ones, for a dry run.
"""

import os

from specmix.testing import ConformanceSuite

COMPOSITIONS = [
    "none+drafted+all+tree",
    "kit-riders+drafted+all+tree",
    "kit-features+chain+all+tree",
    "kit-random-tree+drafted+budget+tree",
    "kit-sampled-tree+drafted+all+tree",
    "kit-random-marginals+best-first+budget+tree",
    "diffusion+best-first+budget+tree",
    "ptd+drafted+budget+tree",
]


class TestOnTheDevice(ConformanceSuite):
    sampling_samples = int(os.environ.get("GPU_CHECK_SAMPLES", "200"))

    @classmethod
    def composition_names(cls):
        chosen = COMPOSITIONS[: int(os.environ.get("GPU_CHECK_COMPOSITIONS", len(COMPOSITIONS)))]
        return [dict(zip(("drafter", "builder", "selector", "verifier"), name.split("+"))) for name in chosen]
