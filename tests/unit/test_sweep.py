"""Sweeps (arbiter.sim.sweep): the grid, a cell's key and row, the resumable results folder,
and the serial engine. The Spark engine is in tests/integration/test_sweep_spark.py."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbiter.cluster import load_cluster
from arbiter.sim.run import compare, load_jobs
from arbiter.sim.sweep import (
    Cell,
    SweepError,
    SweepStore,
    default_cluster,
    grid,
    parse_knob_grid,
    run_cell,
    run_serial,
)
from arbiter.sim.sweep_spark import package_zip

TRACE = "tiresias/60_job.csv"


def test_grid_is_the_product_without_duplicates() -> None:
    cells = grid([TRACE, TRACE], ["fifo", "las"], [0, 1, 1], ["nodes:16:4", "nodes:8:4"])
    assert len(cells) == 2 * 2 * 2  # the repeated trace and seed are one
    assert {(c.cluster, c.policy, c.seed) for c in cells} == {
        (cl, p, s) for cl in ("nodes:16:4", "nodes:8:4") for p in ("fifo", "las") for s in (0, 1)
    }
    assert len({c.key for c in cells}) == len(cells)


def test_knob_alternatives_multiply_only_their_policy() -> None:
    knobs = parse_knob_grid("themis:fairness_knob=0.8|0.9,lease_s=300|600; las:")
    assert knobs["themis"] == [
        {"fairness_knob": 0.8, "lease_s": 300}, {"fairness_knob": 0.8, "lease_s": 600},
        {"fairness_knob": 0.9, "lease_s": 300}, {"fairness_knob": 0.9, "lease_s": 600},
    ]  # fmt: skip
    cells = grid([TRACE], ["fifo", "themis"], [0], knobs=knobs)
    assert [c.policy for c in cells].count("fifo") == 1
    assert [c.policy for c in cells].count("themis") == 4


@pytest.mark.parametrize("text", ["nosuch:x=1", "themis", "themis:fairness_knob", "themis:=1|2"])
def test_malformed_knobs_are_named(text: str) -> None:
    with pytest.raises(SweepError, match="--knobs"):
        parse_knob_grid(text)


def test_unknown_policy_or_app_kind_or_empty_grid_is_refused() -> None:
    with pytest.raises(SweepError, match="unknown policies"):
        grid([TRACE], ["fifo", "nosuch"], [0])
    with pytest.raises(SweepError, match="app kind"):
        grid([TRACE], ["fifo"], [0], app_kind="nosuch")
    with pytest.raises(SweepError, match="at least one"):
        grid([TRACE], ["fifo"], [])


def test_default_clusters_per_trace_family() -> None:
    assert default_cluster("pollux/workloads-0.5/workload-3.csv") == "nodes:16:4"
    assert default_cluster("tiresias/n32g4.csv") == "nodes:32:4"
    assert default_cluster("synergy/static_100job_6_3_1100.0.csv") == "nodes:4:8:24:500"
    assert default_cluster("gavel/small_test.trace") == "gavel:36:36:36"
    assert default_cluster("philly/philly.csv") == "themis-testbed"


def test_a_cell_survives_json_and_keeps_its_key() -> None:
    cell = Cell(TRACE, "themis", 3, "nodes:16:4", knobs=(("fairness_knob", 0.8),),
                window=(0.0, 86400.0), target_load=1.0, max_jobs=40,
                app_kind="hyperparameter", jobs_per_app=(2, 5))  # fmt: skip
    again = Cell.from_json(json.loads(json.dumps(cell.to_json())))
    assert again == cell and again.key == cell.key
    assert Cell(TRACE, "themis", 4, "nodes:16:4").key != Cell(TRACE, "themis", 3, "nodes:16:4").key


def test_a_cell_row_equals_compare_on_the_same_jobs() -> None:
    cell = grid([TRACE], ["las"], [0], max_jobs=30)[0]
    row = run_cell(cell)
    assert row["status"] == "ok" and row["key"] == cell.key
    cluster = load_cluster("nodes:16:4")
    direct = compare(load_jobs(TRACE, cluster=cluster, max_jobs=30), cluster, ["las"])[0].summary
    for key in ("jobs", "finished", "avg_jct_s", "max_rho", "gpu_time_s"):
        assert row[key] == pytest.approx(direct[key]), key


def test_a_failing_cell_is_a_failed_row_not_an_exception() -> None:
    row = run_cell(Cell("no/such/trace.csv", "fifo", 0, "nodes:16:4"))
    assert row["status"] == "failed"
    assert "no such file" in row["error"]


def test_serial_sweep_resumes_and_reruns_only_what_is_missing(tmp_path: Path) -> None:
    cells = grid([TRACE], ["fifo", "las"], [0, 1], max_jobs=20)
    store = SweepStore(tmp_path / "out")
    first = run_serial(cells, store)
    assert sorted(r["key"] for r in first) == sorted(c.key for c in cells)
    # Everything done: a second run runs nothing.
    assert run_serial(cells, SweepStore(tmp_path / "out")) == []
    # A lost cell and a damaged one are run again; the others are not.
    (tmp_path / "out" / "cells" / f"{cells[0].key}.json").unlink()
    (tmp_path / "out" / "cells" / f"{cells[1].key}.json").write_text("{not json")
    again = run_serial(cells, SweepStore(tmp_path / "out"))
    assert sorted(r["key"] for r in again) == sorted([cells[0].key, cells[1].key])
    assert not list((tmp_path / "out" / "cells").glob("*.tmp"))


def test_failed_cells_run_again_and_the_summary_has_one_row_per_cell(tmp_path: Path) -> None:
    good = grid([TRACE], ["fifo"], [0], max_jobs=10)
    bad = [Cell("no/such.csv", "fifo", 0, "nodes:16:4")]
    store = SweepStore(tmp_path)
    run_serial(good + bad, store)
    assert [r["key"] for r in run_serial(good + bad, store)] == [bad[0].key]
    with open(store.write_summary(good + bad)) as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["policy"], r["status"]) for r in rows] == [("fifo", "ok"), ("fifo", "failed")]
    assert float(rows[0]["jobs"]) == 10 and rows[1]["error"]


def test_an_output_folder_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SweepError, match="cannot create"):
        SweepStore(blocker / "out")


def test_cells_without_load_options_keep_the_keys_they_always_had() -> None:
    cell = Cell(TRACE, "themis", 3, "nodes:16:4", knobs=(("fairness_knob", 0.8),))
    fields = {"trace": TRACE, "policy": "themis", "seed": 3, "cluster": "nodes:16:4",
              "knobs": [["fairness_knob", 0.8]], "window": None, "target_load": None,
              "max_jobs": None, "app_kind": "single", "jobs_per_app": [1, 15]}  # fmt: skip
    old_key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    assert "load" not in cell.to_json() and cell.key == old_key
    with_load = grid([TRACE], ["themis"], [3], knobs={"themis": [{"fairness_knob": 0.8}]},
                     load={"max_gpus": 2})[0]  # fmt: skip
    assert with_load.key != cell.key


def test_load_options_and_tuple_knobs_survive_json() -> None:
    cell = grid([TRACE], ["tiresias"], [0], knobs={"tiresias": [{"thresholds": (57600.0,)}]},
                load={"max_gpus": 4, "min_duration_s": 10})[0]  # fmt: skip
    again = Cell.from_json(json.loads(json.dumps(cell.to_json())))
    assert again == cell and again.key == cell.key
    assert dict(again.knobs)["thresholds"] == (57600.0,)
    assert dict(again.load) == {"max_gpus": 4, "min_duration_s": 10}


def test_unknown_load_options_are_refused() -> None:
    with pytest.raises(SweepError, match="unknown load options \\['max_gpu'\\]"):
        grid([TRACE], ["fifo"], [0], load={"max_gpu": 1})


def test_a_cells_load_options_reach_the_trace_and_its_worst_app_is_named() -> None:
    cluster = load_cluster("nodes:16:4")
    everything = load_jobs(TRACE, cluster=cluster)
    small = load_jobs(TRACE, cluster=cluster, max_gpus=1)
    assert 0 < len(small) < len(everything)  # the filter matters on this trace
    row = run_cell(grid([TRACE], ["las"], [0], load={"max_gpus": 1})[0])
    assert row["status"] == "ok" and row["jobs"] == len(small)
    apps = run_cell(grid([TRACE], ["fifo"], [0], app_kind="hyperparameter",
                         jobs_per_app=(2, 4))[0])  # fmt: skip
    worst = apps["worst_app"]
    assert worst["rho"] == pytest.approx(apps["max_rho_app"]) and worst["jobs"] >= 2
    assert worst["act_s"] == pytest.approx(worst["rho"] * worst["isolated_act_s"])


def test_shipped_cluster_specs_load_from_the_package_zip_executors_import(tmp_path: Path) -> None:
    # On YARN the executors import arbiter from the zip the sweep ships (addPyFile), not a folder.
    zipped = package_zip(tmp_path / "arbiter-sweep.zip")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import arbiter.cluster as c; "
            "assert c.__file__.startswith(sys.argv[1]), c.__file__; "
            "print(c.load_cluster('themis-testbed').num_gpus)")  # fmt: skip
    env = {"PATH": os.environ.get("PATH", "")}  # no PYTHONPATH: only the zip has arbiter
    done = subprocess.run([sys.executable, "-c", code, str(zipped)], capture_output=True,
                          text=True, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == load_cluster("themis-testbed").num_gpus


def test_the_sweep_command_passes_the_trace_filters_to_every_cell(tmp_path: Path, capsys) -> None:
    """``--max-gpus``, ``--min-duration`` and ``--max-duration`` reach the cells (their keys and
    rows) and the jobs each cell loads."""
    from yarn_arbiter.cli import main

    window = (40 * 86400.0, 40.2 * 86400.0)
    out = tmp_path / "sweep"
    argv = ["sweep", "--traces", "philly/philly.csv", "--policies", "fifo", "--seeds", "0",
            "--clusters", "nodes:4:8", "--window", f"{window[0]:.0f}:{window[1]:.0f}",
            "--max-gpus", "2", "--min-duration", "600", "--max-duration", "86400",
            "--engine", "serial", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    (path,) = (out / "cells").glob("*.json")
    row = json.loads(path.read_text())
    load = {"max_gpus": 2, "min_duration_s": 600.0, "max_duration_s": 86400.0}
    assert dict(Cell.from_json(row["cell"]).load) == load
    cluster = load_cluster("nodes:4:8")
    filtered = load_jobs("philly/philly.csv", cluster=cluster, time_window=window, **load)
    unfiltered = load_jobs("philly/philly.csv", cluster=cluster, time_window=window)
    assert 0 < len(filtered) < len(unfiltered)  # the filters matter on this window
    assert row["status"] == "ok" and row["jobs"] == len(filtered)
    capsys.readouterr()
    for bad in (["--max-gpus", "0"], ["--min-duration", "-5"], ["--max-duration", "x"]):
        with pytest.raises(SystemExit) as exc:
            main([*argv[:-2], "--out", str(tmp_path / "bad"), *bad])
        assert exc.value.code == 2
        assert bad[0] in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = capsys.readouterr().out
    assert all(flag in text for flag in ("--max-gpus", "--min-duration", "--max-duration"))
