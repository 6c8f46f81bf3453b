"""What every training recipe starts from: common options, an output directory that
resumes, the target, the stored prompt set, and progress reporting."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from specmix.models.loading import load_model
from specmix.plugins.trained.prompts import TEMPLATES, stored_prompts

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def add_common_arguments(parser: argparse.ArgumentParser, *, prompts: int, held_out: int, max_new_tokens: int) -> None:
    """The options every recipe takes: target, output and cache directories, prompt counts, exclusions, length, seed."""
    parser.add_argument("--target", help="HF id, directory or .gguf (default: the embedded default model)")
    parser.add_argument("--out", required=True, help="output directory (resumable)")
    parser.add_argument("--cache-dir")
    parser.add_argument("--prompts", type=int, default=prompts, help=f"prompts to use (default {prompts})")
    parser.add_argument("--held-out", type=int, default=held_out, help="prompts kept out of training for evaluation")
    parser.add_argument("--exclude", action="append", default=[], type=Path,
                        help="benchmark prompt files (.jsonl) no training prompt may overlap (repeatable)")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--seed", type=int, default=0)


@attrs.frozen
class Workspace:
    """A recipe's output directory, its target and prompt set, and when the run started."""

    out: Path
    model: PreTrainedModel = attrs.field(eq=False)
    tokenizer: PreTrainedTokenizerBase = attrs.field(eq=False)
    prompts: list[str] = attrs.field(eq=False)
    started: float

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


def open_workspace(args: argparse.Namespace, templates: Iterable[str] = TEMPLATES) -> Workspace:
    """Create ``--out`` (or reopen it), load ``--target`` and make (or read back) the prompt set."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model(args.target, cache=args.cache_dir)
    started = time.perf_counter()
    prompts = stored_prompts(out / "prompts.json", args.prompts, args.seed, args.exclude, templates)
    return Workspace(out, model, tokenizer, prompts, started)


def logger(recipe: str) -> Callable[[str], None]:
    """A function printing ``specmix train RECIPE: message`` lines to stderr."""
    def log(message: str) -> None:
        print(f"specmix train {recipe}: {message}", file=sys.stderr, flush=True)

    return log


@contextlib.contextmanager
def loss_bar(description: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """A progress bar for training steps; the callback takes ``(step, loss)`` or ``(step, total, loss)``."""
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=description, unit="step") as bar:
        def update(step: int, *rest: float) -> None:
            if len(rest) == 2:
                bar.total = rest[0]
            bar.n = step + 1
            bar.set_postfix(loss=f"{rest[-1]:.3f}")
            bar.refresh()

        yield update
