"""Enforcement on a real YARN: how fast arbiter decisions become (and stop being) containers.

Everything runs on a real local Hadoop 3.5.0 (``yarn_bridge.local_hadoop``: one RM, two
NodeManagers with 4 ``yarn.io/gpu`` each), started in a temp dir or taken from ``--workdir``
(then left running). What YARN reports is read from the RM's REST API; every wait is a poll
(every ``--probe-seconds``, 0.05 s) with a deadline, so a latency below includes up to one probe
period and one round of REST calls (~10-30 ms here) of observation delay. Four measurements:

1. **ML leases -> containers** (``--reps`` repetitions, each with a fresh ``yarn-arbiter serve
   --rm-url`` and journal on the same cluster, 5 s leases, Themis policy, RM poll
   ``--rm-poll-seconds``): ``yarn-arbiter submit --command JOB --gpus 8`` (the Java lease AM +
   ``yarn_bridge.lease_am``). *Lease granted -> container*, per leased machine: from the
   lease's ``start_unix_s`` (first lease naming that machine, ``Admin.ListLeases`` polled) to
   (a) the RM's ``/ws/v1/cluster/nodes`` showing that node's ``usedResource`` ``yarn.io/gpu`` at
   the leased count (the RM counts a container from its allocation), (b) that NodeManager's
   ``/ws/v1/node/containers`` listing the container RUNNING and (c) the job process starting
   in it (the job writes ``date +%s.%N``). *Revocation -> released*: ``Admin.DrainNode`` of one
   leased machine with grace 0 (no undrain exists, hence the fresh arbiter per repetition; the
   machine alternates) -> the lease gone from ``ListLeases``, the node's ``usedResource`` GPUs
   at 0, the app's ``resourceInfo`` GPUs down to what stays leased, the container no longer
   live on its NodeManager (the RM frees resources when the AM releases a container; the
   NodeManager says when the process is gone).
2. **App finished -> leases freed**, two paths compared in the same repetition: the job exits 0
   (the ``done`` file is touched; the AM releases its leases and unregisters) -> no lease in
   ``ListLeases``, the app FINISHED/SUCCEEDED in YARN, no GPU used on any node, none of the
   app's containers (the AM's included) live on a NodeManager; and a second app (4 GPUs) killed
   through YARN only (``PUT /apps/{id}/state KILLED``) -> the same four, the leases freed by
   the arbiter's watcher (poll every ``--rm-poll-seconds``; the arbiter's log says how many
   GPUs the watcher freed, which tells the two paths apart).
3. **Share change -> executors** (``hive_hooks.yarn_engine.YarnHiveServer`` on the cluster,
   executors of 1 core / 1024 MB, at most 4; started once): ``EngineControl.apply_share`` from 1
   to 3 executors and back to 1, ``--reps`` times -> YARN's ``runningContainers`` /
   ``allocatedVCores`` / ``allocatedMB`` of the engine's app at the new target, the executor
   containers RUNNING (up) or gone (down) on the NodeManagers, and Spark's own view on the
   control endpoint's ``/status`` (up: 3 executors registered; down: the surplus killed, then
   gone from Spark's executor list).
4. **The bridge's polling cost against the RM**: ``yarn_bridge.bridge_cli.Bridge.tick`` (the
   watcher's poll of the RM, then the enforcer) in this process against the real RM, ticked
   every 0.5 s and every 5 s for ``--poll-window`` seconds each, between two idle windows
   (nobody polls): time per tick, HTTP requests per tick and by endpoint (httpx event hook),
   and the RM JVM's CPU (``psutil`` on the RM pid from ``LocalHadoop.status()``) as a share of
   one core. The RM's CPU per poll comes from a burst of ``--burst`` back-to-back ticks, the
   idle rate over the same time taken out (a window of 8 polls at 5 s is too few to see one
   poll's cost above the NodeManagers' heartbeats). The arbiter and the engine are stopped
   first so that only the NodeManagers and this bridge talk to the RM.

Reported: p50 / p95 and n per latency (seconds), the polling rows in milliseconds. Other
processes share this 2-core machine (tests with their own clusters): the load average at start
and end is recorded with the results.

Usage: ``python benchmarks/yarn_enforcement.py [--reps N] [--workdir DIR] [--parts ml,poll,share]
[--out PATH]``. Writes ``benchmarks/results/yarn_enforcement.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from arbiter.localhost import wait_until
from arbiter.tables import format_table
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from yarn_bridge.local_hadoop import (
    HADOOP_VERSION,
    ClusterState,
    HadoopError,
    LocalHadoop,
    LocalHadoopSpec,
    build_am_jar,
)
from yarn_bridge.served import ServedArbiter, gpus_by_machine

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
FINAL = ("FINISHED", "FAILED", "KILLED")
#: The arbiter's knobs for the ML part (as the tests on a real YARN: short leases, quick rounds).
KNOBS = {
    "ARBITER_LEASE_SECONDS": "5",
    "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.2",
    "ARBITER_BID_DEADLINE_SECONDS": "1",
    "ARBITER_AUCTION_WORKER_PROCESS": "false",
}
QUERY = "bench-q"


class BenchError(RuntimeError):
    """Something the benchmark waited for did not happen in time (the message says what)."""


# ----------------------------------------------------------------------------- statistics


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))] if s else float("nan")


def summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": pct(values, 50), "p95": pct(values, 95),
            "min": min(values, default=float("nan")), "max": max(values, default=float("nan")),
            "samples": [round(v, 4) for v in values]}  # fmt: skip


# ----------------------------------------------------------------------------- waiting


def wait_for(what: str, probe: Callable[[], Any], timeout: float, every: float = 0.1) -> Any:
    """:func:`arbiter.localhost.wait_until`, failing with :class:`BenchError`."""
    return wait_until(what, probe, timeout, every, error=BenchError)


def milestones(
    what: str, t0: float, probes: Mapping[str, Callable[[], bool]], timeout: float, every: float
) -> dict[str, float]:
    """Poll every probe until each has been true once; seconds from ``t0`` (``time.time()``)
    to the first poll that saw it. Raises :class:`BenchError` naming the missing ones."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(probes):
        for name, probe in probes.items():
            if name not in seen and probe():
                seen[name] = time.time() - t0
        if len(seen) == len(probes):
            break
        if time.monotonic() > deadline:
            missing = ", ".join(k for k in probes if k not in seen)
            raise BenchError(f"timed out after {timeout:g} s waiting for {what}: {missing}")
        time.sleep(every)
    return seen


