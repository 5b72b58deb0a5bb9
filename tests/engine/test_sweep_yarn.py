"""``yarn-arbiter sweep --master yarn`` on the real local YARN: the cells run in executors in
YARN containers of the chosen queue (YARN lists the sweep's application, FINISHED), with the
same results as the serial engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

ARGS = ["--traces", "tiresias/60_job.csv", "--policies", "fifo,las,themis", "--seeds", "0",
        "--max-jobs", "30", "--no-progress"]  # fmt: skip
METRICS = ("jobs", "finished", "avg_jct_s", "max_rho", "gpu_time_s", "makespan_s")


def sweep(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "sweep", *args],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip


def test_sweep_on_yarn_runs_in_containers_with_the_serial_results(yarn_cluster, tmp_path: Path):
    env = yarn_cluster.env()
    serial = sweep(env, *ARGS, "--engine", "serial", "--out", str(tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr
    on_yarn = sweep(env, *ARGS, "--master", "yarn", "--queue", "default", "--executors", "2",
                    "--out", str(tmp_path / "yarn"))  # fmt: skip
    assert on_yarn.returncode == 0, on_yarn.stderr[-3000:]
    a = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "serial" / "cells").glob("*")}
    b = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "yarn" / "cells").glob("*")}
    assert len(a) == 3 and a.keys() == b.keys()
    for key in a:
        assert {m: b[key][m] for m in METRICS} == {m: a[key][m] for m in METRICS}
    # What YARN itself reports: the sweep's application, in the queue, finished, and it held
    # containers beyond its AM (the executors).
    apps = httpx.get(
        f"{yarn_cluster.rm_url}/ws/v1/cluster/apps",
        params={"applicationTags": "yarn-arbiter-sweep"},
    ).json()["apps"]["app"]
    assert len(apps) == 1
    app = apps[0]
    assert app["queue"] in ("default", "root.default")
    assert app["finalStatus"] == "SUCCEEDED", app
    assert app["applicationType"] == "SPARK"
    assert app["memorySeconds"] > 0 and app["vcoreSeconds"] > 0
    app_part = app["id"].removeprefix("application_")
    containers = {row["container"] for row in b.values()}
    for container in containers:
        assert container.startswith("container_") and f"_{app_part}_" in container, container
        assert not container.endswith("_000001"), "a cell ran in the AM's container"
