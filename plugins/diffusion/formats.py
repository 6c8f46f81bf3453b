"""Drafter checkpoints on disk: the DFlash format the field publishes, and specmix's own.

**DFlash** (what the DFlash authors' ``save_pretrained``, vLLM and SGLang read and write):
``config.json`` is a Qwen3 config with ``architectures: ["DFlashDraftModel"]`` (or
``DFlash2DraftModel``), ``num_target_layers`` and ``dflash_config: {block_size,
mask_token_id, target_layer_ids}`` (these may also sit at top level), optionally
``input_embedding_scale``, ``output_multiplier``, ``final_logit_softcapping``,
``layer_types``/``sliding_window`` and ``is_causal``; DFlash 2 adds ``conv_kernel_size``,
``conv_group_size``, ``selector_rank`` and ``selector_top_k``. ``*.safetensors`` hold the
draft layers, ``fc``, ``hidden_norm`` and ``norm`` (and DFlash 2's convolutions and
``candidate_selector``); the embedding and LM head are the target's. specmix adds
``specmix_target`` (the target's fingerprint) to the configs it writes, which readers ignore.

**specmix** (:mod:`specmix.plugins.diffusion.network`): ``config.json`` of a
:class:`DrafterConfig` beside ``model.safetensors`` (see :mod:`specmix.plugins.trained.weights_dir`).

Either may have ``vocab.json`` beside it: the drafter's training responses' tokens, most
frequent first, over which it may draft.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import Qwen3Config

from specmix import ConfigurationError
from specmix.plugins.diffusion.dflash_net import DFlashNet, draft_value

if TYPE_CHECKING:
    from specmix import Target
    from specmix.plugins.diffusion.network import BlockDrafter

DFLASH, DFLASH2, SPECMIX = "dflash", "dflash2", "specmix"
ARCHITECTURES = {"DFlashDraftModel": DFLASH, "DFlash2DraftModel": DFLASH2}
LAYER_TYPES = {"full_attention", "sliding_attention"}
HUB_FILES = ["config.json", "*.safetensors", "*.safetensors.index.json", "vocab.json"]


def resolve(weights: str) -> Path:
    """A drafter's directory: ``weights`` itself if it exists, else a Hugging Face repo id fetched through the hub."""
    path = Path(weights).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ConfigurationError(f"{path} holds no config.json: it is not a drafter directory")
        return path
    if weights.count("/") != 1 or weights.startswith((".", "/", "~")):
        raise ConfigurationError(f"no drafter at {path}: give a directory, or a Hugging Face repo id such as "
                                 "z-lab/Qwen3-8B-DFlash-b16")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(weights, allow_patterns=HUB_FILES))
    except Exception as exc:  # no network, no such repo, no permission: all end the same way
        raise ConfigurationError(f"could not fetch the drafter {weights!r} from the Hugging Face hub "
                                 f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                                 "download it elsewhere and pass its directory") from exc


def detect(directory: Path) -> str:
    """``dflash``, ``dflash2`` or ``specmix``, from ``config.json``; anything else is refused by the field that says so."""
    config = json.loads((directory / "config.json").read_text())
    architectures = config.get("architectures")
    if architectures:
        known = [ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES]
        if not known:
            raise ConfigurationError(f"{directory}/config.json: architectures {architectures} is no drafter specmix "
                                     f"reads (it reads {', '.join(ARCHITECTURES)})")
        return known[0]
    if "taps" in config and "num_layers" in config:
        return SPECMIX
    raise ConfigurationError(f"{directory}/config.json has neither architectures (a DFlash drafter) nor taps "
                             "(a specmix drafter)")


def target_of(directory: Path) -> str | None:
    """The fingerprint of the target a drafter directory was trained for, when it says (specmix writes it)."""
    config = json.loads((directory / "config.json").read_text())
    return config.get("target") if detect(directory) == SPECMIX else config.get("specmix_target")


def shipped(root: Path, fingerprint: str, kind: str) -> Path | None:
    """The drafter of ``kind`` under ``root`` trained for the target ``fingerprint``, if one ships."""
    for config in sorted(Path(root).glob("*/config.json")):
        if detect(config.parent) == kind and target_of(config.parent) == fingerprint:
            return config.parent
    return None


