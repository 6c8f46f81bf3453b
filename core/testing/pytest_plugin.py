"""The ``specmix`` pytest plugin (entry point ``pytest11``): parametrises ConformanceSuite subclasses."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    # Cheap checks first: this hook runs for every test of every project that has specmix installed.
    if cls is None or "composition" not in metafunc.fixturenames:
        return
    if not any(base.__name__ == "ConformanceSuite" for base in cls.__mro__):
        return
    names = cls.composition_names()
    if not names:
        raise ValueError(f"{cls.__name__}: no registered composition fits its pinned components")
    metafunc.parametrize("composition", names, ids=["+".join(n.values()) for n in names])
