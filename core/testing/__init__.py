"""The conformance kit: tiny random targets, adversarial drafters and the lossless properties.

A third-party package checks its components in a few lines::

    from specmix.testing import ConformanceSuite

    class TestMyDrafter(ConformanceSuite):
        drafter = "my-drafter"

The ``specmix`` pytest plugin (installed with specmix) registers the hypothesis
profiles ``dev`` and ``ci``; choose one with ``SPECMIX_HYPOTHESIS_PROFILE``.
"""

from specmix.testing.models import FAMILIES, tiny_model
from specmix.testing.properties import (
    CURVE,
    check_cache_matches_rebuild,
    check_greedy_identical,
    check_sampling_distribution,
    kit_registry,
)
from specmix.testing.reference import reference_greedy, reference_sequence_probs
from specmix.testing.suite import ConformanceSuite

__all__ = [
    "CURVE", "FAMILIES", "ConformanceSuite", "check_cache_matches_rebuild", "check_greedy_identical",
    "check_sampling_distribution", "kit_registry", "reference_greedy", "reference_sequence_probs", "tiny_model",
]
