"""The docs stay true to the tree: shown files are the files, links resolve, the README stays short.

A fenced code block whose first line is ``# PATH`` (a path relative to the repository root)
shows that file: the rest of the block must be the whole file or an exact run of its
whole lines. The plugin example in the README and in ``docs/plugins.md`` is shown that way
from ``contrib/specmix-ngram``, whose own conformance test runs in the suite, so the
example in the docs is a package the kit passes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_LINES = 250
RESULTS = "benchmarks/results"
RESULTS_BYTES = 5 * 1024 * 1024
SHOWN = {
    "contrib/specmix-ngram/pyproject.toml",
    "contrib/specmix-ngram/src/specmix_ngram/plugin.py",
    "contrib/specmix-ngram/tests/test_ngram_conformance.py",
}
"""Files the plugin example must show, in the README or docs/plugins.md (so it cannot quietly go)."""

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
MARKER = re.compile(r"^# ((?:[\w.-]+/)+[\w.-]+)$")
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    info: str
    lines: tuple[str, ...]


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, each with its lines (indentation of the fence removed)."""
    blocks, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, info = opening.groups()
        body, end = [], index + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if closing and closing.group(2)[0] == fence[0] and len(closing.group(2)) >= len(fence) \
                    and not closing.group(3).strip():
                break
            line = lines[end]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip(" "))
            end += 1
        blocks.append(Block(index + 1, info.strip(), tuple(body)))
        index = end + 1
    return blocks


def shown_files(text: str) -> list[tuple[str, Block]]:
    """The blocks that show a file (first line ``# PATH``), with that path."""
    shown = []
    for block in code_blocks(text):
        marker = MARKER.match(block.lines[0]) if block.lines else None
        if marker:
            shown.append((marker.group(1), block))
    return shown


def is_excerpt(shown: tuple[str, ...], lines: list[str]) -> bool:
    """Whether ``shown`` is a non-empty run of whole consecutive ``lines`` (all of them included)."""
    count = len(shown)
    return count > 0 and any(tuple(lines[start:start + count]) == shown for start in range(len(lines) - count + 1))


def drift(root: Path, doc: str) -> list[str]:
    """What the blocks of ``doc`` (relative to ``root``) show that the files they name do not hold."""
    problems = []
    for path, block in shown_files((root / doc).read_text(encoding="utf-8")):
        where = f"{doc}:{block.line}"
        if Path(path).is_absolute() or ".." in Path(path).parts or not (root / path).is_file():
            problems.append(f"{where} shows {path}, which is not a file of the repository")
            continue
        if not is_excerpt(block.lines[1:], (root / path).read_text(encoding="utf-8").splitlines()):
            problems.append(f"{where} shows {path}, but the file does not hold those lines as they are there; "
                            "copy the whole file or a run of its lines into the block again")
    return problems


def relative_links(text: str) -> list[str]:
    """Link targets outside code that are paths in the repository (no scheme, no bare anchor), without fragments."""
    prose = INLINE_CODE.sub("", "\n".join(_outside_code(text)))
    targets = LINK.findall(prose) + [m.group(1) for line in prose.splitlines() if (m := REFERENCE.match(line))]
    return [target.split("#")[0] for target in targets if not EXTERNAL.match(target)]


def _outside_code(text: str) -> list[str]:
    lines = text.splitlines()
    inside = {block.line - 1 + offset for block in code_blocks(text) for offset in range(len(block.lines) + 2)}
    return [line for index, line in enumerate(lines) if index not in inside]


def broken_links(root: Path, doc: str) -> list[str]:
    base = (root / doc).parent
    return [f"{doc} links to {target}, which does not exist" for target in relative_links((root / doc).read_text(
        encoding="utf-8")) if not (base / target).exists()]


def documents(root: Path = ROOT) -> list[str]:
    return ["README.md", *sorted(str(path.relative_to(root)) for path in (root / "docs").glob("*.md"))]


def test_the_readme_stays_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; guides go in docs/"


@pytest.mark.parametrize("doc", documents())
def test_every_relative_link_resolves(doc):
    assert broken_links(ROOT, doc) == []


@pytest.mark.parametrize("doc", documents())
def test_shown_files_are_the_files(doc):
    assert drift(ROOT, doc) == []


def test_the_plugin_example_shows_the_package_the_kit_passes():
    shown = {path for doc in ("README.md", "docs/plugins.md") for path, _ in shown_files((ROOT / doc).read_text())}
    assert SHOWN <= shown, f"the docs no longer show {sorted(SHOWN - shown)}"
    assert "contrib/specmix-ngram/tests" in _pytest_paths(), "the example's conformance test must run in the suite"


def _pytest_paths() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r"^testpaths\s*=\s*\[(.*)\]", text, re.MULTILINE).group(1)


