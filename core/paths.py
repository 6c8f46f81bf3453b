"""Where specmix keeps what it computes once (converted models, cost curves), and how it writes there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """``override``, else ``$SPECMIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/specmix``, else ``~/.cache/specmix``."""
    explicit = override or os.environ.get("SPECMIX_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "specmix"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it: readers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
