"""Sweep throughput: cells per minute on Spark ``local[2]`` against the serial loop, one run.

The grid: Philly, six hours from day 40 sampled to load 1.0 on the Themis testbed (seeds
0-5: six samples), under fifo, las, tiresias and themis: 24 cells of 1-10 s. ``--quick``:
Pollux's workloads 1-4 (160 jobs, ``nodes:16:4``) under fifo and las, 8 cells of well under a
second, where Spark's start-up (a JVM, a Python worker per slot) is most of the run.
Both engines run the same cells into fresh folders; each is timed as a whole command
(``yarn-arbiter sweep``, so Spark's start-up counts), and the rows of the two are checked equal.
``--yarn`` adds a third run with ``--master yarn`` (two executors, queue ``default``) on the
local YARN, started for the run by :mod:`yarn_bridge.local_hadoop` (ResourceManager and two
NodeManagers from the cached jars, as ``tests/engine/test_sweep_yarn.py`` does) and stopped
after it; its start-up is reported apart and not counted in the sweep's wall time.
``--yarn-workdir DIR`` uses a local YARN already running from DIR (``yarn-arbiter hadoop up``),
``--yarn-conf DIR`` any YARN by its client configuration (``HADOOP_CONF_DIR``). On YARN each
sweep also pays for its ApplicationMaster container and two executor containers (a JVM and a
Python worker each) before the first cell runs.

On this 2-core machine the ceiling is 2x (two task slots); Spark's JVM and the driver's
threads take some of the same two cores.

Usage: ``python benchmarks/sweep_throughput.py [--quick] [--yarn | --yarn-workdir DIR |
--yarn-conf DIR] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from arbiter.tables import format_table

RESULTS = Path(__file__).resolve().parent / "results"
METRICS = ("jobs", "finished", "avg_jct_s", "max_rho", "gpu_time_s")


def run(args: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "sweep", *args, "--out", str(out),
         "--no-progress"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    rows = {p.stem: json.loads(p.read_text()) for p in (out / "cells").glob("*.json")}
    return wall, rows


@contextlib.contextmanager
def local_yarn(a: argparse.Namespace, tmp: Path) -> Iterator[tuple[dict[str, str] | None, dict]]:
    """The environment for ``--master yarn`` (None without a YARN option) and facts about it;
    a YARN started here is stopped on the way out, whatever happens."""
    if a.yarn_conf:
        yield {**os.environ, "HADOOP_CONF_DIR": str(a.yarn_conf.resolve())}, {"yarn": "given"}
        return
    if not (a.yarn or a.yarn_workdir):
        yield None, {}
        return
    from yarn_bridge.local_hadoop import LocalHadoop, LocalHadoopSpec

    if a.yarn_workdir:
        state = LocalHadoop(a.yarn_workdir).state()
        if state is None:
            raise SystemExit(f"--yarn-workdir {a.yarn_workdir}: no local YARN state there")
        env = {**os.environ, "JAVA_HOME": state.java_home, "HADOOP_CONF_DIR": state.client_conf}
        yield env, {"yarn": f"running in {a.yarn_workdir}"}
        return
    workdir = tmp / "yarn"
    local = LocalHadoop(workdir)
    t0 = time.perf_counter()
    try:
        state = local.up(LocalHadoopSpec(workdir))
        started = time.perf_counter() - t0
        print(f"local YARN up in {started:.0f} s", file=sys.stderr)
        env = {**os.environ, "JAVA_HOME": state.java_home, "HADOOP_CONF_DIR": state.client_conf}
        yield env, {"yarn": "started for this run (RM + 2 NMs x 4 GPUs)", "yarn_up_s": started}
    finally:
        local.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    yarn = ap.add_mutually_exclusive_group()
    yarn.add_argument("--yarn", action="store_true", help="also run on a local YARN started here")
    yarn.add_argument("--yarn-workdir", type=Path, help="also run on the local YARN running here")
    yarn.add_argument("--yarn-conf", type=Path, help="HADOOP_CONF_DIR of a YARN to run on too")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.quick:
        traces = ",".join(f"pollux/workloads/workload-{i}.csv" for i in range(1, 5))
        policies, seeds, extra = "fifo,las", "0", []
    else:
        traces, policies, seeds = "philly/philly.csv", "fifo,las,tiresias,themis", "0-5"
        extra = ["--window", f"{40 * 86400}:{40 * 86400 + 6 * 3600}", "--target-load", "1"]
    grid = ["--traces", traces, "--policies", policies, "--seeds", seeds, *extra]
    engines: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("serial", ["--engine", "serial"], None),
        ("spark local[2]", ["--master", "local[2]"], None),
    ]
    results, reference = [], None
    with tempfile.TemporaryDirectory() as tmp, local_yarn(a, Path(tmp)) as (yarn_env, facts):
        if yarn_env is not None:
            engines.append(("spark yarn (2 executors)", ["--master", "yarn", "--executors", "2"],
                            yarn_env))  # fmt: skip
        for i, (name, extra, env) in enumerate(engines):
            wall, rows = run(grid + extra, Path(tmp) / f"e{i}", env)
            cells_s = sum(r["wall_s"] for r in rows.values())
            if reference is None:
                reference = rows
            same = rows.keys() == reference.keys() and all(
                {m: rows[k][m] for m in METRICS} == {m: reference[k][m] for m in METRICS}
                for k in rows
            )
            results.append({
                "engine": name, "cells": len(rows), "wall_s": wall,
                "cells_per_min": 60 * len(rows) / wall, "sum_cell_s": cells_s,
                "same_rows_as_serial": same,
            })  # fmt: skip
            print(f"{name}: {len(rows)} cells in {wall:.1f} s", file=sys.stderr)
    base = results[0]["cells_per_min"]
    for r in results:
        r["speedup_vs_serial"] = r["cells_per_min"] / base
    print(format_table(
        ["engine", "cells", "wall s", "cells/min", "vs serial", "sum of cell s", "same rows"],
        [[r["engine"], str(r["cells"]), f"{r['wall_s']:.1f}", f"{r['cells_per_min']:.1f}",
          f"{r['speedup_vs_serial']:.2f}x", f"{r['sum_cell_s']:.1f}", str(r["same_rows_as_serial"])]
         for r in results],
    ))  # fmt: skip
    doc = {"grid": {"traces": traces, "policies": policies, "seeds": seeds, "options": extra},
           "results": results, **facts,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}  # fmt: skip
    out = a.out or RESULTS / ("sweep_throughput_quick.json" if a.quick else "sweep_throughput.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0 if all(r["same_rows_as_serial"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
