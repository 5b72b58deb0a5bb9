"""QOOP's share-profile replays as a sweep cell kind (``benchmarks/qoop_replay.py``, QOOP §2.6,
spec A.7): the cell's JSON and key, the encoding of non-finite JCTs, and a cell rebuilt and run
from the zip the Spark engine ships (only the zip on the path, as on a YARN executor) giving the
row the cell gives here. The whole benchmark as a sweep on Spark is in
tests/integration/test_qoop_sweep.py."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import REPO

from arbiter.sim.sweep import Cell, SweepError, SweepStore, run_serial
from arbiter.sim.sweep_spark import kind_path, package_zip

sys.path.insert(0, str(REPO / "benchmarks"))
import qoop_replay
from qoop_replay import QoopCell, cell_runs, decode, encode

CELL = QoopCell(
    profile="cluster", klass="high", query=3, starts=(0.0, 1200.0), sf=500.0, cache="space",
    time_scale=1.4, hours=3.0, vcores=600.0, mb_per_vcore=4096.0, seed=0, hysteresis=0.15,
)  # fmt: skip


def test_a_qoop_cell_survives_json_and_its_key_names_every_field() -> None:
    doc = json.loads(json.dumps(CELL.to_json()))
    assert QoopCell.from_json(doc) == CELL and QoopCell.from_json(doc).key == CELL.key
    assert doc["kind"] == "qoop-profile-replay"
    variants = [replace(CELL, starts=(0.0,)), replace(CELL, klass="low"), replace(CELL, seed=1),
                replace(CELL, time_scale=1.5), replace(CELL, profile="spot"),
                replace(CELL, hysteresis=0.2), replace(CELL, query=4)]  # fmt: skip
    assert len({CELL.key, *(v.key for v in variants)}) == 1 + len(variants)


def test_non_finite_numbers_and_pairs_survive_the_row() -> None:
    run = {"jct_s": math.inf, "const_s": 3.5, "changes": [(1.2, math.inf), (1.0, 1.0)],
           "depths": [1], "plan": "tpcds3-0"}  # fmt: skip
    text = json.dumps(encode(run), allow_nan=False)  # the store refuses NaN and infinities
    back = decode(json.loads(text))
    assert back["jct_s"] == math.inf and back["changes"] == [[1.2, math.inf], [1.0, 1.0]]
    assert back["plan"] == "tpcds3-0" and back["const_s"] == 3.5


def test_a_cell_runs_on_the_serial_engine_into_the_store(tmp_path: Path) -> None:
    store = SweepStore(tmp_path)
    rows = run_serial([CELL], store)
    assert [r["status"] for r in rows] == ["ok"], rows
    (row,) = store.rows([CELL])
    runs = cell_runs(row)
    assert len(runs) == 2 and row["runs_count"] == 2
    for r in runs:
        # QOOP's JCT is finite, and no static plan beats the fastest static plan
        assert math.isfinite(r["qoop"]["jct_s"]) and r["qoop"]["jct_s"] > 0
        assert r["best_static"]["jct_s"] <= r["clarinet"]["jct_s"]
        assert r["best_static"]["jct_s"] <= r["volcano"]["jct_s"]
    assert store.done(CELL)
    assert (store.write_summary([CELL])).read_text().splitlines()[0].split(",")[:3] == [
        "profile",
        "class",
        "query",
    ]


def test_a_failing_cell_is_a_failed_row() -> None:
    row = replace(CELL, profile="moon").run()
    assert row["status"] == "failed" and "unknown profile 'moon'" in row["error"]


def test_the_cell_runs_from_the_shipped_zip_alone(tmp_path: Path) -> None:
    # The Spark engine ships arbiter, protos and the kind's ship() as one zip and rebuilds the
    # cell from its JSON and class path: run exactly that with only the zip on the path.
    zipped = package_zip(tmp_path / "sweep.zip", CELL.ship())
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]);"
        "from arbiter.sim.sweep_spark import _cell_class;"
        "cell = _cell_class(sys.argv[2]).from_json(json.loads(sys.argv[3]));"
        "import qoop_replay, qoop_planner;"
        "assert qoop_replay.__file__.startswith(sys.argv[1]), qoop_replay.__file__;"
        "assert qoop_planner.__file__.startswith(sys.argv[1]), qoop_planner.__file__;"
        "print(json.dumps(cell.run()))"
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(zipped), kind_path(CELL), json.dumps(CELL.to_json())],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    there = json.loads(done.stdout.splitlines()[-1])
    here = CELL.run()
    assert there["status"] == "ok", there
    drop = {"wall_s"}
    assert {k: v for k, v in there.items() if k not in drop} == {
        k: v for k, v in here.items() if k not in drop
    }
    assert kind_path(CELL) == "qoop_replay:QoopCell" and qoop_replay.__name__ == "qoop_replay"


def test_a_kind_an_executor_cannot_import_is_refused() -> None:
    cell = Cell("tiresias/60_job.csv", "fifo", 0, "nodes:16:4")
    assert kind_path(cell) == "arbiter.sim.sweep:Cell"
    script_kind = type("ScriptCell", (Cell,), {"__module__": "__main__"})  # a script's class
    with pytest.raises(SweepError, match="defined in __main__"):
        kind_path(script_kind("tiresias/60_job.csv", "fifo", 0, "nodes:16:4"))