# ----------------------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    local: LocalHadoop
    state: ClusterState
    owned: bool  # started here: stopped at the end

    @property
    def rm_url(self) -> str:
        return self.local.active_rm() or self.state.rm_url

    @property
    def node_ids(self) -> list[str]:
        return [d.node_id for d in self.state.daemons if d.node_id]

    def env(self) -> dict[str, str]:
        return {**os.environ, "JAVA_HOME": self.state.java_home,
                "HADOOP_CONF_DIR": self.state.client_conf}  # fmt: skip

    def rm_pid(self) -> int:
        active = self.rm_url
        rms = [d for d in self.local.status()["daemons"] if d["name"].startswith("rm")]
        mine = [d for d in rms if d["webapp"] == active and d["alive"]] or rms
        if not mine:
            raise BenchError(f"no ResourceManager daemon in {self.state.workdir}")
        return int(mine[0]["pid"])


#: NodeManager container states in which the container's process may still run.
NM_LIVE = frozenset({"NEW", "LOCALIZING", "LOCALIZED", "SCHEDULED", "RUNNING", "RELAUNCHING",
                     "REINITIALIZING", "REINITIALIZING_AWAITING_KILL", "PAUSING", "PAUSED",
                     "RESUMING", "KILLING"})  # fmt: skip