def test_finds_fenced_blocks_and_the_files_they_show():
    text = "\n".join([
        "prose",
        "```python",
        "# contrib/pkg/module.py",
        "import os",
        "```",
        "```bash",
        "# a comment, not a path",
        "ls",
        "```",
        "````markdown",
        "```",
        "# docs/inner.md",
        "```",
        "````",
        "- a list",
        "  ~~~toml",
        "  # contrib/pkg/pyproject.toml",
        "  [project]",
        "  ~~~",
    ])
    blocks = code_blocks(text)
    assert [(block.line, block.info) for block in blocks] == [(2, "python"), (6, "bash"), (10, "markdown"), (16, "toml")]
    assert blocks[2].lines == ("```", "# docs/inner.md", "```")  # a longer fence holds a shorter one
    assert [(path, block.lines[1:]) for path, block in shown_files(text)] == [
        ("contrib/pkg/module.py", ("import os",)), ("contrib/pkg/pyproject.toml", ("[project]",))]


def test_an_excerpt_is_a_run_of_whole_lines():
    lines = ["a = 1", "", "b = 2", "c = 3"]
    assert is_excerpt(("a = 1", "", "b = 2", "c = 3"), lines)
    assert is_excerpt(("b = 2", "c = 3"), lines)
    assert not is_excerpt(("a = 1", "b = 2"), lines)  # lines left out in between
    assert not is_excerpt(("b = 2 ",), lines)  # a trailing space
    assert not is_excerpt(("b = ",), lines)  # part of a line
    assert not is_excerpt((), lines)


def test_finds_relative_links_outside_code():
    text = "\n".join([
        "See [the guide](docs/guide.md#python), [site](https://example.org) and [top](#results).",
        "![plot](benchmarks/results/run.png) and `[not](a-link.md)`.",
        "```",
        "[also not](code.md)",
        "```",
        "[ref]: ../LICENSE",
    ])
    assert relative_links(text) == ["docs/guide.md", "benchmarks/results/run.png", "../LICENSE"]


def _copy(paths: list[str], root: Path) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, root / path)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_check_fails_when_a_shown_file_or_its_block_drifts(tmp_path):
    docs = ["README.md", "docs/plugins.md"]
    _copy(docs + sorted(SHOWN) + ["contrib/specmix-ngram/src/specmix_ngram/drafter.py"], tmp_path)
    assert [problem for doc in docs for problem in drift(tmp_path, doc)] == []

    plugin = tmp_path / "contrib/specmix-ngram/src/specmix_ngram/plugin.py"
    _edit(plugin, 'register("ngram", NgramDrafter)', 'register("ngram2", NgramDrafter)')
    for doc in docs:  # both show the lines that changed
        assert any("shows contrib/specmix-ngram/src/specmix_ngram/plugin.py" in p for p in drift(tmp_path, doc))
    shutil.copyfile(ROOT / "contrib/specmix-ngram/src/specmix_ngram/plugin.py", plugin)

    _edit(tmp_path / "README.md", '    drafter = "ngram"\n', '    drafter = "ngram"  # pinned\n')
    assert any("shows contrib/specmix-ngram/tests/test_ngram_conformance.py" in p for p in drift(tmp_path, "README.md"))
    shutil.copyfile(ROOT / "README.md", tmp_path / "README.md")

    (tmp_path / "contrib/specmix-ngram/pyproject.toml").unlink()
    assert any("not a file of the repository" in p for p in drift(tmp_path, "README.md"))


def test_the_link_check_fails_on_a_missing_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/a.md").write_text("[b](b.md), [up](../README.md)\n")
    (tmp_path / "README.md").write_text("[a](docs/a.md)\n")
    assert broken_links(tmp_path, "README.md") == []
    assert broken_links(tmp_path, "docs/a.md") == ["docs/a.md links to b.md, which does not exist"]


def _tracked(path: str) -> list[str] | None:
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", path], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in listed.stdout.decode().split("\0") if name]


def test_results_hold_only_what_the_docs_cite():
    tracked = _tracked(RESULTS)
    if tracked is None:
        pytest.skip("not a git checkout")
    cited = {str(((ROOT / doc).parent / target).resolve().relative_to(ROOT)) for doc in documents()
             for target in relative_links((ROOT / doc).read_text(encoding="utf-8"))
             if ((ROOT / doc).parent / target).resolve().is_relative_to(ROOT)}
    assert [name for name in tracked if name.endswith(".runs.jsonl")] == [], "per-prompt journals are not committed"
    assert sorted(set(tracked) - cited) == [], "a committed result that no doc cites (docs/results.md)"
    present = [ROOT / name for name in tracked if (ROOT / name).exists()]
    assert sum(path.stat().st_size for path in present) <= RESULTS_BYTES
