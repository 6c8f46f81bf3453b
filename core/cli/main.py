"""The ``specmix`` command: generate, plugins, methods, bench."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, TextIO, cast

from specmix.composition import KINDS, Method
from specmix.errors import ConfigurationError, SpecmixError, SpecmixWarning
from specmix.options import parse_assignment
from specmix.settings import DecodeSettings


def _option(text: str) -> tuple[str, str, object]:
    """``kind.key=value`` for ``-o``; the value is read as JSON when it parses (numbers, true, null), else kept as text."""
    try:
        kind, key, value = parse_assignment(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if key is None:
        raise argparse.ArgumentTypeError(f"options look like selector.budget=8, not {text!r}")
    return kind, key, value


def _options(triples: Iterable[tuple[str, str, object]] | None) -> dict:
    options: dict = {}
    for kind, key, value in triples or ():
        options.setdefault(kind, {})[key] = value
    return options


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="HF id, local directory or .gguf file (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--cache-dir", help="where converted models and cost curves live (default: $SPECMIX_CACHE_DIR "
                                            "or ~/.cache/specmix)")
    parser.add_argument("--dtype", default="float32", help="model dtype (default: float32)")
    parser.add_argument("--device", help="torch device (default: cpu)")


def _add_settings_arguments(parser: argparse.ArgumentParser, max_new_tokens: int) -> None:
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--seed", type=int)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specmix", description="Lossless speculative decoding, every part a plugin.")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="generate text from a prompt")
    generate.add_argument("prompt")
    _add_model_arguments(generate)
    generate.add_argument("--method", help="a named method (see `specmix methods`; default: the installed default)")
    for kind in KINDS:
        generate.add_argument(f"--{kind}", help=f"a {kind} by name, overriding the method's")
    generate.add_argument("-o", "--option", dest="options", action="append", type=_option, metavar="KIND.KEY=VALUE",
                          help="a component option, e.g. selector.budget=8 (repeatable)")
    _add_settings_arguments(generate, 128)
    generate.add_argument("--stop-id", type=int, action="append", dest="stop_ids", help="stop on this id (repeatable)")
    generate.add_argument("--stream", action="store_true", help="print text as tokens are committed")
    generate.add_argument("--stats", action="store_true", help="print steps, tau and tokens/s to stderr")
    generate.add_argument("--no-chat", action="store_true", help="do not apply the chat template")

    commands.add_parser("plugins", help="installed plugins, their components, distributions and versions")
    commands.add_parser("methods", help="named methods and what they compose")

    bench = commands.add_parser("bench", help="compare methods side by side on the same prompts")
    _add_model_arguments(bench)
    bench.add_argument("--methods", default="hf,hf-pld,vanilla",
                       help="comma-separated: hf (transformers generate), hf-pld (its prompt lookup), or specmix methods, "
                            "optionally with components swapped and options set: "
                            "ptd[drafter.max_riders=4,selector=budget,selector.budget=8]")
    bench.add_argument("--prompts",
                       help="a Spec-Bench/MT-bench style .jsonl file, or 'humaneval' (required unless --report-only)")
    bench.add_argument("--limit", type=int, help="use the first N prompts")
    bench.add_argument("--per-category", type=int, metavar="N",
                       help="use the first N prompts of every category (a subset that covers them all)")
    _add_settings_arguments(bench, 128)
    bench.add_argument("--out", default="bench.json", help="JSON report; the .md table and .png plot go beside it")
    bench.add_argument("--interleave", action="store_true",
                       help="run the specmix methods on each prompt together, a step each in turn, so the machine's "
                            "drift falls on them alike (hf and baselines run whole)")
    bench.add_argument("--resume", action="store_true",
                       help="continue an interrupted run from OUT.runs.jsonl (same methods, prompts and settings)")
    bench.add_argument("--report-only", action="store_true",
                       help="write OUT's reports from the prompts OUT.runs.jsonl records so far, running nothing")
    train = commands.add_parser("train", help="run a training recipe a plugin provides")
    recipes = train.add_subparsers(dest="recipe", required=True, metavar="RECIPE")
    from specmix.registry import Registry

    registry = Registry.load()
    for name in registry.names("trainer"):
        trainer = registry.trainer(name)
        recipe = recipes.add_parser(name, help=trainer.description)
        recipe.set_defaults(trainer=trainer)
        trainer.add_arguments(recipe)

    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None,
                  line: str | None = None) -> None:
    """specmix's own warnings as one line each; everything else as Python prints it."""
    if issubclass(category, SpecmixWarning):
        print(f"specmix: warning: {message}", file=file or sys.stderr)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning


def main(argv: Sequence[str] | None = None) -> int:
    previous, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        args = _parser().parse_args(argv)
        commands = {"generate": _generate, "plugins": _plugins, "methods": _methods, "bench": _bench,
                    "train": lambda args: args.trainer.run(args)}
        return commands[args.command](args)
    except SpecmixError as exc:
        print(f"specmix: error: {exc}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = previous


def _settings(args: argparse.Namespace, **extra: Any) -> DecodeSettings:
    return DecodeSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                          top_p=args.top_p, seed=args.seed, **extra)


def _generate(args: argparse.Namespace) -> int:
    from specmix.api import load

    components = {kind: getattr(args, kind) for kind in KINDS if getattr(args, kind)}
    settings = _settings(args, stop_ids=tuple(args.stop_ids) if args.stop_ids else None)
    decoder = load(args.model, args.method, dtype=args.dtype, cache=args.cache_dir, device=args.device,
                   options=_options(args.options), **components)
    chat = False if args.no_chat else None
    summary: dict[str, object]
    if args.stream:
        decoder.prepare()
        tokens, steps, start = 0, 0, time.perf_counter()
        for step in decoder.stream(args.prompt, settings, chat=chat):
            print(step.text, end="", flush=True)
            tokens, steps = tokens + len(step.tokens), steps + 1
        print()
        seconds = time.perf_counter() - start
        summary = dict(tokens=tokens, steps=steps, tau=tokens / max(steps, 1), tokens_per_s=tokens / max(seconds, 1e-9))
    else:
        generation = decoder.generate(args.prompt, settings, chat=chat)
        print(generation.text)
        summary = dict(tokens=len(generation.tokens), steps=len(generation.steps), tau=generation.tau,
                       tokens_per_s=generation.tokens_per_s, stop=generation.stop_reason)
    if args.stats:
        print(f"[{decoder.composition.label}] {summary['tokens']} tokens in {summary['steps']} target forwards: "
              f"tau {summary['tau']:.2f}, {summary['tokens_per_s']:.1f} tokens/s", file=sys.stderr)
    return 0


def _plugins(args: argparse.Namespace) -> int:
    from specmix.registry import Registry

    for info in Registry.load().plugins():
        origin = f"{info.distribution} {info.version}" if info.distribution else "registered at run time"
        if info.status == "loaded":
            what = ", ".join(f"{r.kind} {r.name}" for r in info.registrations) or "nothing"
        else:
            what = f"{info.status.upper()}: {info.reason}"
        print(f"{info.name}  ({origin}): {what}")
    return 0


def _methods(args: argparse.Namespace) -> int:
    from specmix.registry import Registry

    registry = Registry.load()
    default = registry.default_method()
    for name in registry.names("method"):
        registration = registry.get("method", name)
        method = cast(Method, registration.factory)
        parts = " + ".join(f"{kind} {getattr(method, kind)}" for kind in KINDS)
        print(f"{name}: {parts}  [plugin {registration.plugin}]{'  (default)' if name == default else ''}")
        if method.options:
            print(f"    options: {json.dumps(method.options)}")
        if method.description:
            print(f"    {method.description}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from specmix.bench.runner import report_journal, run_bench

    if args.report_only:
        report = report_journal(args.out)
        print(f"{args.out}: {report['prompts']} of {report['of']} prompts", file=sys.stderr)
        return 0
    if not args.prompts:
        raise ConfigurationError("--prompts is required: a .jsonl file of prompts, or 'humaneval'")
    methods = [m.strip() for m in re.split(r",(?![^\[]*\])", args.methods) if m.strip()]
    if not methods:
        raise ConfigurationError("--methods names no method")
    run_bench(methods=methods, prompts=args.prompts, limit=args.limit, settings=_settings(args, stop_ids=None),
              model=args.model, cache=args.cache_dir, dtype=args.dtype, device=args.device, out=args.out,
              resume=args.resume, per_category=args.per_category, interleave=args.interleave)
    return 0


if __name__ == "__main__":
    sys.exit(main())