class RMView:
    """What YARN reports: the RM's REST API, and each NodeManager's own container list
    (``/ws/v1/node/containers``: the RM frees a container's resources as soon as its AM
    releases it, the NodeManager says when its process is actually running or gone)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.http = httpx.Client(timeout=5.0, trust_env=False)
        self.nm_web = {d.node_id: d.webapp for d in cluster.state.daemons if d.node_id}

    def get(self, path: str) -> dict:
        r = self.http.get(f"{self.cluster.rm_url}/ws/v1/cluster{path}")
        r.raise_for_status()
        return r.json()

    @staticmethod
    def _gpu(resource: dict) -> int:
        infos = (resource or {}).get("resourceInformations", {}).get("resourceInformation", [])
        return next((int(r["value"]) for r in infos if r["name"] == "yarn.io/gpu"), 0)

    def gpus_by_node(self) -> dict[str, int]:
        nodes = (self.get("/nodes").get("nodes") or {}).get("node") or []
        used = {n["id"]: self._gpu(n.get("usedResource", {})) for n in nodes}
        return {node: n for node, n in used.items() if n}

    def app(self, yarn_id: str) -> dict:
        return self.get(f"/apps/{yarn_id}")["app"]

    def app_gpus(self, yarn_id: str) -> int:
        parts = self.app(yarn_id).get("resourceInfo", {}).get("resourceUsagesByPartition", [])
        return sum(self._gpu(p.get("used", {})) for p in parts)

    def containers(self, yarn_id: str, node: str | None = None, *, am: bool = False) -> list[dict]:
        """The app's containers as the NodeManagers list them (``node``: that one only;
        ``am``: the AM's container too)."""
        mark = "_" + yarn_id.removeprefix("application_") + "_"
        out = []
        for nid, web in self.nm_web.items():
            if node is not None and nid != node:
                continue
            got = self.http.get(f"{web}/ws/v1/node/containers").json().get("containers") or {}
            for c in got.get("container") or []:
                if mark in c["id"] and (am or not c["id"].endswith("_000001")):
                    out.append(c)
        return out

    def running(self, yarn_id: str, node: str | None = None) -> int:
        """The app's job containers RUNNING on the NodeManagers (``node``: that one)."""
        return sum(c["state"] == "RUNNING" for c in self.containers(yarn_id, node))

    def nm_live(self, yarn_id: str, node: str | None = None, *, am: bool = False) -> int:
        return sum(c["state"] in NM_LIVE for c in self.containers(yarn_id, node, am=am))

    def kill(self, yarn_id: str) -> None:
        r = self.http.put(f"{self.cluster.rm_url}/ws/v1/cluster/apps/{yarn_id}/state",
                          json={"state": "KILLED"})  # fmt: skip
        if r.status_code not in (200, 202):
            raise BenchError(f"PUT /apps/{yarn_id}/state KILLED: HTTP {r.status_code} {r.text}")

    def close(self) -> None:
        self.http.close()


def start_cluster(workdir: Path | None, tmp: Path) -> Cluster:
    if workdir is not None:
        local = LocalHadoop(workdir)
        state = local.state()
        if state is None or not any(local.running().values()) or local.active_rm() is None:
            raise BenchError(f"no running cluster in {workdir} (yarn-arbiter hadoop up "
                             f"--workdir {workdir})")  # fmt: skip
        return Cluster(local, state, owned=False)
    local = LocalHadoop(tmp / "yarn")
    print(f"starting a local Hadoop {HADOOP_VERSION} in {local.workdir} ...", flush=True)
    state = local.up(LocalHadoopSpec(local.workdir, nm_liveness_ms=4000), timeout_s=240)
    print(f"  up in {state.startup_s:.1f} s, RM {state.rm_url}", flush=True)
    return Cluster(local, state, owned=True)


def am_jar() -> Path:
    """The lease AM's jar (``java/am``), built with Maven when missing or stale."""
    try:
        return build_am_jar(progress=lambda m: print(m, flush=True))
    except HadoopError as e:
        raise BenchError(str(e)) from None


# ----------------------------------------------------------------------------- the arbiter


class Arbiter(ServedArbiter):
    """``yarn-arbiter serve --rm-url`` in a subprocess (own journal), with an Admin stub."""

    def __init__(self, workdir: Path, rm_url: str, poll_s: float) -> None:
        super().__init__(workdir, rm_url, knobs=KNOBS, poll_s=poll_s)

    def machines(self) -> set[str] | None:
        try:
            state = self.state()
        except RuntimeError as e:
            raise BenchError(str(e)) from None
        return None if state is None else {g.machine for g in state.gpus}


by_machine = gpus_by_machine


def node_of(machine: str, nodes: list[str]) -> str:
    """The YARN node id of an arbiter machine (host:port for NMs sharing a host, else host)."""
    return next((n for n in nodes if machine in (n, n.rsplit(":", 1)[0])), machine)


