"""``specmix train diffusion``: prompts → the target's own responses → training → held-out acceptance.

Every stage writes into ``--out`` and is skipped or continued when its output exists,
so an interrupted run is resumed by running the same command again.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from specmix import ConfigurationError, Decoder, DecodeSettings, Registry, Trainer
from specmix.plugins.diffusion.dflash_net import DFlashNet
from specmix.plugins.diffusion.drafter import VOCAB_FILE
from specmix.plugins.diffusion.formats import save_drafter
from specmix.plugins.diffusion.network import BlockDrafter, DrafterConfig, tapped_layers
from specmix.plugins.diffusion.training.loss import Example, TrainSettings, frequent_tokens, train
from specmix.plugins.diffusion.training.start import start_dflash_from_target, start_from_target
from specmix.plugins.trained.recipes import add_common_arguments, logger, loss_bar, open_workspace
from specmix.plugins.trained.responses import generate_responses, read_responses
from specmix.target import fingerprint
from specmix.text import encode

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

_log = logger("diffusion")


def acceptance_by_position(decoder: Decoder, prompts: Sequence[str], tokenizer: PreTrainedTokenizerBase,
                           max_new_tokens: int) -> dict[str, Any]:
    """Held-out τ and, per block position k, how often a step accepted at least k drafted tokens."""
    steps, tokens = 0, 0
    reached: dict[int, int] = {}
    for prompt in prompts:
        generation = decoder.generate(encode(tokenizer, prompt), DecodeSettings(max_new_tokens=max_new_tokens))
        steps += len(generation.steps)
        tokens += len(generation.tokens)
        for step in generation.steps:
            for k in range(1, step.accepted + 1):
                reached[k] = reached.get(k, 0) + 1
    return {"tau": tokens / max(steps, 1), "steps": steps,
            "accepted_at_least": {k: reached.get(k, 0) / max(steps, 1) for k in range(1, 16)}}


def unused_token(tokenizer: PreTrainedTokenizerBase, examples: Sequence[Example]) -> int:
    """The highest added (special) token id that no training sequence uses and that is not EOS, BOS or padding."""
    reserved = {tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id}
    seen = {token for example in examples for token in example.ids}
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {}) | set(tokenizer.all_special_ids)
    unused = sorted(added - seen - reserved)
    if not unused:
        raise ConfigurationError("every added token of this tokenizer occurs in the training data; "
                                 "choose the mask token with --mask-token-id")
    return unused[-1]


def _rope_theta(config: PreTrainedConfig) -> float:
    """The target's rotary base (transformers 5 keeps it in ``rope_parameters``), so copied layers see the same angles."""
    parameters = getattr(config, "rope_parameters", None) or {}
    return float(parameters.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


class DiffusionTrainer(Trainer):
    description = "train a block-diffusion (DFlash-style) drafter for a target on its own responses"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_common_arguments(parser, prompts=1500, held_out=24, max_new_tokens=256)
        parser.add_argument("--batch-size", type=int, default=32)
        parser.add_argument("--layers", type=int, default=1)
        parser.add_argument("--block-size", type=int, default=16)
        parser.add_argument("--steps", type=int, default=12000)
        parser.add_argument("--lr", type=float, default=1e-3)
        parser.add_argument("--anchors", type=int, default=32, help="blocks per training sequence and step")
        parser.add_argument("--vocab", type=int, default=8192,
                            help="train the softmax over only this many most frequent response tokens, which makes "
                                 "steps several times cheaper (0: the whole vocabulary)")
        parser.add_argument("--eval-tokens", type=int, default=128, help="new tokens per held-out prompt in the evaluation")
        parser.add_argument("--arch", choices=("specmix", "dflash"), default="specmix",
                            help="specmix's drafter (its own mask embedding, masks anchored on the block's first token) "
                                 "or a DFlash-format one, which the DFlash authors' code, vLLM and SGLang load")
        parser.add_argument("--mask-token-id", type=int,
                            help="the token whose embedding fills a DFlash drafter's masked positions (default: the "
                                 "highest added token that no training response uses)")
        parser.add_argument("--random-init", action="store_true",
                            help="start the draft layers at random instead of as copies of the target's last layers")

    @staticmethod
    def _new_drafter(args: argparse.Namespace, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                     training: Sequence[Example]) -> BlockDrafter | DFlashNet:
        """The drafter to train, of ``--arch``, started from the target's last layers unless ``--random-init``."""
        torch.manual_seed(args.seed)
        net: BlockDrafter | DFlashNet
        if args.arch == "specmix":
            config = DrafterConfig.for_target(model, args.layers, block_size=args.block_size,
                                              rope_theta=_rope_theta(model.config), anchored_masks=True)
            net = BlockDrafter(config)
            start = functools.partial(start_from_target, net)
        else:
            mask = args.mask_token_id if args.mask_token_id is not None else unused_token(tokenizer, training)
            net = DFlashNet.for_target(model, args.layers, tapped_layers(model.config.num_hidden_layers, args.layers),
                                       block_size=args.block_size, mask_token_id=mask)
            start = functools.partial(start_dflash_from_target, net, calibration=[e.ids for e in training[:16]])
        if not args.random_init and not start(model):
            _log("the target's layers do not fit the draft layers: they start at random")
        return net

    def run(self, args: argparse.Namespace) -> int:
        work = open_workspace(args)
        model, tokenizer, out, prompts = work.model, work.tokenizer, work.out, work.prompts
        _log(f"{len(prompts)} prompts ({out / 'prompts.json'})")

        responses = out / "responses.jsonl"
        generate_responses(model, tokenizer, prompts, responses, args.max_new_tokens, args.batch_size)
        examples = [Example(ids, start) for ids, start in read_responses(responses)]
        training, held_out = examples[: -args.held_out], prompts[-args.held_out:]
        _log(f"{len(training)} training sequences, {sum(len(e.ids) - e.response_start for e in training)} response tokens")

        net = self._new_drafter(args, model, tokenizer, training)
        settings = TrainSettings(steps=args.steps, lr=args.lr, anchors=args.anchors, seed=args.seed,
                                 vocab=args.vocab or None)
        with loss_bar("training", settings.steps) as progress:
            losses = train(net, model, training, settings, out / "checkpoint.pt", progress)
        save_drafter(net, out, fingerprint(model))
        (out / VOCAB_FILE).write_text(json.dumps(frequent_tokens(training).tolist()))

        evaluation = out / "eval.json"
        measured = {"trained_steps": settings.steps, "eval_tokens": args.eval_tokens}
        report = json.loads(evaluation.read_text()) if evaluation.exists() else {}
        if {key: report.get(key) for key in measured} != measured:  # not yet evaluated at these settings
            decoder = Decoder(model, Registry.load().compose(drafter="diffusion", builder="chain", selector="all",
                                                             verifier="tree", options={"drafter": {"weights": str(out)}}),
                              tokenizer=tokenizer)
            report = acceptance_by_position(decoder, held_out, tokenizer, args.eval_tokens)
            report.update(measured, final_loss=sum(losses[-100:]) / max(1, len(losses[-100:])), sequences=len(training),
                          seconds_this_run=work.elapsed())
            evaluation.write_text(json.dumps(report, indent=1))
        _log(f"held-out tau {report['tau']:.2f}; drafter saved in {out}")
        return 0
