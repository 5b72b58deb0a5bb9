"""Arbiter failover: an active/standby pair on ZooKeeper (arbiter.ha) against one arbiter
restarted on its SQLite journal, and the journals' write cost.

**Failover.** A pair of ``yarn-arbiter serve --ha-zk`` processes (``themis-testbed``, 64 GPUs)
with N Agents bidding (the pair's two addresses each); then, K times: snapshot the leases,
``kill -9`` the active, and time until the standby *serves* (an Admin ``ListLeases`` on it
succeeds) and until every Agent has its session back on it; count leases lost (live before,
missing after, or held by an Agent and unknown to the new active) and duplicated (a GPU in two
live leases); restart the killed one as the new standby. **Baseline:** one arbiter on SQLite,
``kill -9`` and relaunched at once on the same host (what a supervisor's ``Restart=always``
does), timed the same way. The pair's time is about its ZooKeeper session timeout (a dead
active's lock node lives until its session expires) plus the standby's start as the active;
the baseline's is the process start, but needs the host (and its disk) back.

**Write cost.** ``commit_round`` of a busy round (40 leases on 64 GPUs, 40 bid tables) into the
ZooKeeper journal (one fenced ``multi()``) and into the SQLite journal (WAL, synchronous=FULL),
in this process, p50/p95 over M commits.

Writes ``benchmarks/results/arbiter_failover.json``. ``--quick``: 20 Agents, 3 kills, 50
commits. Usage: ``python benchmarks/arbiter_failover.py [--quick] [--agents N] [--kills K]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

from arbiter.auction import Bid
from arbiter.cluster import load_cluster
from arbiter.journal import SQLiteJournal
from arbiter.localhost import free_port, wait_until
from arbiter.rounds import ArbiterState, Lease, LeaseSource, check_invariants
from arbiter.tables import format_table
from arbiter.zk_journal import ZooKeeperJournal, claim_epoch
from yarn_bridge.ha_local import (
    FAILOVER_SETTINGS,
    ArbiterProcess,
    HaPairFiles,
    apps_at,
    bidding_agent,
    leases_at,
    start_arbiter_process,
)
from yarn_bridge.local_hadoop import LocalHadoop

RESULTS = Path(__file__).resolve().parent / "results"
POLL_S = 0.02  # how often the measured waits (serving, Agents back) poll
CLUSTER = load_cluster("themis-testbed")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


# -- write cost ---------------------------------------------------------------------------------


def busy_round(rnd: int) -> tuple[ArbiterState, list[Bid]]:
    gpus = sorted(CLUSTER.gpu_ids)
    leases, bids = [], []
    for i in range(40):
        mine = frozenset(gpus[i : i + 1]) if i < 24 else frozenset(gpus[24 + (i - 24) * 2 :][:2])
        leases.append(Lease(f"app-{i:03d}", mine, 1000.0 + rnd, 1600.0 + rnd, rnd,
                            LeaseSource.AUCTION))  # fmt: skip
        rows = {frozenset(gpus[j : j + k]): 1.0 + j / 100 + k for j in range(0, 56, 8)
                for k in (1, 2, 4)}  # fmt: skip
        rows[frozenset()] = 9.0
        bids.append(Bid(f"app-{i:03d}", rows))
    state = ArbiterState(gpus=CLUSTER.gpu_ids, leases=tuple(leases), round=rnd)
    check_invariants(state)
    return state, bids


def write_cost(zk_address: str, workdir: Path, commits: int) -> list[dict]:
    client = KazooClient(hosts=zk_address, timeout=5.0)
    client.start(timeout=30)
    zj = ZooKeeperJournal(client, "/bench/journal", claim_epoch(client, "/bench/journal", "b"))
    zj.load(CLUSTER.gpu_ids)
    sj = SQLiteJournal(workdir / "bench-journal.db")
    out = []
    try:
        for name, j in (("zookeeper multi()", zj), ("sqlite WAL FULL", sj)):
            times = []
            for r in range(1, commits + 1):
                state, bids = busy_round(r)
                t0 = time.perf_counter()
                j.commit_round(state, bids)
                times.append((time.perf_counter() - t0) * 1000)
            out.append({"journal": name, "commits": commits,
                        "p50_ms": round(statistics.median(times), 2),
                        "p95_ms": round(pct(times, 0.95), 2)})  # fmt: skip
        out[0]["request_bytes"] = zj.last_request_bytes
    finally:
        sj.close()
        client.stop()
        client.close()
    return out


# -- failover -----------------------------------------------------------------------------------


def check(before: list, after: list, agents: list) -> tuple[int, int]:
    """(leases lost, GPUs in two live leases) between a snapshot and the new arbiter's view."""
    now = time.time()
    served = {x.lease_id for x in after}
    live = {x.lease_id for x in before if x.end_unix_s > now + 0.5}
    held = {lid for a in agents for lid, h in list(a.leases.items()) if h.end > now + 0.5}
    lost = len((live | held) - served)
    seen: dict[str, int] = {}
    for x in after:
        if x.end_unix_s > now:
            for g in x.gpu_ids:
                seen[g] = seen.get(g, 0) + 1
    return lost, sum(1 for c in seen.values() if c > 1)