def submit(cluster: Cluster, arb: Arbiter, jar: Path, job: str, gpus: int) -> tuple[str, str]:
    """``yarn-arbiter submit --command``: (YARN app id, arbiter app id)."""
    out = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "submit", "--rm-url", cluster.rm_url,
         "--arbiter", f"127.0.0.1:{arb.port}", "--gpus", str(gpus), "--name", "bench-lease-am",
         "--queue", "gpu", "--command", job, "--am-jar", str(jar)],
        env=cluster.env(), capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    if out.returncode != 0 or " is arbiter app " not in out.stderr:
        raise BenchError(f"yarn-arbiter submit failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout.strip(), out.stderr.rsplit(" is arbiter app ", 1)[1].split()[0]


# ----------------------------------------------------------------------------- part 1 + 2


def port(machine: str) -> str:
    return machine.rsplit(":", 1)[-1]


def job_starts(path: Path) -> dict[str, float]:
    """Node port -> when the job started in a container there (the job's own ``date``)."""
    out: dict[str, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                out.setdefault(parts[1], float(parts[0]))
    return out


def grant_to_running(
    rm: RMView, arb: Arbiter, yarn_id: str, app_id: str, starts: Path, machines: int,
    nodes: list[str], every: float,
) -> tuple[dict[str, int], dict[str, list[float]]]:  # fmt: skip
    """Wait until the app's leases cover ``machines`` machines, the RM shows each leased node's
    GPUs in use, its NodeManager runs the container and the job started in it; per machine,
    the seconds from the lease's start to each."""
    granted: dict[str, float] = {}  # machine -> first lease start seen
    in_yarn: dict[str, float] = {}  # machine -> first time.time() the RM showed its GPUs
    on_nm: dict[str, float] = {}  # machine -> first time its NodeManager ran the container
    deadline = time.monotonic() + 180
    while True:
        app = rm.app(yarn_id)
        if app["state"] in FINAL:
            raise BenchError(f"{yarn_id} ended {app['state']} before running: "
                             f"{app.get('diagnostics', '')[:500]}")  # fmt: skip
        leases = arb.leases(app_id)
        leased = by_machine(leases)
        for x in leases:
            for m in {g.rsplit("/s", 1)[0] for g in x.gpu_ids}:
                granted[m] = min(granted.get(m, x.start_unix_s), x.start_unix_s)
        used = rm.gpus_by_node()
        now = time.time()
        for m, n in leased.items():
            if m not in in_yarn and used.get(node_of(m, nodes), 0) >= n:
                in_yarn[m] = now
        for m in leased:
            if m not in on_nm and rm.running(yarn_id, node_of(m, nodes)):
                on_nm[m] = time.time()
        jobs = job_starts(starts)
        done = [m for m in leased if m in in_yarn and m in on_nm and port(m) in jobs]
        if len(leased) >= machines and len(done) == len(leased):
            return leased, {
                "grant_yarn": [in_yarn[m] - granted[m] for m in leased],
                "grant_nm": [on_nm[m] - granted[m] for m in leased],
                "grant_job": [jobs[port(m)] - granted[m] for m in leased],
            }
        if time.monotonic() > deadline:
            raise BenchError(
                f"timed out after 180 s waiting for {yarn_id} to run on {machines} leased "
                f"machines: leased {leased}, YARN GPUs {used}, jobs started on ports {list(jobs)}"
            )
        time.sleep(every)


def ml_rep(
    k: int, cluster: Cluster, rm: RMView, jar: Path, workdir: Path, poll_s: float, every: float,
    submitted: list[str], res: dict[str, list[float]],
) -> None:  # fmt: skip
    nodes = cluster.node_ids
    arb = Arbiter(workdir, cluster.rm_url, poll_s)
    try:
        wait_for("the arbiter to serve the RM's nodes",
                 lambda: arb.machines() == set(nodes), timeout=90, every=0.2)  # fmt: skip
        starts, done = workdir / "starts", workdir / "done"
        job = (f'echo "$(date +%s.%N) $NM_PORT $CONTAINER_ID" >> {starts}; '
               f"while [ ! -e {done} ]; do sleep 0.05; done")  # fmt: skip
        yarn_id, app_id = submit(cluster, arb, jar, job, 8)
        submitted.append(yarn_id)
        leased, lat = grant_to_running(rm, arb, yarn_id, app_id, starts, 2, nodes, every)
        for name, v in lat.items():
            res[name] += v

        # Revocation: drain one leased machine, no grace (alternating between repetitions).
        victim = sorted(leased)[k % len(leased)]
        vnode = node_of(victim, nodes)
        rest = sum(n for m, n in leased.items() if m != victim)
        t0 = time.time()
        arb.call("DrainNode", pb.DrainNodeRequest(machine=victim, grace_seconds=0))
        got = milestones(f"the revocation of {victim} to show", t0, {
            "arbiter": lambda: victim not in by_machine(arb.leases(app_id)),
            "node": lambda: rm.gpus_by_node().get(vnode, 0) == 0,
            "app": lambda: rm.app_gpus(yarn_id) == rest,
            "nm": lambda: rm.nm_live(yarn_id, vnode) == 0,
        }, timeout=60, every=every)  # fmt: skip
        for name, v in got.items():
            res[f"revoke_{name}"].append(v)
        if rm.app(yarn_id)["state"] != "RUNNING":
            raise BenchError(f"{yarn_id} did not survive the revocation of one machine")

        # The job exits 0 in the remaining container: the app ends, its leases are freed.
        t0 = time.time()
        done.touch()
        got = milestones(f"{yarn_id} to finish and free its leases", t0, {
            "leases": lambda: not arb.leases(app_id),
            "yarn": lambda: rm.app(yarn_id)["state"] in FINAL,
            "gpus": lambda: not rm.gpus_by_node(),
            "nm": lambda: rm.nm_live(yarn_id, am=True) == 0,
        }, timeout=90, every=every)  # fmt: skip
        app = rm.app(yarn_id)
        if (app["state"], app["finalStatus"]) != ("FINISHED", "SUCCEEDED"):
            raise BenchError(f"{yarn_id} ended {app['state']}/{app['finalStatus']}: "
                             f"{app.get('diagnostics', '')[:500]}")  # fmt: skip
        for name, v in got.items():
            res[f"finish_{name}"].append(v)

        # A second app, killed through YARN only: the watcher is what frees its leases.
        starts2 = workdir / "starts2"
        job2 = f'echo "$(date +%s.%N) $NM_PORT $CONTAINER_ID" >> {starts2}; sleep 600'
        yarn2, app2 = submit(cluster, arb, jar, job2, 4)
        submitted.append(yarn2)
        _, lat = grant_to_running(rm, arb, yarn2, app2, starts2, 1, nodes, every)
        for name, v in lat.items():
            res[name] += v
        t0 = time.time()
        rm.kill(yarn2)
        got = milestones(f"{yarn2} killed in YARN to free its leases", t0, {
            "yarn": lambda: rm.app(yarn2)["state"] == "KILLED",
            "leases": lambda: not arb.leases(app2),
            "gpus": lambda: not rm.gpus_by_node(),
            "nm": lambda: rm.nm_live(yarn2, am=True) == 0,
        }, timeout=90, every=every)  # fmt: skip
        for name, v in got.items():
            res[f"kill_{name}"].append(v)
    finally:
        arb.stop()
    # Which path freed the leases: the watcher logs the GPUs it freed when it ends an app.
    text = arb.log_path.read_text(errors="replace")
    for key, yid, state in (("finish", yarn_id, "FINISHED"), ("kill", yarn2, "KILLED")):
        found = re.search(rf"YARN {yid} {state}[^;]*\); (\d+) GPUs freed", text)
        res[f"{key}_watcher_freed_gpus"].append(int(found.group(1)) if found else -1)


def part_ml(cluster: Cluster, rm: RMView, args: argparse.Namespace, tmp: Path,
            submitted: list[str]) -> dict[str, Any]:  # fmt: skip
    jar = am_jar()
    keys = ["grant_yarn", "grant_nm", "grant_job", "revoke_arbiter", "revoke_node",
            "revoke_app", "revoke_nm", "finish_leases", "finish_yarn", "finish_gpus", "finish_nm",
            "kill_yarn", "kill_leases", "kill_gpus", "kill_nm"]  # fmt: skip
    freed = ["finish_watcher_freed_gpus", "kill_watcher_freed_gpus"]
    res: dict[str, list[float]] = {k: [] for k in keys + freed}
    for k in range(args.reps):
        t = time.monotonic()
        ml_rep(k, cluster, rm, jar, tmp / f"ml-{k}", args.rm_poll_seconds, args.probe_seconds,
               submitted, res)  # fmt: skip
        print(f"  ML repetition {k + 1}/{args.reps}: {time.monotonic() - t:.1f} s", flush=True)
    return {**{k: summary(res[k]) for k in keys}, **{k: res[k] for k in freed}}


# ----------------------------------------------------------------------------- part 3


def part_share(cluster: Cluster, rm: RMView, args: argparse.Namespace, tmp: Path) -> dict:
    from hive_hooks.yarn_engine import ExecutorSpec, YarnHiveServer
    from qoop_planner.model import Share

    spec = ExecutorSpec(max_total=4)
    engine = YarnHiveServer(work_dir=tmp / "hs2-yarn", hadoop_conf_dir=cluster.state.client_conf,
                            java_home=cluster.state.java_home, spec=spec)  # fmt: skip
    ctl = engine.control
    res: dict[str, list[float]] = {k: [] for k in
                                   ("up_yarn", "up_nm", "up_spark", "down_yarn", "down_nm",
                                    "down_spark_killed", "down_spark_gone")}  # fmt: skip
    app_id = None
    every = args.probe_seconds
    try:
        print("  starting the Spark Thrift Server on YARN ...", flush=True)
        engine.start()
        app_id = engine.app_id
        print(f"  engine ready in {engine.start_seconds:.1f} s ({app_id})", flush=True)

        def yarn_executors() -> int | None:
            app = rm.app(app_id)
            n = int(app["runningContainers"]) - 1
            ok = app["allocatedVCores"] == n * spec.cores + 1 and (
                app["allocatedMB"] == n * spec.container_mb + 1024
            )
            return n if ok else None

        def spark(alive_only: bool) -> int:
            ex = ctl.status()["executors"]
            return len([e for e in ex if not (alive_only and e["killed"])])

        wait_for("the engine's idle executor in YARN and Spark",
                 lambda: yarn_executors() == spec.idle and spark(False) == spec.idle
                 and rm.nm_live(app_id) == spec.idle,
                 timeout=120, every=0.2)  # fmt: skip
        for k in range(args.reps):
            t0 = time.time()
            ctl.apply_share(QUERY, Share(3, 3072))
            got = milestones("3 executors after a share up", t0, {
                "yarn": lambda: yarn_executors() == 3,
                "nm": lambda: rm.running(app_id) == 3,
                "spark": lambda: spark(True) == 3 and spark(False) == 3,
            }, timeout=120, every=every)  # fmt: skip
            for name, v in got.items():
                res[f"up_{name}"].append(v)
            t0 = time.time()
            ctl.apply_share(QUERY, Share(1, 2048))
            got = milestones("1 executor after a share down", t0, {
                "yarn": lambda: yarn_executors() == 1,
                "nm": lambda: rm.nm_live(app_id) == 1,
                "spark_killed": lambda: spark(True) == 1,
                "spark_gone": lambda: spark(False) == 1,
            }, timeout=120, every=every)  # fmt: skip
            for name, v in got.items():
                res[f"down_{name}"].append(v)
            print(f"  share repetition {k + 1}/{args.reps}: up {res['up_yarn'][-1]:.2f} s, "
                  f"down {res['down_yarn'][-1]:.2f} s (YARN)", flush=True)  # fmt: skip
        ctl.release_share(QUERY)
    finally:
        engine.stop()
        if app_id is not None:  # the driver stops its SparkContext: the app ends by itself
            with contextlib.suppress(Exception):
                wait_for("the engine's YARN app to end",
                         lambda: rm.app(app_id)["state"] in FINAL, timeout=60)  # fmt: skip
            with contextlib.suppress(Exception):
                if rm.app(app_id)["state"] not in FINAL:
                    rm.kill(app_id)
    return {"start_s": engine.start_seconds, "app_id": app_id,
            **{k: summary(v) for k, v in res.items()}}  # fmt: skip


# ----------------------------------------------------------------------------- part 4


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def part_poll(cluster: Cluster, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from arbiter.config import load_config
    from arbiter.core import ArbiterCore
    from arbiter.journal import SQLiteJournal
    from yarn_bridge.bridge_cli import Bridge, initial_cluster

    rm_proc = psutil.Process(cluster.rm_pid())
    rm_url = cluster.rm_url
    journal = SQLiteJournal(tmp / "poll.db")
    core = ArbiterCore(initial_cluster(rm_url, wait_s=30),
                       load_config(environ={"ARBITER_POLICY": "fifo"}),
                       journal, admin_token="adm")  # fmt: skip
    bridge = Bridge(core, rm_url, poll_s=5.0)
    sent: Counter[str] = Counter()  # "GET /ws/v1/cluster/nodes" -> requests

    def count(request: httpx.Request) -> None:
        sent[f"{request.method} {request.url.path}"] += 1

    bridge.rm._http.event_hooks["request"].append(count)

    def tick() -> float:
        s = time.perf_counter()
        if not bridge.tick():
            raise BenchError(f"a bridge poll of {rm_url} failed: {bridge.watcher.stats.last_error}")
        return (time.perf_counter() - s) * 1e3

    def idle_window() -> float:
        c0, t0 = cpu_seconds(rm_proc), time.monotonic()
        time.sleep(window)
        return (cpu_seconds(rm_proc) - c0) / (time.monotonic() - t0)

    window = args.poll_window
    out: dict[str, Any] = {"window_s": window}
    try:
        for _ in range(10):  # warm up both sides (JIT, connection pool)
            tick()
        idle_before = idle_window()
        for interval in (0.5, 5.0):
            ticks: list[float] = []
            sent.clear()
            c0, t0 = cpu_seconds(rm_proc), time.monotonic()
            while (due := t0 + len(ticks) * interval) < t0 + window:
                time.sleep(max(0.0, due - time.monotonic()))
                ticks.append(tick())
            time.sleep(max(0.0, t0 + window - time.monotonic()))
            wall = time.monotonic() - t0
            cores = (cpu_seconds(rm_proc) - c0) / wall
            out[f"{interval:g}s"] = {
                "interval_s": interval, "polls": len(ticks), "tick_ms": summary(ticks),
                "requests_per_poll": sum(sent.values()) / len(ticks),
                "requests_by_endpoint": {k: v / len(ticks) for k, v in sorted(sent.items())},
                "rm_cpu_cores": cores,
                "rm_cpu_ms_per_poll_window": (cores - idle_before) * wall / len(ticks) * 1e3,
            }  # fmt: skip
            print(f"  polling every {interval:g} s: {len(ticks)} polls, tick p50 "
                  f"{pct(ticks, 50):.1f} ms, RM CPU {cores * 100:.1f}% of a core "
                  f"(idle {idle_before * 100:.1f}%)", flush=True)  # fmt: skip
        idle_after = idle_window()
        idle = (idle_before + idle_after) / 2
        # Back to back: the RM's CPU per poll, the idle rate over the same time taken out.
        burst = args.burst
        c0, t0 = cpu_seconds(rm_proc), time.monotonic()
        burst_ticks = [tick() for _ in range(burst)]
        wall = time.monotonic() - t0
        per_poll = ((cpu_seconds(rm_proc) - c0) - idle * wall) / burst * 1e3
        out["idle"] = {"rm_cpu_cores": idle, "before": idle_before, "after": idle_after}
        out["burst"] = {"polls": burst, "wall_s": wall, "tick_ms": summary(burst_ticks),
                        "rm_cpu_ms_per_poll": per_poll}  # fmt: skip
        print(f"  {burst} polls back to back: RM {per_poll:.1f} ms CPU per poll; idle RM "
              f"{idle_before * 100:.1f}% / {idle_after * 100:.1f}% of a core before / after",
              flush=True)  # fmt: skip
    finally:
        bridge.stop()
        journal.close()
    return out


# ----------------------------------------------------------------------------- report


def rows_of(doc: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def row(what: str, s: dict[str, Any] | None, note: str = "", unit: str = "s") -> None:
        if s is None or not s["n"]:
            return
        rows.append([what, str(s["n"]), f"{s['p50']:.2f}", f"{s['p95']:.2f}", unit, note])

    ml = doc.get("ml")
    if ml:
        poll = f"watcher polls every {doc['config']['rm_poll_seconds']:g} s"
        kill_freed = ml["kill_watcher_freed_gpus"]
        by_watcher = f"{sum(x > 0 for x in kill_freed)}/{len(kill_freed)} freed by the watcher"
        row("lease granted -> RM: node's GPUs allocated", ml["grant_yarn"], "per leased machine")
        row("lease granted -> NM: container RUNNING", ml["grant_nm"], "/ws/v1/node/containers")
        row("lease granted -> job process started", ml["grant_job"], "the job's own date")
        row("DrainNode grace 0 -> lease gone (ListLeases)", ml["revoke_arbiter"], "RPC returned")
        row("DrainNode grace 0 -> RM: node's GPUs free", ml["revoke_node"], "usedResource")
        row("DrainNode grace 0 -> RM: app's GPUs down", ml["revoke_app"], "resourceInfo")
        row("DrainNode grace 0 -> NM: container gone", ml["revoke_nm"], "process killed")
        row("job exit 0 -> RM: no GPU used", ml["finish_gpus"], "container completed")
        row("job exit 0 -> leases freed (ListLeases)", ml["finish_leases"], "the AM releases")
        row("job exit 0 -> RM: app FINISHED", ml["finish_yarn"], "SUCCEEDED")
        row("job exit 0 -> NM: all containers gone", ml["finish_nm"], "AM's too")
        row("PUT state KILLED -> RM: app KILLED", ml["kill_yarn"])
        row("PUT state KILLED -> RM: no GPU used", ml["kill_gpus"])
        row("PUT state KILLED -> leases freed (ListLeases)", ml["kill_leases"],
            f"{poll}; {by_watcher}")  # fmt: skip
        row("PUT state KILLED -> NM: all containers gone", ml["kill_nm"])
    sh = doc.get("share")
    if sh:
        row("share 1 -> 3 executors: RM shows 3", sh["up_yarn"], "containers, vcores, MB")
        row("share 1 -> 3 executors: NMs run 3", sh["up_nm"], "RUNNING")
        row("share 1 -> 3 executors: Spark has 3", sh["up_spark"], "registered (/status)")
        row("share 3 -> 1 executor: RM shows 1", sh["down_yarn"])
        row("share 3 -> 1 executor: NMs run 1", sh["down_nm"], "the others gone")
        row("share 3 -> 1 executor: Spark killed 2", sh["down_spark_killed"], "/status")
        row("share 3 -> 1 executor: Spark lists 1", sh["down_spark_gone"], "/status")
    po = doc.get("poll")
    if po:
        idle, cpu = po["idle"]["rm_cpu_cores"], po["burst"]["rm_cpu_ms_per_poll"]
        for key in ("0.5s", "5s"):
            p = po[key]
            note = (
                f"{p['requests_per_poll']:.1f} req/poll; RM CPU {p['rm_cpu_cores'] * 100:.1f}% "
                f"of a core (idle {idle * 100:.1f}%; {cpu:.1f} ms/poll -> "
                f"+{cpu / p['interval_s'] / 10:.2f}%)"
            )
            row(f"Bridge.tick every {p['interval_s']:g} s", p["tick_ms"], note, unit="ms")
    return rows


def machine_info() -> dict[str, Any]:
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()],
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "hadoop": HADOOP_VERSION}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--reps",
        type=int,
        default=5,
        help="repetitions of the ML and the share measurements (default 5)",
    )
    ap.add_argument("--workdir", type=Path,
                    help="use the running cluster of this work dir (default: start one in a "
                         "temp dir and stop it at the end)")  # fmt: skip
    ap.add_argument(
        "--parts",
        default="ml,poll,share",
        help="which measurements, comma-separated: ml, poll, share (default all)",
    )
    ap.add_argument("--rm-poll-seconds", type=float, default=0.5,
                    help="the arbiter's RM poll interval in the ML part (default 0.5, as the "
                         "tests; serve's default is 5)")  # fmt: skip
    ap.add_argument(
        "--poll-window",
        type=float,
        default=40.0,
        help="seconds of each polling window: idle, 0.5 s, 5 s, idle (default 40)",
    )
    ap.add_argument(
        "--burst",
        type=int,
        default=100,
        help="back-to-back polls for the RM's CPU per poll (default 100)",
    )
    ap.add_argument(
        "--probe-seconds",
        type=float,
        default=0.05,
        help="how often the benchmark looks at the RM and the arbiter (default 0.05)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) at the end")
    ap.add_argument("--out", type=Path, default=RESULTS / "yarn_enforcement.json")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= {"ml", "poll", "share"} or args.reps < 1:
        ap.error("--parts takes ml, poll, share; --reps must be >= 1")

    # SIGTERM unwinds like Ctrl-C, once, so the finally blocks stop what was started.
    terminated: list[int] = []

    def on_term(*_: object) -> None:
        terminated.append(1)
        signal.signal(signal.SIGTERM, lambda *_: terminated.append(1))
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="yarn-enforcement-"))
    doc: dict[str, Any] = {"benchmark": "yarn_enforcement", "machine": machine_info(),
                           "config": {"reps": args.reps, "rm_poll_seconds": args.rm_poll_seconds,
                                      "probe_seconds": args.probe_seconds,
                                      "lease_seconds": float(KNOBS["ARBITER_LEASE_SECONDS"]),
                                      "nodes": 2, "gpus_per_node": 4}}  # fmt: skip
    cluster: Cluster | None = None
    rm: RMView | None = None
    submitted: list[str] = []
    try:
        cluster = start_cluster(args.workdir, tmp)
        doc["config"]["cluster_startup_s"] = cluster.state.startup_s if cluster.owned else None
        rm = RMView(cluster)
        busy = rm.gpus_by_node()
        if busy:
            raise BenchError(f"the cluster is not idle (yarn.io/gpu in use: {busy})")
        if "ml" in parts:
            print(f"ML leases on YARN: {args.reps} repetitions", flush=True)
            doc["ml"] = part_ml(cluster, rm, args, tmp, submitted)
        if "poll" in parts:
            print(f"bridge polling cost: 4 windows of {args.poll_window:g} s", flush=True)
            doc["poll"] = part_poll(cluster, args, tmp)
        if "share" in parts:
            print(f"share changes on the Spark engine: {args.reps} repetitions", flush=True)
            doc["share"] = part_share(cluster, rm, args, tmp)
    finally:
        # a SIGTERM now must not cut the cleanup short
        signal.signal(signal.SIGTERM, lambda *_: terminated.append(1))
        if rm is not None:
            for yid in submitted:
                with contextlib.suppress(Exception):
                    if rm.app(yid)["state"] not in FINAL:
                        rm.kill(yid)
            rm.close()
        if cluster is not None and cluster.owned:
            cluster.local.down()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if terminated:
        print("terminated (SIGTERM); everything started here is stopped", file=sys.stderr)
        return 143

    doc["machine"]["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["wall_s"] = round(time.monotonic() - started, 1)
    print(format_table(["what", "n", "p50", "p95", "unit", "note"], rows_of(doc)))
    print(f"total {doc['wall_s']:.0f} s; load average {doc['machine']['load_avg']} at start, "
          f"{doc['machine']['load_avg_end']} at end")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
