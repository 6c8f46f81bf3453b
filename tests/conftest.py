import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from specmix.paths import cache_dir
from specmix.testing import kit_registry


def pytest_configure(config):
    # The suite runs in two processes (pyproject's addopts); tiny models gain nothing from a
    # second thread each, and two threads per process would fight over the two cores.
    torch.set_num_threads(1)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the workers inherit what the controlling process set up below
    # Cost curves measured under the suite's load must not land in the user's cache, where a
    # later benchmark would trust them; converted models are shared with it.
    real = cache_dir()
    (real / "models").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="specmix-tests-"))
    (scratch / "models").symlink_to(real / "models", target_is_directory=True)
    os.environ["SPECMIX_CACHE_DIR"] = config.specmix_scratch = str(scratch)


def pytest_unconfigure(config):
    scratch = getattr(config, "specmix_scratch", None)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)  # the link to the models goes, not the models


@pytest.fixture(scope="session")
def registry():
    """Installed plugins plus the conformance kit's drafters."""
    return kit_registry()
