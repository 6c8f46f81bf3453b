"""Where specmix keeps what it computes once: converted models, cost curves."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """``override``, else ``$SPECMIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/specmix``, else ``~/.cache/specmix``."""
    explicit = override or os.environ.get("SPECMIX_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "specmix"
