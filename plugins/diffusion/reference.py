"""``dflash-ref`` in ``specmix bench``: the DFlash authors' own decoding loop (the ``dflash`` package),
with the same target and drafter weights, timed beside specmix's methods."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from specmix import ConfigurationError, DecodeSettings, Target
from specmix.interfaces import Baseline
from specmix.plugins.diffusion import formats
from specmix.plugins.diffusion.drafter import SHIPPED
from specmix.values import Run

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

INSTALL = "pip install --no-deps dflash==0.1.0"


class DFlashReference(Baseline):
    """``dflash.model.dflash_generate`` with a DFlash-format drafter: ``drafter.weights`` (a directory or hub id),
    by default the DFlash-format drafter shipped for the target.

    Its own statistics synchronise CUDA, so its target forwards are counted here with a
    forward hook on the target; like specmix's, its τ is new tokens per target forward
    (its prompt forward gives the first token, as specmix's first step does).
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, settings: DecodeSettings,
                 options: Mapping[str, Mapping[str, Any]]) -> None:
        try:
            from dflash import model as reference
        except ImportError as exc:
            raise ConfigurationError(f"dflash-ref needs the DFlash authors' package ({INSTALL}): {exc}") from None
        target = Target(model)
        weights = (options.get("drafter") or {}).get("weights")
        directory = formats.resolve(weights) if weights else formats.shipped(SHIPPED, target.fingerprint, formats.DFLASH)
        if directory is None:
            raise ConfigurationError("no DFlash-format drafter ships for this target; give dflash-ref[drafter.weights=DIR]")
        kind = formats.detect(directory)
        if kind == formats.SPECMIX:
            raise ConfigurationError(f"dflash-ref needs a DFlash-format drafter; {directory} holds specmix's format")
        formats.check_target(formats.read_dflash(directory), target, directory)
        classes = {formats.DFLASH: reference.DFlashDraftModel, formats.DFLASH2: reference.DFlash2DraftModel}
        self.draft = classes[kind].from_pretrained(directory).to(device=model.device, dtype=model.dtype).eval()
        self.generate, self.model, self.settings = reference.dflash_generate, model, settings
        self.stop_ids = list(target.eos_ids) or None

    def __call__(self, ids: list[int], max_new_tokens: int) -> Run:
        forwards = []
        hook = self.model.register_forward_pre_hook(lambda module, args: forwards.append(1))
        settings = self.settings
        try:
            if settings.seed is not None:
                torch.manual_seed(settings.seed)
            start = time.perf_counter()
            out = self.generate(self.draft, self.model, torch.tensor([ids], device=self.model.device), max_new_tokens,
                                self.stop_ids, temperature=settings.temperature, top_p=settings.top_p or 1.0,
                                top_k=settings.top_k or 0)
            seconds = time.perf_counter() - start
        finally:
            hook.remove()
        return Run(out[0, len(ids):].tolist(), seconds, len(forwards))
