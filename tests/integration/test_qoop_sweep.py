"""QOOP vs static plans under share profiles (benchmarks/qoop_profiles.py, QOOP §2.6) as one
sweep: the same cell rows and the same report on the serial engine and on Spark local[2], and a
sweep folder that lost a cell reruns only that cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "qoop_profiles.py"
# a tiny grid: 2 queries, 1 window per query and class, a day of each profile
TINY = ["--quick", "--runs", "1", "--max-queries", "2", "--hours", "24"]
TIMINGS = {"wall_s", "enumeration_s", "machine", "sweep", "container"}


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *TINY, *args],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip


def untimed(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: untimed(v) for k, v in doc.items() if k not in TIMINGS}
    if isinstance(doc, list):
        return [untimed(v) for v in doc]
    return doc


def cells(folder: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (folder / "cells").glob("*.json")}


def test_the_qoop_sweep_is_the_same_serially_and_on_spark_and_resumes(tmp_path: Path) -> None:
    serial_dir, spark_dir = tmp_path / "serial", tmp_path / "spark"
    serial = bench("--engine", "serial", "--sweep-out", str(serial_dir),
                   "--out", str(tmp_path / "serial.json"))  # fmt: skip
    assert serial.returncode == 0, serial.stderr[-3000:]
    spark = bench("--master", "local[2]", "--sweep-out", str(spark_dir),
                  "--out", str(tmp_path / "spark.json"))  # fmt: skip
    assert spark.returncode == 0, spark.stderr[-3000:]

    a = json.loads((tmp_path / "serial.json").read_text())
    b = json.loads((tmp_path / "spark.json").read_text())
    assert untimed(a) == untimed(b)  # every speedup, share, diagnosis and run detail
    assert a["sweep"]["engine"] == "serial" and b["sweep"]["master"] == "local[2]"
    assert len(a["queries"]) == 2
    expected = sum(
        2 for doc in (a["profile"], a["spot"]["profile"]) for c in ("low", "medium", "high")
        if doc["windows"][c]
    )  # fmt: skip
    assert a["sweep"]["cells"] == expected >= 4
    runs = [a["classes"][c]["runs"] for c in ("low", "medium", "high")]
    assert sum(runs) + sum(a["spot"]["classes"][c]["runs"] for c in a["spot"]["classes"]) == (
        expected
    )

    rows_serial, rows_spark = cells(serial_dir), cells(spark_dir)
    assert len(rows_serial) == expected and rows_serial.keys() == rows_spark.keys()
    assert all(r["status"] == "ok" for r in rows_spark.values())
    assert untimed(rows_serial) == untimed(rows_spark)  # record by record
    assert list((spark_dir / "cells.parquet").glob("*.parquet"))
    summary = (spark_dir / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("profile,class,query,status") and len(summary) == expected + 1

    # Resume: one cell lost; a rerun (here on the serial engine) runs only it, same report.
    lost = sorted(rows_spark)[0]
    kept = {p: p.stat().st_mtime_ns for p in (spark_dir / "cells").glob("*.json")}
    (spark_dir / "cells" / f"{lost}.json").unlink()
    again = bench("--engine", "serial", "--sweep-out", str(spark_dir),
                  "--out", str(tmp_path / "again.json"))  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{expected} cells ({expected - 1} already done" in again.stderr
    assert untimed(json.loads((tmp_path / "again.json").read_text())) == untimed(a)
    after = {p: p.stat().st_mtime_ns for p in (spark_dir / "cells").glob("*.json")}
    rerun = [p.stem for p in after if after[p] != kept.get(p)]
    assert rerun == [lost]
    assert untimed(cells(spark_dir)[lost]) == untimed(rows_serial[lost])
