"""``yarn-arbiter sweep`` on Spark (local[2], from the pyspark wheel): the same rows as the
serial engine, resumable, Parquet and summary.csv written, exit codes. Spark on the local YARN
is in tests/engine/test_sweep_yarn.py."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ARGS = ["--traces", "tiresias/60_job.csv,pollux/workloads/workload-6.csv",
        "--policies", "fifo,las", "--seeds", "0", "--max-jobs", "40", "--no-progress"]  # fmt: skip


def sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "sweep", *args],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def rows(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "cells").glob("*.json")}


METRICS = ("jobs", "finished", "avg_jct_s", "max_rho", "gpu_time_s", "makespan_s")


def test_spark_sweep_equals_the_serial_one_and_resumes(tmp_path: Path) -> None:
    serial = sweep(*ARGS, "--engine", "serial", "--out", str(tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr
    spark = sweep(*ARGS, "--master", "local[2]", "--out", str(tmp_path / "spark"))
    assert spark.returncode == 0, spark.stderr
    a, b = rows(tmp_path / "serial"), rows(tmp_path / "spark")
    assert len(a) == 4 and a.keys() == b.keys()
    for key in a:
        assert b[key]["status"] == "ok"
        assert {m: b[key][m] for m in METRICS} == {m: a[key][m] for m in METRICS}
    parquet = list((tmp_path / "spark" / "cells.parquet").glob("*.parquet"))
    assert parquet and parquet[0].stat().st_size > 0
    with open(tmp_path / "spark" / "summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    assert sorted(r["key"] for r in summary) == sorted(a)
    assert (tmp_path / "spark" / "figures" / "tiresias_60_job.png").stat().st_size > 0

    # Resume: one cell lost; only it runs again, with the same result.
    lost = sorted(b)[0]
    (tmp_path / "spark" / "cells" / f"{lost}.json").unlink()
    again = sweep(*ARGS, "--master", "local[2]", "--out", str(tmp_path / "spark"))
    assert again.returncode == 0, again.stderr
    assert "4 cells (3 already done" in again.stderr
    assert {m: rows(tmp_path / "spark")[lost][m] for m in METRICS} == {
        m: a[lost][m] for m in METRICS
    }


def test_a_failed_cell_exits_1_and_bad_arguments_exit_2(tmp_path: Path) -> None:
    failed = sweep("--traces", "tiresias/60_job.csv,no/such.csv", "--policies", "fifo",
                   "--max-jobs", "5", "--engine", "serial", "--out", str(tmp_path / "f"),
                   "--no-progress")  # fmt: skip
    assert failed.returncode == 1
    assert "1 of 2 cells failed" in failed.stderr and "no such file" in failed.stderr
    bad = sweep("--traces", "tiresias/60_job.csv", "--policies", "nosuch", "--out", str(tmp_path))
    assert bad.returncode == 2 and "unknown policies" in bad.stderr
    knobs = sweep("--traces", "x.csv", "--policies", "fifo", "--knobs", "fifo:", "--out",
                  str(tmp_path), "--knobs", "themis:=3")  # fmt: skip
    assert knobs.returncode == 2 and "--knobs" in knobs.stderr
