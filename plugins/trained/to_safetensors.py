"""``python -m specmix.plugins.trained.to_safetensors DIR...``: a trained directory's pickled ``model.pt``
rewritten as the ``model.safetensors`` its loader reads, tensor for tensor; ``model.pt`` is then removed.

Only tensors are unpickled (``weights_only``), so converting a directory runs none of its code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from safetensors.torch import load_file

from specmix.plugins.trained.weights_dir import PICKLED_FILE, WEIGHTS_FILE, write_weights


def convert(directory: Path) -> None:
    pickled = Path(directory) / PICKLED_FILE
    state = torch.load(pickled, map_location="cpu", weights_only=True)
    write_weights(state, directory)
    written = load_file(Path(directory) / WEIGHTS_FILE)
    # The pickle goes only once what replaces it reads back the same, bit for bit.
    if written.keys() != state.keys() or not all(torch.equal(written[name], state[name].float()) for name in state):
        raise RuntimeError(f"{directory}/{WEIGHTS_FILE} does not read back as {PICKLED_FILE}; both are kept")
    pickled.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specmix.plugins.trained.to_safetensors",
                                     description=f"rewrite trained directories' {PICKLED_FILE} as {WEIGHTS_FILE}")
    parser.add_argument("directories", nargs="+", type=Path)
    for directory in parser.parse_args(argv).directories:
        convert(directory)
        print(f"{directory}: {PICKLED_FILE} -> {WEIGHTS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
