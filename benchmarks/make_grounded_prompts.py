"""Input-grounded benchmark prompts: questions answered from a passage, summaries, answers from retrieved documents.

The passages are the documentation of Python's standard library (module and class
docstrings, as ``pydoc`` shows them), so they come with every Python and overlap neither
the training prompts nor MT-bench or HumanEval. Writes MT-bench-style lines (question_id,
category, turns) to ``benchmarks/prompts/grounded.jsonl``::

    python benchmarks/make_grounded_prompts.py
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

OUT = Path(__file__).parent / "prompts" / "grounded.jsonl"
SOURCES = [
    "argparse", "json", "collections", "functools", "itertools", "pathlib", "shutil", "subprocess", "threading",
    "logging", "unittest", "datetime", "random", "statistics", "heapq", "bisect", "csv", "sqlite3", "textwrap",
    "string", "tempfile", "zipfile", "decimal", "fractions", "enum", "dataclasses", "contextlib", "abc", "typing",
    "inspect", "pickle", "copy", "queue", "socket", "urllib.parse", "email.message", "html.parser", "configparser",
    "gzip", "tarfile", "hashlib", "secrets", "uuid", "calendar", "weakref", "types", "operator", "numbers", "struct",
    "codecs", "io", "glob", "fnmatch", "difflib", "pprint", "traceback", "warnings", "timeit", "doctest",
    "concurrent.futures", "selectors", "mmap", "ipaddress", "graphlib", "zoneinfo", "tomllib", "wave", "colorsys",
]
PER_CATEGORY = 8
LENGTH = (400, 1400)


def passages() -> list[tuple[str, str]]:
    """(name, text) of standard-library docstrings of a usable length, whitespace tidied, in a fixed order."""
    found = []
    for name in SOURCES:
        module = importlib.import_module(name)
        candidates = [(name, inspect.getdoc(module) or "")]
        candidates += [(f"{name}.{cls}", inspect.getdoc(obj) or "") for cls, obj in sorted(vars(module).items())
                       if inspect.isclass(obj) and obj.__module__ == module.__name__ and not cls.startswith("_")]
        for title, text in candidates:
            text = re.sub(r"\n{3,}", "\n\n", text).strip()
            if LENGTH[0] <= len(text) <= LENGTH[1]:
                found.append((title, text))
                break
    return found


def prompts() -> list[dict]:
    chosen = passages()
    rows = []
    for title, text in chosen[:PER_CATEGORY]:
        rows.append({"category": "qa", "turns": [
            f"Read the documentation below and answer the question using only what it says.\n\n{text}\n\n"
            f"Question: what is `{title}` for, and how is it used?"]})
    for title, text in chosen[PER_CATEGORY:2 * PER_CATEGORY]:
        rows.append({"category": "summary", "turns": [f"Summarise the following documentation of `{title}` in a short "
                                                      f"paragraph, keeping its terms.\n\n{text}"]})
    rest = chosen[2 * PER_CATEGORY:]
    for first, second in list(zip(rest[0::2], rest[1::2]))[:PER_CATEGORY]:
        rows.append({"category": "rag", "turns": [
            f"Answer the question from the retrieved documents.\n\nDocument 1 ({first[0]}):\n{first[1]}\n\n"
            f"Document 2 ({second[0]}):\n{second[1]}\n\nQuestion: how do `{first[0]}` and `{second[0]}` differ, "
            "and when would you use each?"]})
    return [{"question_id": 9000 + i, **row} for i, row in enumerate(rows)]


def main() -> None:
    rows = prompts()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(row) + "\n" for row in rows))
    counts = {c: sum(r["category"] == c for r in rows) for c in ("qa", "summary", "rag")}
    print(f"{len(rows)} prompts ({counts}) in {OUT}")


if __name__ == "__main__":
    main()
