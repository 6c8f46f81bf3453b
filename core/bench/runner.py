"""``specmix bench``: methods side by side on the same prompts, in one process, interleaved."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import torch

from specmix.bench.prompts import load_prompts
from specmix.bench.report import Run, build_report, can_plot, write_reports
from specmix.engine import Decoder
from specmix.errors import ConfigurationError
from specmix.models.loading import load_model
from specmix.options import parse_assignment
from specmix.registry import Registry
from specmix.settings import DecodeSettings
from specmix.text import encode
from specmix.values import StepStats

if TYPE_CHECKING:
    import os

    from transformers import GenerationMixin, PreTrainedModel

HF_METHODS = ("hf", "hf-pld")
PLD_TOKENS = 10


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
            try:
                kind, key, value = parse_assignment(item)
            except ConfigurationError as exc:
                raise ConfigurationError(f"method {spec!r}: {exc}") from None
            if key is None:
                components[kind] = value
            else:
                options.setdefault(kind, {})[key] = value
    return name, components, options


def _hf_runner(model: PreTrainedModel, settings: DecodeSettings, lookup: bool) -> Callable[[list[int], int], Run]:
    sampling: dict[str, Any] = dict(do_sample=False, temperature=None, top_k=None, top_p=None)
    if not settings.greedy:
        sampling = dict(do_sample=True, temperature=settings.temperature, top_k=settings.top_k or 0,
                        top_p=settings.top_p or 1.0)
    extra = dict(prompt_lookup_num_tokens=PLD_TOKENS) if lookup else {}

    def run(ids: list[int], max_new_tokens: int) -> Run:
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        start = time.perf_counter()
        out = cast("GenerationMixin", model).generate(
            torch.tensor([ids], device=model.device), attention_mask=torch.ones(1, len(ids), dtype=torch.long,
            device=model.device), max_new_tokens=max_new_tokens, **sampling, **extra)
        seconds = time.perf_counter() - start
        return Run(out[0, len(ids):].tolist(), seconds, None)

    return run


def _specmix_runner(decoder: Decoder, settings: DecodeSettings) -> Callable[[list[int], int], Run]:
    def run(ids: list[int], max_new_tokens: int) -> Run:
        generation = decoder.generate(ids, attrs.evolve(settings, max_new_tokens=max_new_tokens))
        return _specmix_run(decoder, generation.tokens, generation.steps, generation.seconds)

    return run


def _stepped(decoders: Mapping[str, Decoder], ids: list[int], settings: DecodeSettings) -> dict[str, Run]:
    """One prompt's generations, advanced a step each in turn, each timed only inside its own steps.

    A step takes tens of milliseconds, so the machine's drift (on a small CPU, tens of percent
    over a minute) falls on every method alike, where whole runs one after another each meet
    a different stretch of it.
    """
    streams = {name: decoder.stream(ids, settings) for name, decoder in decoders.items()}
    tokens: dict[str, list[int]] = {name: [] for name in streams}
    steps: dict[str, list[StepStats]] = {name: [] for name in streams}
    seconds = dict.fromkeys(streams, 0.0)
    while streams:
        for name, stream in list(streams.items()):
            start = time.perf_counter()
            step = next(stream, None)
            seconds[name] += time.perf_counter() - start
            if step is None:
                del streams[name]
            else:
                tokens[name].extend(step.tokens)
                steps[name].append(step.stats)
    return {name: _specmix_run(decoder, tokens[name], steps[name], seconds[name]) for name, decoder in decoders.items()}


def _specmix_run(decoder: Decoder, tokens: Sequence[int], steps: Sequence[StepStats], seconds: float) -> Run:
    drafters = [slot.name for slot in decoder.composition.drafters]
    credit = None
    if len(drafters) > 1:
        credit = {name: sum(s.accepted_from[i] for s in steps) for i, name in enumerate(drafters)}
    carried = {slot.name: slot.component.carried() for slot in decoder.composition.drafters}
    return Run(tokens, seconds, len(steps), tuple(s.accepted for s in steps), tuple(s.tree_size + s.riders for s in steps),
               sum(s.draft_s + s.build_s + s.select_s for s in steps), credit,
               {name: held for name, held in carried.items() if held is not None} or None)


def _read_journal(path: Path) -> tuple[dict, dict[int, dict[str, Run]]]:
    """The header of ``OUT.runs.jsonl`` and the runs of every prompt it records, by prompt index."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        raise ConfigurationError(f"{path} is empty")
    lines[0].setdefault("interleave", False)  # journals from before --interleave ran whole runs
    fields = set(attrs.fields_dict(Run))  # journals of earlier versions may record what this one no longer does
    return lines[0], {line["index"]: {name: Run(**{key: value for key, value in run.items() if key in fields})
                                      for name, run in line["runs"].items()} for line in lines[1:]}


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


