"""Reports of a benchmark run: tokens/s, speedup over ``hf``, τ, identical rate and a step
profile per method, overall and per category, as JSON, a Markdown table and a plot."""

from __future__ import annotations

import json
import math
import statistics
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs

from specmix.errors import SpecmixWarning
from specmix.settings import DecodeSettings
from specmix.values import Run

if TYPE_CHECKING:
    from specmix.bench.prompts import BenchPrompt


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
        "tau": None if None in steps else tokens / max(sum(cast("list[int]", steps)), 1),
        "identical_rate": identical,
        "tokens": tokens,
        "seconds": seconds,
        **_step_profile(runs),
    }


def _step_profile(runs: Sequence[Run]) -> dict:
    """Where the time and the acceptance go, over the runs that recorded their steps: the share
    of steps accepting at least k drafted tokens (k = 1, 2, ...), positions verified per step,
    and the share of time spent drafting (with building and selecting)."""
    recorded = [r for r in runs if r.accepted is not None]  # the three step fields are recorded together
    if not recorded:
        return {}
    accepted = [a for r in recorded for a in cast("tuple[int, ...]", r.accepted)]
    verified = [v for r in recorded for v in cast("tuple[int, ...]", r.verified)]
    steps = max(len(accepted), 1)
    credits: dict[str, int] = {}
    for run in recorded:
        for name, count in (run.accepted_from or {}).items():
            credits[name] = credits.get(name, 0) + count
    total = max(sum(credits.values()), 1)
    carried: dict[str, dict[str, list]] = {}  # drafter -> what it held -> per prompt, in run order
    for run in recorded:
        for name, held in (run.carried or {}).items():
            for key, value in held.items():
                carried.setdefault(name, {}).setdefault(key, []).append(value)
    return {
        **({"accepted_from_share": {name: count / total for name, count in credits.items()}} if credits else {}),
        **({"carried": carried} if carried else {}),
        "profiled_runs": len(recorded),
        "accepted_at_least": [sum(a >= k for a in accepted) / steps for k in range(1, max(accepted, default=0) + 1)],
        "verified_per_step": sum(verified) / steps,
        "draft_share": sum(cast(float, r.draft_s) for r in recorded) / max(sum(r.seconds for r in recorded), 1e-9),
    }


def build_report(methods: Sequence[str], questions: Sequence[BenchPrompt], results: Mapping[str, Sequence[Run]],
                 settings: DecodeSettings, of: int | None = None, interleaved: bool = False) -> dict:
    categories = sorted({q.category for q in questions})
    hf = results["hf"]

    def summarise(indices: Sequence[int]) -> dict[str, dict]:
        pick = lambda runs: [runs[i] for i in indices]  # noqa: E731
        hf_rate = _summary(pick(hf), None, None, False)["tokens_per_s"]
        return {name: _summary(pick(results[name]), pick(hf), hf_rate, settings.greedy) for name in methods}

    overall = summarise(range(len(questions)))
    by_category = {c: summarise([i for i, q in enumerate(questions) if q.category == c]) for c in categories}
    for name in methods:
        overall[name]["by_category"] = {c: by_category[c][name] for c in categories}
    runs: list[dict[str, Any]] = [
        {"id": q.id, "category": q.category,
         **{name: {"tokens": len(results[name][i].tokens), "seconds": results[name][i].seconds,
                   "steps": results[name][i].steps} for name in methods}}
        for i, q in enumerate(questions)]
    return {
        "settings": attrs.asdict(settings),
        "prompts": len(questions),
        "of": len(questions) if of is None else of,
        "interleaved": interleaved,
        "methods": overall,
        "variants": variant_ratios(runs, methods),
        "runs": runs,
    }


def variant_ratios(runs: Sequence[Mapping[str, Any]], methods: Collection[str]) -> dict[str, dict]:
    """Each method ``X[...]`` run beside ``X`` (the same method with options changed): its tokens/s over ``X``'s per
    prompt, as the mean and two standard errors of those ratios (``runs`` as a report lists them)."""
    variants = {}
    for name in methods:
        base = name.partition("[")[0]
        if base == name or base not in methods:
            continue
        ratios = [_rate(run[name]) / _rate(run[base]) for run in runs if _rate(run[base]) > 0]
        if not ratios:
            continue
        spread = 2 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else None
        variants[name] = {"of": base, "mean": statistics.fmean(ratios), "two_se": spread, "prompts": len(ratios)}
    return variants


