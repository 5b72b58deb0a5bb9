"""The packages' layering: ``arbiter`` imports no other package of the project but ``protos``
(the composition root ``yarn_arbiter`` puts the parts together), the YARN bridge does not
reach up into the composition root, and nothing but tests, benchmarks and the composition root
imports ``syndicate`` (which itself imports only ``arbiter``). Imports are read with
:mod:`ast`, so an import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import REPO

ROOT = REPO


def imported_packages(path: Path) -> dict[str, list[int]]:
    """Top-level package -> line numbers of every absolute import of it in ``path``."""
    out: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            out.setdefault(name.split(".", 1)[0], []).append(node.lineno)
    return out


def offending_imports(package: str, forbidden: set[str]) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name, lines in imported_packages(path).items():
            if name in forbidden:
                rel = path.relative_to(ROOT)
                found += [f"{rel}:{line}: imports {name}" for line in lines]
    return found


def test_the_scan_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from yarn_bridge.rm import RMError\n")
    assert imported_packages(module) == {"os": [1], "yarn_bridge": [4]}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("arbiter", {"yarn_bridge", "hive_hooks", "qoop_planner", "yarn_arbiter", "syndicate"}),
        ("yarn_bridge", {"yarn_arbiter", "hive_hooks", "qoop_planner", "syndicate"}),
        (
            "qoop_planner",
            {"yarn_arbiter", "yarn_bridge", "hive_hooks", "arbiter", "protos", "syndicate"},
        ),
        ("hive_hooks", {"yarn_arbiter", "syndicate"}),
        # Syndicate is job-side: it may use arbiter's pure modules, nothing of the live system.
        ("syndicate", {"yarn_arbiter", "yarn_bridge", "hive_hooks", "qoop_planner", "protos"}),
    ],
)
def test_package_does_not_import(package: str, forbidden: set[str]) -> None:
    assert (ROOT / package).is_dir()
    assert offending_imports(package, forbidden) == []
