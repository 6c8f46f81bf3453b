import pytest

from specmix.testing import kit_registry


@pytest.fixture(scope="session")
def registry():
    """Installed plugins plus the conformance kit's drafters."""
    return kit_registry()