def report_journal(out: str | os.PathLike = "bench.json") -> dict:
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
    report = build_report(header["methods"], [questions[index] for index in finished], results,
                          DecodeSettings(**header["settings"]), of=len(questions),
                          interleaved=header["interleave"])
    write_reports(report, out)
    return report


def run_bench(methods: Sequence[str], prompts: str, limit: int | None, settings: DecodeSettings,
              model: str | os.PathLike | None = None, cache: str | os.PathLike | None = None, dtype: str = "float32",
              device: str | None = None, out: str | os.PathLike = "bench.json", registry: Registry | None = None,
              resume: bool = False, per_category: int | None = None, interleave: bool = False) -> dict:
    """Run every method on every prompt, rotating their order per prompt; write JSON, Markdown and PNG reports.

    With ``interleave`` the specmix methods run a prompt together, a step each in turn
    (:func:`_stepped`), in the place the first of them has in the rotated order.

    Each finished prompt is appended to ``OUT.runs.jsonl``; with ``resume`` a run picks up
    where an interrupted one with the same methods, prompts and settings stopped.
    """
    from tqdm.auto import tqdm

    if "hf" not in methods:
        methods = ["hf", *methods]  # the reference every ratio is taken against
    can_plot()  # says before the run, not after it, that the plot will be missing
    questions = load_prompts(prompts, limit, per_category)
    if not questions:
        raise ConfigurationError(f"{prompts} holds no prompts")
    source = "default" if model is None else str(model)  # what the journal and report name, not the loaded module
    loaded, tokenizer = load_model(model, dtype=dtype, cache=cache, device=device)
    registry = registry or Registry.load()
    runners, decoders = {}, {}
    for name in methods:
        method, components, options = parse_method(name)
        if name in HF_METHODS:
            runners[name] = _hf_runner(loaded, settings, lookup=name == "hf-pld")
        elif method in registry.entries["baseline"]:
            baseline = cast("Callable[..., Callable[[list[int], int], Run]]", registry.get("baseline", method).factory)
            runners[name] = baseline(loaded, tokenizer, settings, options)
        else:
            decoder = Decoder(loaded, registry.compose(method, options=options, **components), tokenizer=tokenizer,
                              cache_dir=cache)
            decoder.prepare()
            runners[name] = _specmix_runner(decoder, settings)
            decoders[name] = decoder
    encoded = [encode(tokenizer, q.text) for q in questions]
    out = Path(out)
    header = {"methods": list(methods), "prompts": prompts, "limit": limit, "per_category": per_category,
              "model": source, "settings": attrs.asdict(settings), "interleave": interleave}
    done = _journal(out, header, resume)

    for runner in tqdm(runners.values(), desc="warm-up", leave=False):
        runner(encoded[0], 16)
    progress = tqdm(total=len(questions) * len(methods), initial=len(done) * len(methods), desc="bench", unit="run")
    with out.with_suffix(".runs.jsonl").open("a") as journal:
        for index, ids in enumerate(encoded):
            if index in done:
                continue
            shift = index % len(methods)
            order = [*methods[shift:], *methods[:shift]]  # rotated, so methods share the machine's drift
            runs = {}
            for name in order:
                if name in runs:
                    continue
                if interleave and name in decoders:
                    together = {other: decoders[other] for other in order if other in decoders}
                    progress.set_postfix_str("+".join(together))
                    runs.update(_stepped(together, ids, settings))
                    progress.update(len(together))
                else:
                    progress.set_postfix_str(name)
                    runs[name] = runners[name](ids, settings.max_new_tokens)
                    progress.update()
            done[index] = runs
            journal.write(json.dumps({"index": index, "runs": {name: attrs.asdict(run) for name, run in runs.items()}})
                          + "\n")
            journal.flush()
    progress.close()

    results = {name: [done[index][name] for index in range(len(questions))] for name in methods}
    report = build_report(methods, questions, results, settings, interleaved=interleave)
    write_reports(report, out)
    return report
