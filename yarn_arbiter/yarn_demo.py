"""``yarn-arbiter demo`` on a real local YARN: leases become containers, shares become executors.

What it runs, in order (each step prints what it did and where to look):

1. **A real YARN** (:mod:`yarn_bridge.local_hadoop`) in ``--workdir`` (default ``.yarn-local``):
   Hadoop 3.5.0's ResourceManager and two NodeManagers with 4 ``yarn.io/gpu`` each, reused when
   one already runs there.
2. **The arbiter** (``yarn-arbiter serve --rm-url``, a subprocess): Themis auctions over the
   GPUs the RM reports, the bridge beside it (watcher, lease enforcer, the ``root.gpu`` queue's
   GPU guarantee kept equal to the GPUs under lease).
3. **ML apps through ``yarn-arbiter submit``**, one after another: each runs under the lease
   ApplicationMaster (:mod:`yarn_bridge.lease_am`), which turns every lease into a container
   with ``yarn.io/gpu`` on the leased node running :mod:`arbiter.examples.train_job` (data-
   parallel SGD on the leased devices, resumable from a checkpoint). While they run, a line per
   change shows, per app, the GPUs the arbiter leased and the GPUs YARN's containers hold, by
   node (read from the RM's own app-attempt container listing), and the job's progress.
4. **A Hive query whose share is real** (``--no-hive`` skips it): the Spark Thrift Server with
   its executors in YARN containers of the ``analytics`` queue (:mod:`hive_hooks.yarn_engine`),
   TPC-H Q5 run through QOOP's replanner (:class:`hive_hooks.executor.QueryRunner`) and
   registered with the arbiter (its share stream). When its first stage is done another
   tenant's job arrives in the ``analytics`` queue (a plain YARN app): the arbiter's watcher
   counts it in QOOP's |J|, the query's 1-over-n share halves, and the executors YARN reports
   for the engine follow; two stages later that job leaves and the share recovers. The rows
   are checked against the same SQL run in one statement.
5. A summary table per app (what YARN accounted: GPU-seconds, containers, final status) and
   where to look: the RM's web UI, ``yarn-arbiter admin``, the logs. The arbiter and the engine
   stop; YARN keeps running (its UI shows the finished apps) until ``yarn-arbiter hadoop down``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import grpc
import httpx

from arbiter.tables import format_table
from yarn_bridge.local_hadoop import (
    ClusterState,
    HadoopError,
    LocalHadoop,
    LocalHadoopSpec,
    build_am_jar,
)
from yarn_bridge.served import ServedArbiter, gpus_by_machine

__all__ = ["DEMO_APPS", "DemoApp", "run_yarn_demo"]

LEASE_SECONDS = 8
KNOBS = {"ARBITER_LEASE_SECONDS": str(LEASE_SECONDS), "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.2",
         "ARBITER_BID_DEADLINE_SECONDS": "1"}  # fmt: skip
# name, max GPU demand, samples to train on, seconds after the start it is submitted
DEMO_APPS = (("resnet-search", 8, 40_000, 0.0), ("bert-tune", 4, 16_000, 8.0),
             ("ncf-small", 2, 6_000, 16.0))  # fmt: skip
DEMO_QUERY = 5  # TPC-H Q5: six relations, several join stages to see the share move


@dataclass
class DemoApp:
    name: str
    gpus: int
    samples: int
    at_s: float
    yarn_id: str = ""
    app_id: str = ""
    submitted_s: float = 0.0
    first_gpus_s: float | None = None
    containers: set[str] = field(default_factory=set)
    max_gpus: int = 0
    final: dict | None = None
    last_line: str = ""


def _gpu(resources: dict) -> int:
    for e in (resources.get("allocatedResources") or {}).get("entry", []):
        if e.get("key") == "yarn.io/gpu":
            return int(e.get("value", 0))
    return 0


def yarn_gpus_by_node(rm_url: str, yarn_id: str) -> tuple[dict[str, int], set[str], dict]:
    """(GPUs by node, container ids) of the app's running containers, as the RM lists them
    (``/apps/{id}/appattempts/{attempt}/containers``), and the app itself."""
    app = httpx.get(f"{rm_url}/ws/v1/cluster/apps/{yarn_id}", timeout=5).json()["app"]
    attempts = httpx.get(f"{rm_url}/ws/v1/cluster/apps/{yarn_id}/appattempts", timeout=5).json()
    rows = (attempts.get("appAttempts") or {}).get("appAttempt") or []
    if not rows or app["state"] in ("FINISHED", "FAILED", "KILLED"):
        return {}, set(), app
    attempt = rows[-1]["appAttemptId"]
    url = f"{rm_url}/ws/v1/cluster/apps/{yarn_id}/appattempts/{attempt}/containers"
    body = httpx.get(url, timeout=5).json()
    by_node: dict[str, int] = {}
    ids: set[str] = set()
    for c in body.get("container") or []:
        g = _gpu(c)
        if g and c.get("containerState") == "RUNNING":
            by_node[c["assignedNodeId"]] = by_node.get(c["assignedNodeId"], 0) + g
            ids.add(c["containerId"])
    return by_node, ids, app


def _fmt(by_node: dict[str, int]) -> str:
    return " + ".join(f"{n}@{k.rsplit(':', 1)[-1]}" for k, n in sorted(by_node.items())) or "-"


def _progress(checkpoint: Path, samples: int) -> str:
    try:
        import numpy as np

        with np.load(checkpoint) as ck:
            return f"{100 * min(1.0, int(ck['done']) / samples):3.0f}%"
    except (OSError, ValueError, KeyError):
        return "  0%"


def _submit(app: DemoApp, rm_url: str, arbiter_port: int, jobs: Path, env: dict[str, str],
            am_jar: Path) -> None:  # fmt: skip
    job = (f"{shlex.quote(sys.executable)} -m arbiter.examples.train_job "
           f"--checkpoint {shlex.quote(str(jobs / (app.name + '.npz')))} "
           f"--samples {app.samples} --step-seconds 0.5")  # fmt: skip
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "submit", "--rm-url", rm_url,
           "--arbiter", f"127.0.0.1:{arbiter_port}", "--gpus", str(app.gpus), "--name", app.name,
           "--queue", "gpu", "--command", job, "--am-jar", str(am_jar),
           "--work-gpu-seconds", str(app.samples / 256 * 0.5)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise HadoopError(f"yarn-arbiter submit {app.name} failed:\n{out.stderr[-2000:]}")
    app.yarn_id = out.stdout.strip()
    app.app_id = out.stderr.rsplit(" is arbiter app ", 1)[1].split()[0]


def run_ml_phase(state: ClusterState, arb: ServedArbiter, workdir: Path, say: Callable[[str], None],
                 *, timeout_s: float = 300.0) -> list[DemoApp]:  # fmt: skip
    rm_url = state.rm_url
    am_jar = build_am_jar(progress=say)
    jobs = workdir / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    for old in jobs.glob("*.npz"):
        old.unlink()
    env = {**os.environ, "JAVA_HOME": state.java_home, "HADOOP_CONF_DIR": state.client_conf}
    apps = [DemoApp(n, g, s, at) for n, g, s, at in DEMO_APPS]
    t0 = time.monotonic()
    pending = list(apps)
    say(f"{'t':>5}  {'app':<14} {'state':<9} {'leased (GPUs@node)':<22} "
        f"{'YARN containers':<22} progress")  # fmt: skip
    while True:
        now = time.monotonic() - t0
        while pending and pending[0].at_s <= now:
            app = pending.pop(0)
            _submit(app, rm_url, arb.port, jobs, env, am_jar)
            app.submitted_s = time.monotonic() - t0
            say(f"{now:5.1f}  submitted {app.name} ({app.gpus} GPUs max): YARN {app.yarn_id}, "
                f"arbiter {app.app_id}")  # fmt: skip
        live = [a for a in apps if a.yarn_id and a.final is None]
        for a in live:
            try:
                by_node, ids, yarn = yarn_gpus_by_node(rm_url, a.yarn_id)
                leased = gpus_by_machine(arb.leases(a.app_id))
            except (httpx.HTTPError, grpc.RpcError, KeyError, ValueError):
                continue  # one missed sample; the next poll reads again
            a.containers |= ids
            a.max_gpus = max(a.max_gpus, sum(by_node.values()))
            if by_node and a.first_gpus_s is None:
                a.first_gpus_s = time.monotonic() - t0 - a.submitted_s
            if yarn["state"] in ("FINISHED", "FAILED", "KILLED"):
                a.final = yarn
            progress = _progress(jobs / (a.name + ".npz"), a.samples)
            line = (f"{a.name:<14} {yarn['state']:<9} {_fmt(leased):<22} "
                    f"{_fmt(by_node):<22} {progress}")  # fmt: skip
            if line != a.last_line:
                a.last_line = line
                say(f"{time.monotonic() - t0:5.1f}  {line}")
        if not pending and all(a.final is not None for a in apps):
            return apps
        if time.monotonic() - t0 > timeout_s:
            raise HadoopError(f"the ML apps did not finish in {timeout_s:.0f} s; see "
                              f"{arb.log_path} and the RM UI {rm_url}")  # fmt: skip
        time.sleep(1.0)


def ml_summary(apps: list[DemoApp]) -> str:
    rows = []
    for a in apps:
        f = a.final or {}
        secs = f.get("resourceSecondsMap", {}).get("entry", [])
        gpu_s = next((int(e["value"]) for e in secs if e.get("key") == "yarn.io/gpu"), 0)
        rows.append([a.name, str(a.gpus), f"{a.first_gpus_s:.1f}" if a.first_gpus_s else "-",
                     str(len(a.containers)), str(a.max_gpus), str(gpu_s),
                     f"{int(f.get('elapsedTime', 0)) / 1000:.1f}",
                     f"{f.get('state', '?')}/{f.get('finalStatus', '?')}"])  # fmt: skip
    headers = ["app", "max GPUs", "submit->GPUs (s)", "containers", "peak GPUs in YARN",
               "GPU-s (YARN)", "YARN elapsed (s)", "final"]  # fmt: skip
    return format_table(headers, rows)


def run_hive_phase(state: ClusterState, arb: ServedArbiter, workdir: Path,
                   say: Callable[[str], None]) -> int:  # fmt: skip
    """A TPC-H query on the Spark Thrift Server whose executors are YARN containers sized by
    the query's arbiter share, while another tenant's analytics job comes and goes (QOOP's
    1-over-n share halves, then recovers); returns 1 if the query's rows were wrong."""
    from hive_hooks.beeline.printing import ReportingShare, format_event
    from hive_hooks.demo import matches_one_shot
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import ArbiterShare
    from hive_hooks.tpcload import load_tpc as load_into_hive
    from hive_hooks.yarn_engine import ExecutorSpec, YarnHiveServer
    from qoop_planner.tpc import load_tpc
    from yarn_bridge.rm import AppSubmission, RMClient

    root = workdir / "hive"
    srv = YarnHiveServer(work_dir=root / "engine", hadoop_conf_dir=state.client_conf,
                         java_home=state.java_home, spec=ExecutorSpec(max_total=8))  # fmt: skip
    say(f"starting the Spark Thrift Server with executors on YARN (queue analytics) in "
        f"{root / 'engine'} ...")  # fmt: skip
    srv.start()
    registry = CheckpointRegistry(root / "registry.db")
    rm = RMClient(state.rm_url)
    other: str | None = None
    stop = threading.Event()
    try:
        ctl = srv.control
        engine_app = ctl.status().get("app_id")
        say(f"ready in {srv.start_seconds:.1f} s: {srv.jdbc_url};auth=noSasl, YARN app "
            f"{engine_app}")  # fmt: skip
        report = load_into_hive(srv.connect, "tpch", 0.01, "tpch", data_dir=root / "data")
        say(f"loaded TPC-H sf 0.01: {sum(report.rows.values()):,} rows in {report.seconds:.1f} s")
        n = DEMO_QUERY
        sql = load_tpc("tpch", 0.01).queries[n]

        def watch_executors() -> None:
            last = None
            while not stop.wait(0.5):
                with contextlib.suppress(Exception):
                    target = ctl.status().get("target")
                    app = httpx.get(f"{state.rm_url}/ws/v1/cluster/apps/{engine_app}",
                                    timeout=5).json()["app"]  # fmt: skip
                    now = (target, app.get("runningContainers"), app.get("allocatedVCores"))
                    if now != last:
                        last = now
                        say(f"  engine: {now[0]} executors wanted; YARN reports {now[1]} "
                            f"containers, {now[2]} vcores (executors + the Spark AM)")  # fmt: skip

        threading.Thread(target=watch_executors, daemon=True).start()
        share = ReportingShare(ArbiterShare(f"127.0.0.1:{arb.port}", queue_name="analytics"),
                               lambda text: say("  " + text))  # fmt: skip
        stages, left = 0, False

        def on_event(ev: Any) -> None:
            nonlocal stages, other, left
            say(f"  {format_event(ev)}")
            if getattr(ev, "kind", "") == "done":
                stages += 1
            if stages == 1 and other is None:
                # Another tenant's job arrives in the analytics queue: QOOP's |J| is 2.
                other = rm.new_application().application_id
                rm.submit_app(AppSubmission(other, "other-tenant-etl", "sleep 600",
                                            queue="analytics", memory_mb=512))  # fmt: skip
                say(f"  another tenant's analytics job arrives: YARN {other}")
            if stages >= 3 and other is not None and not left:
                left = True
                rm.kill_app(other, wait=False)
                say(f"  ... and leaves (killed {other})")

        runner = QueryRunner(lambda: srv.connect(database="tpch"), registry=registry,
                             share=share, share_enforcer=ctl, on_event=on_event)  # fmt: skip
        try:
            res = runner.run(sql, query_id=f"demo-q{n}")
        finally:
            runner.close()
        ok = matches_one_shot(lambda: srv.connect(database="tpch"), sql, res.rows)
        verdict = "match" if ok else "DO NOT match"
        say(f"TPC-H Q{n}: {len(res.rows)} rows in {res.elapsed_s:.1f} s, {len(res.switches)} "
            f"plan switch(es), {res.share_changes} share change(s); rows {verdict} the "
            "one-shot SQL")  # fmt: skip
        return 0 if ok else 1
    finally:
        stop.set()
        if other is not None:
            with contextlib.suppress(Exception):
                if not rm.app(other).is_final:
                    rm.kill_app(other, wait=False)
        rm.close()
        registry.close()
        srv.stop()


