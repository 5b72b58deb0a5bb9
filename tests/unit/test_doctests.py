"""Every runnable docstring example in the project's packages runs here: a module whose source
holds a ``>>>`` example is collected automatically, so an example added to any module is
checked without a test naming it."""

from __future__ import annotations

import doctest
import importlib

import pytest
from support import REPO

ROOT = REPO
PACKAGES = ("arbiter", "yarn_bridge", "hive_hooks", "qoop_planner", "syndicate")


def modules_with_examples() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                out.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return out


MODULES = modules_with_examples()


def test_examples_are_found() -> None:
    assert len(MODULES) >= 20, MODULES  # 26 modules carry examples today


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, (name, result)
