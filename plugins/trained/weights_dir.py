"""A trained module's directory: ``config.json`` (an attrs config naming its target) beside ``model.safetensors``.

The diffusion drafter and the TAPS scorer are both stored this way, in the package for the
default model and wherever a user trains one; a retrieval corpus keeps its own files beside
such a config. A directory from before, whose weights are a pickled ``model.pt``, is refused
with the command that converts it (:mod:`specmix.plugins.trained.to_safetensors`): it is not
converted on load, since the directory may be read-only or shared, and loading never unpickles.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, TypeVar

import attrs
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from specmix import ConfigurationError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
PICKLED_FILE = "model.pt"
"""What directories written before held their weights in."""


class TrainedConfig(Protocol):
    """What :func:`find` reads in every trained module's config: the fingerprint of the target it was trained for."""

    @property
    def target(self) -> str: ...


C = TypeVar("C")
T = TypeVar("T", bound=TrainedConfig)
M = TypeVar("M", bound=nn.Module)


def save(module: nn.Module, config: attrs.AttrsInstance, directory: Path) -> None:
    """Writes ``config`` and the module's weights (fp32, on the CPU)."""
    directory = write_config(config, directory)
    write_weights(module.state_dict(), directory)


def write_weights(state: dict[str, torch.Tensor], directory: Path) -> None:
    """Writes ``state`` into ``directory`` as the weights file (fp32, on the CPU)."""
    save_file({name: tensor.detach().cpu().float().contiguous() for name, tensor in state.items()},
              Path(directory) / WEIGHTS_FILE)


def write_config(config: attrs.AttrsInstance, directory: Path) -> Path:
    """Writes ``config`` into ``directory`` (made if need be), and returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(json.dumps(attrs.asdict(config), indent=1))
    return directory


def read_config(config_type: type[C], directory: Path) -> C:
    return config_type(**json.loads((Path(directory) / CONFIG_FILE).read_text()))


def load_weights(module: M, directory: Path) -> M:
    directory = Path(directory)
    if not (directory / WEIGHTS_FILE).exists():
        if (directory / PICKLED_FILE).exists():
            raise ConfigurationError(f"{directory} holds its weights in the old pickled {PICKLED_FILE}; convert them once "
                                     f"with `python -m specmix.plugins.trained.to_safetensors {directory}`")
        raise ConfigurationError(f"{directory} holds no {WEIGHTS_FILE}")
    module.load_state_dict(load_file(directory / WEIGHTS_FILE))
    return module


def _packaged(root: Path, config_type: type[object], **wanted: object) -> Path | None:
    """The first directory under ``root`` whose config has every ``wanted`` field value, if any."""
    for config in sorted(Path(root).glob(f"*/{CONFIG_FILE}")):
        found = read_config(config_type, config.parent)
        if all(getattr(found, field) == value for field, value in wanted.items()):
            return config.parent
    return None


def find(config_type: type[T], fingerprint: str, *, chosen: str | None, shipped: Path, what: str, hint: str,
         **wanted: object) -> tuple[Path, T]:
    """The weights directory to load and its config: ``chosen``, else the one shipped under ``shipped``
    for this target (and ``wanted`` config values). Either must have been trained for ``fingerprint``;
    otherwise the error names the ``what`` and how to make one (``hint``)."""
    directory = Path(chosen) if chosen else _packaged(shipped, config_type, target=fingerprint, **wanted)
    if directory is None:
        details = "".join(f" and {field} '{value}'" for field, value in wanted.items())
        raise ConfigurationError(f"no trained {what} ships for this target ({fingerprint}){details}; {hint}")
    config = read_config(config_type, directory)
    if config.target != fingerprint:
        raise ConfigurationError(f"the {what} in {directory} was trained for {config.target}, "
                                 f"not this target ({fingerprint}); {hint}")
    return directory, config