def run_yarn_demo(workdir: Path, *, hive: bool = True, out: TextIO | None = None) -> int:
    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    t_start = time.monotonic()
    local = LocalHadoop(workdir)
    rm_url = local.active_rm()
    if rm_url is None:
        say(f"starting a real YARN in {local.workdir} (Hadoop 3.5.0 RM + 2 NodeManagers x 4 "
            "yarn.io/gpu) ...")  # fmt: skip
        state = local.up(LocalHadoopSpec(local.workdir), progress=say)
        say(f"YARN up in {state.startup_s:.1f} s")
    else:
        state = local.state()
        assert state is not None
        say(f"reusing the YARN running in {local.workdir}")
    say(f"ResourceManager web UI: {state.rm_url}")
    arb = ServedArbiter(local.workdir / "arbiter", state.rm_url, "--gpu-queue", "root.gpu",
                        knobs=KNOBS, poll_s=1.0)  # fmt: skip
    status = 0
    try:
        try:
            cluster = arb.wait_ready()
        except RuntimeError as e:
            raise HadoopError(str(e)) from None
        machines = sorted({g.machine for g in cluster.gpus})
        say(f"arbiter on 127.0.0.1:{arb.port} (Themis, {LEASE_SECONDS} s leases): "
            f"{len(cluster.gpus)} GPUs on {', '.join(machines)} (from the RM)\n")  # fmt: skip
        say("=== ML apps: every lease is a YARN container with yarn.io/gpu on the leased node")
        apps = run_ml_phase(state, arb, local.workdir, say)
        say("\n" + ml_summary(apps))
        status |= any((a.final or {}).get("finalStatus") != "SUCCEEDED" for a in apps)
        if hive:
            say("\n=== Hive queries: the arbiter's share is the executors they run on")
            status |= run_hive_phase(state, arb, local.workdir, say)
    finally:
        arb.stop()
    say(f"\ndemo done in {time.monotonic() - t_start:.0f} s. Where to look:")
    say(f"  ResourceManager UI   {state.rm_url}/cluster/apps  (the apps, their GPUs and queues)")
    say(f"  scheduler queues     {state.rm_url}/cluster/scheduler")
    say(f"  arbiter log          {arb.log_path}")
    say(f"  daemons              yarn-arbiter hadoop status --workdir {local.workdir}")
    say("  a live arbiter       yarn-arbiter serve --rm-url " + state.rm_url
        + " ... then yarn-arbiter admin state")  # fmt: skip
    say(f"  stop YARN            yarn-arbiter hadoop down --workdir {local.workdir}")
    return status
