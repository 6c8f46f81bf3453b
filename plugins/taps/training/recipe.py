"""``specmix train scorer``: traces of fully verified candidate trees → the TAPS scorer → an offline comparison.

Stages write into ``--out`` and are skipped or continued when their output exists, so an
interrupted run resumes when the same command runs again.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import torch
from torch import nn

from specmix import CostCurve, Decoder, DecodeSettings, Registry, Target, Trainer, Verifier
from specmix.composition import Slot
from specmix.plugins.taps.scorer import Scorer, ScorerConfig, log_reach
from specmix.plugins.taps.training.traces import Trace, labels, recording, train_scorer
from specmix.plugins.trained.prompts import SCORER_TEMPLATES
from specmix.plugins.trained.recipes import add_common_arguments, logger, loss_bar, open_workspace
from specmix.sizing.measure import cost_curve_for
from specmix.sizing.selection import most_reached
from specmix.target import fingerprint
from specmix.text import encode

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# What the candidate trees come from, per drafter: a wide pool for marginal drafters, the drafter's own tree otherwise.
BUILDERS = {"diffusion": ("pool", {"nodes": 64}), "ptd": ("drafted", {})}

_log = logger("scorer")


def collect_traces(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, drafter: str, drafter_options: dict,
                   prompts: list[str], directory: Path, max_new_tokens: int) -> None:
    """Greedy generations whose every candidate tree is verified whole; one file of traces per prompt (resumable)."""
    from tqdm.auto import tqdm

    builder, builder_options = BUILDERS.get(drafter, ("pool", {"nodes": 64}))
    registry = Registry.load()
    composition = registry.compose(drafter=drafter, builder=builder, selector="all", verifier="tree",
                                   options={"drafter": drafter_options, "builder": builder_options})
    directory.mkdir(parents=True, exist_ok=True)
    done = len(list(directory.glob("*.pt")))
    for index in tqdm(range(done, len(prompts)), initial=done, total=len(prompts), desc="traces", unit="prompt"):
        recorded: list[Trace] = []
        verifier = composition.verifier
        assert isinstance(verifier.component, Verifier)  # the composition's verifier slot holds its verifier
        recorder = attrs.evolve(composition, verifier=Slot("verifier", verifier.name, verifier.plugin,
                                                            recording(verifier.component, recorded.append)))
        decoder = Decoder(model, recorder, tokenizer=tokenizer)
        decoder.generate(encode(tokenizer, prompts[index]), DecodeSettings(max_new_tokens=max_new_tokens))
        torch.save(recorded, directory / f"{index:05d}.pt")


def load_traces(directory: Path) -> list[list[Trace]]:
    """The traces of each prompt, in prompt order."""
    return [torch.load(path, weights_only=False) for path in sorted(directory.glob("*.pt"))]


def offline_rate(traces: Sequence[Trace], reach_of: Callable[[Trace], torch.Tensor], cost: CostCurve) -> dict[str, float]:
    """Tokens per second if each trace's tree had been cut by ``reach_of`` and the cost curve (greedy labels)."""
    tokens = seconds = nodes = 0.0
    for item in traces:
        kept = set(most_reached(reach_of(item).tolist(), cost))
        count = len(kept) - 1
        parents, matches = item.inputs.parents.tolist(), item.argmax_child.tolist()
        accepted = [False] * len(parents)
        accepted[0] = True
        for node in range(1, len(parents)):
            accepted[node] = node in kept and accepted[parents[node]] and matches[node]
        tokens += 1 + sum(accepted[1:])
        seconds += cost.time(1 + count)
        nodes += count
    return {"tokens_per_s": tokens / seconds, "tau": tokens / len(traces), "nodes": nodes / len(traces)}


class ScorerTrainer(Trainer):
    description = "train a TAPS path-acceptance scorer for a target and drafter on fully verified candidate trees"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_common_arguments(parser, prompts=80, held_out=8, max_new_tokens=64)
        parser.add_argument("--drafter", default="diffusion", help="the drafter whose trees to score (diffusion, ptd, ...)")
        parser.add_argument("--drafter-weights", help="the drafter's weights directory (default: the shipped one)")
        parser.add_argument("--labels", choices=("argmax", "probs"), default="argmax",
                            help="argmax labels (greedy decoding) or the target's probabilities (sampling)")
        parser.add_argument("--epochs", type=int, default=30)

    def run(self, args: argparse.Namespace) -> int:
        work = open_workspace(args, SCORER_TEMPLATES)
        model, out = work.model, work.out
        drafter_options = {"weights": args.drafter_weights} if args.drafter_weights else {}
        collect_traces(model, work.tokenizer, args.drafter, drafter_options, work.prompts, out / "traces",
                       args.max_new_tokens)
        per_prompt = load_traces(out / "traces")
        training = [item for items in per_prompt[: -args.held_out] for item in items]
        held_out = [item for items in per_prompt[-args.held_out:] for item in items]
        _log(f"{len(training)} training trees, {sum(t.inputs.tokens.shape[0] for t in training)} nodes; "
             f"{len(held_out)} held out")

        embedding = cast(nn.Embedding, model.get_input_embeddings())  # a causal language model's token embedding
        features = next((t.inputs.child_features for t in training if t.inputs.child_features is not None), None)
        config = ScorerConfig(embed_dim=embedding.weight.shape[1], feature_dim=0 if features is None else features.shape[-1],
                              drafter=args.drafter, labels=args.labels, target=fingerprint(model))
        torch.manual_seed(args.seed)
        scorer = Scorer(config)
        with loss_bar("training") as progress:
            losses = train_scorer(scorer, embedding, training, args.labels, args.epochs, seed=args.seed,
                                  checkpoint=out / "checkpoint.pt", progress=progress)
        scorer.save(out)

        cost = cost_curve_for(Target(model), cache=args.cache_dir)
        with torch.no_grad():
            def learned(item: Trace) -> torch.Tensor:
                inputs = item.inputs.in_float()
                return log_reach(scorer.conditional_logprobs(inputs, embedding)[0], inputs.parents).exp()

            report: dict[str, Any] = {  # eval.json
                "learned": offline_rate(held_out, learned, cost),
                "draft_product": offline_rate(held_out, lambda item: item.inputs.edge_stats[:, 1].double().exp(), cost),
                "label_mean": float(torch.cat([labels(t, args.labels)[1:] for t in held_out]).mean()),
            }
        report.update(final_loss=sum(losses[-20:]) / max(1, len(losses[-20:])), trees=len(training),
                      seconds_this_run=work.elapsed())
        (out / "eval.json").write_text(json.dumps(report, indent=1))
        _log(f"held-out offline tokens/s: learned {report['learned']['tokens_per_s']:.1f}, "
             f"draft product {report['draft_product']['tokens_per_s']:.1f}; scorer saved in {out}")
        return 0
