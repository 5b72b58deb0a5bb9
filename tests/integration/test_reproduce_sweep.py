"""The reproduction report as one sweep (benchmarks/reproduce_papers.py): the same records
whichever engine runs its cells (serial, Spark local[2]), and a sweep folder resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "reproduce_papers.py"
PARTS = ["--quick", "--only", "afs,themis"]


def report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPORT), *PARTS, *args],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip


def test_the_report_is_the_same_on_the_serial_engine_and_on_spark(tmp_path: Path) -> None:
    serial = report("--engine", "serial", "--out", str(tmp_path / "serial.json"))
    assert serial.returncode == 0, serial.stderr[-3000:]
    sweep = tmp_path / "sweep"
    spark = report("--master", "local[2]", "--sweep-out", str(sweep),
                   "--out", str(tmp_path / "spark.json"))  # fmt: skip
    assert spark.returncode == 0, spark.stderr[-3000:]
    a = json.loads((tmp_path / "serial.json").read_text())
    b = json.loads((tmp_path / "spark.json").read_text())
    assert [r["part"] for r in a] == ["afs"] * 6 + ["themis"] * 3
    assert a == b  # every claim, ratio and note
    assert all(isinstance(r["our_ratio"], float) and r["our_ratio"] > 0 for r in a)
    cells = sorted((sweep / "cells").glob("*.json"))
    rows = [json.loads(p.read_text()) for p in cells]
    assert len(rows) == 6 + 6 and all(r["status"] == "ok" for r in rows)
    assert {r["policy"] for r in rows} >= {"afs-l", "afs-p", "srtf", "gandiva", "optimus"}
    assert list((sweep / "cells.parquet").glob("*.parquet"))

    # Resume: one cell lost; a rerun (here on the serial engine) runs only it, same report.
    cells[0].unlink()
    again = report("--engine", "serial", "--sweep-out", str(sweep),
                   "--out", str(tmp_path / "again.json"))  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "12 cells (11 already done" in again.stderr
    assert json.loads((tmp_path / "again.json").read_text()) == a