def _rate(run: Mapping) -> float:
    return run["tokens"] / run["seconds"] if run["seconds"] > 0 else 0.0


def variant_table(variants: Mapping[str, Mapping]) -> list[str]:
    """Markdown rows for :func:`variant_ratios`."""
    lines = ["| variant | of | tokens/s over its method's (mean ± 2 s.e.) | prompts |", "|---|---|---|---|"]
    for name, row in variants.items():
        spread = "" if row["two_se"] is None else f" ± {row['two_se']:.3f}"
        lines.append(f"| `{name}` | {row['of']} | {row['mean']:.3f}{spread} | {row['prompts']} |")
    return lines


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def markdown(report: dict) -> str:
    methods = report["methods"]
    lines = []
    if report["prompts"] < report["of"]:
        lines += [f"Partial: {report['prompts']} of the run's {report['of']} prompts (`--resume` continues it).", ""]
    if report["interleaved"]:
        lines += ["The specmix methods ran each prompt together, a step each in turn, each timed inside its own "
                  "steps (`--interleave`); other methods ran whole.", ""]
    lines += ["| method | tokens/s | speedup vs hf | τ | identical |", "|---|---|---|---|---|"]
    for name, row in methods.items():
        lines.append(f"| {name} | {row['tokens_per_s']:.2f} | {_fmt(row['speedup_vs_hf'], '{:.2f}x')} | "
                     f"{_fmt(row['tau'], '{:.2f}')} | {_fmt(row['identical_rate'], '{:.2f}')} |")
    categories = list(next(iter(methods.values()))["by_category"])
    lines += ["", "Speedup vs hf (τ; identical rate) per category:", "",
              "| category | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for category in categories:
        cells = []
        for row in methods.values():
            cell = row["by_category"][category]
            cells.append(f"{_fmt(cell['speedup_vs_hf'], '{:.2f}x')} ({_fmt(cell['tau'], '{:.2f}')}; "
                         f"{_fmt(cell['identical_rate'], '{:.2f}')})")
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    if report.get("variants"):  # reports from before variants were compared have none
        lines += ["", "Each method with options changed against the method as it is, prompt by prompt:", "",
                  *variant_table(report["variants"])]
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
        mixes = {name: row["accepted_from_share"] for name, row in profiled.items() if "accepted_from_share" in row}
        if mixes:
            lines += ["", "Which drafter proposed the accepted tokens (a token two drafters proposed counts for both):", ""]
            lines += [f"- {name}: " + ", ".join(f"{drafter} {share:.0%}" for drafter, share in shares.items())
                      for name, shares in mixes.items()]
        memories = {name: row["carried"] for name, row in profiled.items() if "carried" in row}
        if memories:
            lines += ["", "What drafters remembered from earlier generations when each prompt ran (first, mean and "
                      "last prompt of the run):", ""]
            lines += [f"- {name}, {drafter}: " + ", ".join(f"{key} {values[0]}/{sum(values) / len(values):.0f}/{values[-1]}"
                                                          for key, values in held.items())
                      for name, drafters in memories.items() for drafter, held in drafters.items()]
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


def can_plot() -> bool:
    """Whether the plot can be drawn (matplotlib, from the ``bench`` extra); says once when it cannot."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        warnings.warn("matplotlib is not installed (pip install 'specmix[bench]'): the reports are written without "
                      "their plot", SpecmixWarning, stacklevel=2)
        return False
    return True


def write_reports(report: dict, out: Path) -> None:
    """``OUT`` (JSON), ``OUT.md`` (tables) and, when matplotlib is there, ``OUT.png`` (speedup and τ per category)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(markdown(report))
    if can_plot():
        plot(report, out.with_suffix(".png"))