def measure_kill(
    victim: ArbiterProcess | subprocess.Popen,
    serving: str,
    admin: str,
    agents: list,
    relaunch=None,
) -> dict:
    before = leases_at(victim.address if isinstance(victim, ArbiterProcess) else serving,
                       admin) or []  # fmt: skip
    t0 = time.monotonic()
    if isinstance(victim, ArbiterProcess):
        victim.kill()
    else:
        victim.kill()
        victim.wait()
    if relaunch is not None:
        relaunch()
    wait_until("serving", lambda: leases_at(serving, admin) is not None, timeout=120,
               every=POLL_S)  # fmt: skip
    serve_s = time.monotonic() - t0
    ids = {a.app_id for a in agents}

    def back() -> bool:
        return ids <= {x.app_id for x in apps_at(serving, admin) or [] if x.connected}

    try:
        wait_until("Agents back", back, timeout=120, every=POLL_S)
    except TimeoutError:
        apps = {x.app_id: x.connected for x in apps_at(serving, admin) or []}
        for a in agents:
            if not apps.get(a.app_id):
                alive = a._thread is not None and a._thread.is_alive()
                print(f"  not back: {a.app_id} known={a.app_id in apps} target={a.target} "
                      f"errors={a.errors[-2:]} thread_alive={alive}", flush=True)  # fmt: skip
        raise
    resume_s = time.monotonic() - t0
    lost, dup = check(before, leases_at(serving, admin) or [], agents)
    return {"serving_s": serve_s, "agents_resumed_s": resume_s, "leases_before": len(before),
            "lost": lost, "duplicated": dup}  # fmt: skip


def run_pair(zk: str, work: Path, agents_n: int, kills: int, session_s: float) -> list[dict]:
    files = HaPairFiles.create(work / "creds")
    admin, submit = files.token("admin"), files.token("submit")
    kw = dict(session_timeout_s=session_s, settings=FAILOVER_SETTINGS)
    procs = {"a1": start_arbiter_process(work, "a1", zk, files, **kw)}
    wait_until("a1 active", lambda: procs["a1"].role() == "active", 60)
    procs["a2"] = start_arbiter_process(work, "a2", zk, files, **kw)
    wait_until("a2 standby", lambda: procs["a2"].role() == "standby", 60)
    addresses = f"{procs['a1'].address},{procs['a2'].address}"
    agents = [bidding_agent(addresses, submit, (1, 2, 4)[i % 3]) for i in range(agents_n)]
    rows = []
    try:
        wait_until("32 GPUs leased", lambda: sum(len(x.gpu_ids) for x in
                   leases_at(procs["a1"].address, admin) or []) >= 32, 120)  # fmt: skip
        active, standby = "a1", "a2"
        for k in range(kills):
            r = measure_kill(procs[active], procs[standby].address, admin, agents)
            print(f"  pair kill {k + 1}: serving after {r['serving_s']:.2f} s, Agents back after "
                  f"{r['agents_resumed_s']:.2f} s, lost {r['lost']}, duplicated "
                  f"{r['duplicated']}", flush=True)  # fmt: skip
            rows.append(r)
            old = procs[active]
            procs[active] = start_arbiter_process(work, active, zk, files, port=old.port,
                                                  metrics_port=old.metrics_port, **kw)  # fmt: skip
            wait_until("the killed one as standby", lambda a=active: procs[a].role() ==
                       "standby", 60)  # fmt: skip
            active, standby = standby, active
    finally:
        for a in agents:
            a.stop_async()
        for p in procs.values():  # first: the Agents' streams end with their arbiter
            p.stop()
        for a in agents:
            a.stop()
    return rows


