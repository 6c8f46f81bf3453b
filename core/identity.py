"""What names a model and the machine it runs on: for trained artifacts, and for what is measured once and cached."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
from typing import TYPE_CHECKING, cast

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def fingerprint(model: PreTrainedModel) -> str:
    """What must match between a trained plugin artifact and its target: architecture, sizes and embedding values."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    embedding = cast(torch.Tensor, model.get_input_embeddings().weight)
    probe = float(embedding.detach()[:: max(1, embedding.shape[0] // 64)].double().sum())
    return f"{config.model_type}-{config.num_hidden_layers}x{config.hidden_size}-v{config.vocab_size}-{probe:.6e}"


def measured_name(model: PreTrainedModel) -> str:
    """A file name stem for what is measured on this model here: named by what determines it (the model's
    architecture and weights, the device (a CPU by its kind, see :func:`processor`), dtype and thread count), not by
    where the model was loaded from."""
    config = model.config.to_dict()
    for field in ("_name_or_path", "name_or_path", "transformers_version", "_commit_hash"):
        config.pop(field, None)
    identity = json.dumps([fingerprint(model), config], sort_keys=True, default=str)
    return f"{config.get('model_type', 'model')}-{_digest(identity)}-{_where(model.device, model.dtype)}"


def shapes_name(module: torch.nn.Module) -> str:
    """A file name stem for what is measured on a module that is not a Hugging Face model (a drafter's own network):
    named by its class and its parameters' names and shapes, the device (a CPU by its kind), dtype and thread count."""
    parameters = list(module.named_parameters())
    identity = json.dumps([(name, list(parameter.shape)) for name, parameter in parameters])
    first = parameters[0][1] if parameters else torch.empty(0)
    return f"{type(module).__name__.lower()}-{_digest(identity)}-{_where(first.device, first.dtype)}"


def _digest(identity: str) -> str:
    return hashlib.sha1(identity.encode()).hexdigest()[:12]


@functools.cache
def processor() -> str:
    """Which CPU this is, as the system names it (model name, family, model and stepping where Linux says them, else
    the platform's name) and how many cores it has: a cache shared by machines of several kinds (a home directory on
    a cluster) must not hand one machine's timings to another."""
    wanted = ("model name", "cpu family", "model", "stepping", "CPU implementer", "CPU part")
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() in wanted:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return json.dumps([fields or platform.processor() or platform.machine(), os.cpu_count()], sort_keys=True)


def _where(device: torch.device, dtype: torch.dtype) -> str:
    name = device.type
    if name == "cuda":
        name = re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name(device)).strip("-")
    elif name == "cpu":
        name = f"cpu-{_digest(processor())[:8]}"
    return f"{name}-{str(dtype).removeprefix('torch.')}-threads{torch.get_num_threads()}"
