"""The README's quick start and API example stay true."""

from __future__ import annotations

import re

from support import REPO

README = REPO / "README.md"


def test_quick_start_is_the_two_make_commands() -> None:
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "make test" in ci


def test_api_example_runs_and_prints_what_it_claims() -> None:
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    r = namespace["r"]
    assert {a: sorted(g) for a, g in r.pf_allocation.items()} == {"a": ["g0"], "b": ["g1"]}
    assert r.c == {"a": 1.0, "b": 0.5}
    assert r.leftover == {"g1": 0.5}
