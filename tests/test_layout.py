"""The package's shape: the core's top level stays the framework, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"specmix": ROOT / "core", "specmix.plugins": ROOT / "plugins"}
TOP_LEVEL_LINES = 3200


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imported(tree: ast.Module, known: dict[str, Path]) -> set[str]:
    """The specmix modules a module imports when it is imported (not inside functions, not for type checkers)."""
    found: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in known:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imported(ast.parse(path.read_text()), known) for name, path in known.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_itself_through_others():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_core_never_imports_plugins():
    offenders = {name: sorted(m for m in imports if m.startswith("specmix.plugins"))
                 for name, imports in _graph().items() if not name.startswith("specmix.plugins")}
    assert not {name: found for name, found in offenders.items() if found}


def test_the_core_top_level_is_small():
    lines = sum(len(path.read_text().splitlines()) for path in (ROOT / "core").glob("*.py"))
    assert lines <= TOP_LEVEL_LINES, f"core/*.py holds {lines} lines; what is not framework belongs in a subpackage"


def test_every_subpackage_says_what_it_is_for():
    for init in (ROOT / "core").glob("*/__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.parent.name} has no docstring"