def read_dflash(directory: Path) -> Qwen3Config:
    """The config of a DFlash or DFlash 2 checkpoint, with every field specmix needs checked."""
    config = Qwen3Config.from_pretrained(directory)
    where = f"{directory}/config.json"
    if draft_value(config, "mask_token_id") is None:
        raise ConfigurationError(f"{where} has no mask_token_id (in dflash_config or at top level)")
    if draft_value(config, "target_layer_ids") is None:
        if getattr(config, "num_target_layers", None) is None:
            raise ConfigurationError(f"{where} has neither target_layer_ids nor num_target_layers")
        config.target_layer_ids = default_target_layers(config.num_target_layers, config.num_hidden_layers)
    unknown = set(getattr(config, "layer_types", None) or ()) - LAYER_TYPES
    if unknown:
        raise ConfigurationError(f"{where}: layer_types {sorted(unknown)} are not supported (only {sorted(LAYER_TYPES)})")
    if detect(directory) == DFLASH2:
        missing = [f for f in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
                   if draft_value(config, f) is None]
        if missing:
            raise ConfigurationError(f"{where} is a DFlash 2 drafter without {', '.join(missing)}")
    return config


def default_target_layers(target_layers: int, draft_layers: int) -> list[int]:
    """The DFlash authors' default taps: the middle layer for one draft layer, else spread from 1 to L - 3."""
    if draft_layers == 1:
        return [target_layers // 2]
    span = target_layers - 4
    return [round(1 + i * span / (draft_layers - 1)) for i in range(draft_layers)]


def check_target(config: Qwen3Config, target: Target, directory: Path) -> None:
    """Refuse a DFlash drafter made for another target, naming the field that differs."""
    text = target.model.config.get_text_config() if hasattr(target.model.config, "get_text_config") else target.model.config
    ours = {"hidden_size": int(text.hidden_size), "vocab_size": target.vocab_size, "num_target_layers": target.num_layers}
    written = json.loads((directory / "config.json").read_text())  # only what the file says, not the config's defaults
    for field, value in ours.items():
        theirs = written.get(field)
        if theirs is not None and int(theirs) != value:
            raise ConfigurationError(f"the DFlash drafter in {directory} was made for another target: its {field} is "
                                     f"{theirs}, this target's {value}")
    taps = [int(i) for i in draft_value(config, "target_layer_ids")]
    if any(not 0 <= i < target.num_layers for i in taps):
        raise ConfigurationError(f"the DFlash drafter in {directory} taps target layers {taps}; this target has "
                                 f"0..{target.num_layers - 1}")
    if not 0 <= int(draft_value(config, "mask_token_id")) < target.vocab_size:
        raise ConfigurationError(f"the DFlash drafter in {directory} has mask_token_id {draft_value(config, 'mask_token_id')}"
                                 f", outside this target's vocabulary of {target.vocab_size}")


def _state_dict(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ConfigurationError(f"{directory} holds no .safetensors weights")
    state = {}
    for file in files:
        state.update(load_file(file))
    # Published DFlash 2 checkpoints store the codebooks as bare tensors.
    for name in ("predecessor_codebook", "successor_codebook"):
        bare = f"candidate_selector.{name}"
        if bare in state:
            state[f"{bare}.weight"] = state.pop(bare)
    return state


def load_dflash(directory: Path, target: Target) -> DFlashNet:
    """The DFlash (or DFlash 2) drafter in ``directory``, checked against ``target``, in fp32 on the CPU."""
    config = read_dflash(directory)
    check_target(config, target, directory)
    net = DFlashNet(config)
    state = _state_dict(directory)
    expected = set(net.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ConfigurationError(f"the weights in {directory} do not fit its config: missing {missing[:4]}, "
                                 f"unexpected {unexpected[:4]}")
    net.load_state_dict({name: tensor.float() for name, tensor in state.items()})
    return net


def save_dflash(net: DFlashNet, directory: Path, fingerprint: str) -> None:
    """Write ``net`` in the DFlash format (fp32), readable by the reference implementation, vLLM and SGLang."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = net.config
    config.architectures = ["DFlash2DraftModel" if net.second_version else "DFlashDraftModel"]
    config.specmix_target = fingerprint
    config.save_pretrained(directory)
    state = {name: tensor.detach().float().cpu().contiguous() for name, tensor in net.state_dict().items()}
    for name in ("predecessor_codebook", "successor_codebook"):  # bare, as published DFlash 2 checkpoints have them
        if f"candidate_selector.{name}.weight" in state:
            state[f"candidate_selector.{name}"] = state.pop(f"candidate_selector.{name}.weight")
    save_file(state, directory / "model.safetensors", metadata={"format": "pt"})


def save_drafter(net: BlockDrafter | DFlashNet, directory: Path, fingerprint: str) -> None:
    """Write a trained drafter in its own format: DFlash for a :class:`DFlashNet`, specmix's otherwise."""
    if isinstance(net, DFlashNet):
        save_dflash(net, directory, fingerprint)
    else:
        net.save(directory)