def run_restart(work: Path, agents_n: int, kills: int) -> list[dict]:
    files = HaPairFiles.create(work / "creds")
    admin, submit = files.token("admin"), files.token("submit")
    port = free_port()
    conf = work / "single.conf"
    settings = {
        "arbiter.admin.token-file": files.admin,
        "arbiter.admission.submit-token-file": files.submit,
        "arbiter.query.service-token-file": files.service,
        **FAILOVER_SETTINGS,
    }
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    argv = [
        sys.executable,
        "-m",
        "yarn_arbiter.cli",
        "serve",
        "--cluster",
        "themis-testbed",
        "--port",
        str(port),
        "--journal",
        str(work / "journal.db"),
        "--config",
        str(conf),
    ]
    log = open(work / "single.log", "ab")  # noqa: SIM115 (kept open for the relaunches)
    proc = [subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)]
    address = f"127.0.0.1:{port}"
    wait_until("the arbiter", lambda: leases_at(address, admin) is not None, 60)
    agents = [bidding_agent(address, submit, (1, 2, 4)[i % 3]) for i in range(agents_n)]
    rows = []

    def relaunch() -> None:
        proc[0] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    try:
        wait_until("32 GPUs leased", lambda: sum(len(x.gpu_ids) for x in
                   leases_at(address, admin) or []) >= 32, 120)  # fmt: skip
        for k in range(kills):
            r = measure_kill(proc[0], address, admin, agents, relaunch=relaunch)
            print(f"  restart {k + 1}: serving after {r['serving_s']:.2f} s, Agents back after "
                  f"{r['agents_resumed_s']:.2f} s, lost {r['lost']}, duplicated "
                  f"{r['duplicated']}", flush=True)  # fmt: skip
            rows.append(r)
    finally:
        for a in agents:
            a.stop_async()
        proc[0].terminate()
        proc[0].wait(timeout=30)
        for a in agents:
            a.stop()
        log.close()
    return rows


def summary(name: str, rows: list[dict]) -> dict:
    serve = [r["serving_s"] for r in rows]
    back = [r["agents_resumed_s"] for r in rows]
    return {"setup": name, "kills": len(rows),
            "serving_p50_s": round(statistics.median(serve), 2),
            "serving_p95_s": round(pct(serve, 0.95), 2),
            "agents_resumed_p50_s": round(statistics.median(back), 2),
            "agents_resumed_p95_s": round(pct(back, 0.95), 2),
            "leases_lost": sum(r["lost"] for r in rows),
            "leases_duplicated": sum(r["duplicated"] for r in rows),
            "runs": rows}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 Agents, 3 kills, 50 commits")
    ap.add_argument("--agents", type=int)
    ap.add_argument("--kills", type=int)
    ap.add_argument("--commits", type=int)
    ap.add_argument(
        "--session-timeout",
        type=float,
        default=2.0,
        help="the pair's ZooKeeper session timeout in seconds (default 2)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "arbiter_failover.json")
    args = ap.parse_args()
    agents_n = args.agents or (20 if args.quick else 100)
    kills = args.kills or (3 if args.quick else 10)
    commits = args.commits or (50 if args.quick else 300)
    work = Path(tempfile.mkdtemp(prefix="arbiter-failover-"))
    zk = LocalHadoop(work / "zk")
    zk_address = zk.up_zookeeper().zk_address
    try:
        print(f"write cost ({commits} commits of a 40-lease round) ...", flush=True)
        writes = write_cost(zk_address, work, commits)
        print(f"HA pair on ZooKeeper, {agents_n} Agents, {kills} kills of the active ...",
              flush=True)  # fmt: skip
        pair = summary(
            "HA pair (standby takes over)",
            run_pair(zk_address, work / "pair", agents_n, kills, args.session_timeout),
        )
        print(f"one arbiter on SQLite, {agents_n} Agents, {kills} kill -9 + relaunch ...",
              flush=True)  # fmt: skip
        single = summary("one arbiter, relaunched on its journal",
                         run_restart(work / "single", agents_n, kills))  # fmt: skip
    finally:
        zk.down()
    print()
    print(format_table(
        ["journal", "commits", "p50 ms", "p95 ms"],
        [[w["journal"], str(w["commits"]), f"{w['p50_ms']:.2f}", f"{w['p95_ms']:.2f}"]
         for w in writes]))  # fmt: skip
    print()
    rows = [
        [s["setup"], str(s["kills"]), f"{s['serving_p50_s']:.2f} / {s['serving_p95_s']:.2f}",
         f"{s['agents_resumed_p50_s']:.2f} / {s['agents_resumed_p95_s']:.2f}",
         str(s["leases_lost"]), str(s["leases_duplicated"])]
        for s in (pair, single)
    ]  # fmt: skip
    print(format_table(["after kill -9 of the arbiter", "kills", "serving p50/p95 s",
                        "Agents back p50/p95 s", "lost", "duplicated"], rows))  # fmt: skip
    out = {"agents": agents_n, "session_timeout_s": args.session_timeout, "write_cost": writes,
           "failover": pair, "baseline_restart": single, "quick": args.quick,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    ok = all(s["leases_lost"] == 0 and s["leases_duplicated"] == 0 for s in (pair, single))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
