"""Arbiter under load: N concurrent Agents over gRPC against a served arbiter, ours against the
previous one in the same run.

Each arbiter runs as ``yarn-arbiter serve`` in its own process on ``themis-sim-256`` (3-second
leases, so that rounds keep coming); this process drives N Agents with grpc.aio: each registers,
keeps a Session stream open, sends a heartbeat and a progress report every second and answers
every offer with a bid of a few rows drawn from the offer; N/10 Hive query jobs subscribe to
their fair share. Three configurations, at each Agent count:

* ``previous/unary``: the arbiter of ``--previous-rev`` (``git archive`` of the commit before
  the stream heartbeat), driven the way it is spoken to: a Heartbeat on the stream and a unary
  ``ReportProgress`` call each second, whose round trip is the heartbeat's;
* ``ours/unary``: this tree's arbiter, driven the same way (existing clients);
* ``ours/stream``: this tree's arbiter, one Heartbeat on the stream carrying the progress report
  and asking for a ``HeartbeatAck``, whose round trip is the heartbeat's.

The Agents run in ``--load-processes`` processes (default 1), each with its own event loop.
Latencies are taken after every Agent and subscriber is up and the registration burst's backlog
has drained (at most 30 s). Reported per run: heartbeat round trips answered per second against
the N offered, their p50/p99, errors (a late bid refused, a heartbeat unanswered in 5 s: every
error counts), the arbiter's own CPU (cores, and per 1,000 Agents) apart from its niced auction
worker's, the load generator's CPU, rounds/s, RegisterApp (a burst at start) and
offer-to-allocation latency. ``--quick``: 1,000 and 3,000 Agents, 8 measured seconds each.
Writes ``benchmarks/results/arbiter_load.json`` (``arbiter_load_quick.json`` with ``--quick``).

Target (this 2-core machine, load generator included): 3,000 Agents with heartbeat p99 <= 50 ms
and zero errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import grpc
from load_measure import (
    IDLE_PROBE,
    PY_SPY,
    cpu_pressure_us,
    cpu_seconds,
    own_cpu_seconds,
    profile_summary,
)

from arbiter.localhost import free_port
from arbiter.server import quiet_gc
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

# when a dict: run_part (in this process) leaves its raw samples here
PROBE: dict | None = None
RESULTS = Path(__file__).resolve().parent / "results"
ADMIN_TOKEN = "load-admin"
ACK_TIMEOUT_S = 5.0  # a heartbeat unanswered this long is an error (the unary call's deadline)
# what the heartbeat round trip is called in each transport's latencies
HEARTBEAT = {"unary": "ReportProgress", "stream": "Heartbeat->ack"}
# Agents that share one gRPC channel (one HTTP/2 connection) in the load generator (a real
# Agent has a connection of its own)
AGENTS_PER_CHANNEL = 50


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q / 100 * len(s) + 0.5) - 1))] if s else float("nan")


class Stats:
    def __init__(self) -> None:
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.examples: dict[str, str] = {}  # the first message of each kind of error
        self.slow: list[float] = []  # when each heartbeat slower than 50 ms was sent
        self.offers: dict[int, float] = {}  # round -> when its first offer arrived
        self.count = 0
        self.share_updates = 0
        self.ready = 0  # agents whose first heartbeat went through, subscribers subscribed
        self.in_flight = 0  # heartbeats sent and not yet answered (or failed)
        self.lag: list[tuple[float, float]] = []  # (when, ms late): this process's loop lag
        # (sent, round trip ms, app, seq) of every heartbeat
        self.beats: list[tuple[float, float, str, int]] = []

    def error(self, kind: str, details: str | None) -> None:
        self.errors[kind] += 1
        self.examples.setdefault(kind, details or "")

    def record(self, kind: str, seconds: float) -> None:
        self.lat[kind].append(seconds * 1e3)
        self.count += 1


async def agent(
    stub: rpc.AppMasterStub, stats: Stats, stop: asyncio.Event, k: int, transport: str
) -> None:
    """One Agent. ``transport`` carries its heartbeat and progress report each second:
    ``unary`` (the previous way: a Heartbeat on the Session stream and a ``ReportProgress``
    call, whose round trip is measured) or ``stream`` (one Heartbeat on the stream carrying the
    report and asking for a ``HeartbeatAck``, whose round trip is measured)."""
    t = time.perf_counter()
    demand = random.choice((1, 2, 4, 8))
    try:
        reg = await stub.RegisterApp(
            pb.RegisterAppRequest(app_name=f"load-{k}", max_gpu_demand=demand),
            metadata=[("x-admin-token", ADMIN_TOKEN)],
        )
    except grpc.RpcError as exc:
        stats.error(f"RegisterApp {exc.code().name}", exc.details())
        return
    stats.record("RegisterApp", time.perf_counter() - t)
    md = [("x-app-token", reg.app_token)]
    outbox: asyncio.Queue = asyncio.Queue()  # None ends the stream
    await outbox.put(pb.AgentMessage(hello=pb.SessionHello(app_id=reg.app_id)))
    offered_at: dict[int, float] = {}
    held: dict[str, float] = {}  # GPU -> lease end (the room a bid may ask for)
    beats: dict[int, float] = {}  # heartbeat seq -> when sent (stream transport)
    acked = asyncio.Event()  # the first ack (stream transport: the Agent is up)

    async def requests():
        # Plain awaits, no per-message timers or tasks: the load generator shares the
        # machine with the arbiter, so every cycle it saves is one the arbiter can use.
        while (item := await outbox.get()) is not None:
            yield item

    call = stub.Session(requests(), metadata=md)

    async def reader() -> None:
        try:
            async for msg in call:
                kind = msg.WhichOneof("kind")
                if kind == "heartbeat_ack":
                    sent = beats.pop(msg.heartbeat_ack.seq, None)
                    if sent is not None:
                        stats.in_flight -= 1
                        stats.record(HEARTBEAT[transport], time.perf_counter() - sent)
                        stats.beats.append(
                            (
                                sent,
                                (time.perf_counter() - sent) * 1e3,
                                reg.app_id,
                                msg.heartbeat_ack.seq,
                            )
                        )
                        if time.perf_counter() - sent > 0.05:
                            stats.slow.append(sent)
                        acked.set()
                elif kind == "offer":
                    o = msg.offer
                    offered_at[o.round] = time.perf_counter()
                    stats.offers.setdefault(o.round, offered_at[o.round])
                    ids = [g.id for g in o.gpus]
                    now = time.time()
                    room = demand - sum(1 for end in held.values() if end > now)
                    rows = [
                        pb.BidRow(gpu_ids=random.sample(ids, min(n, len(ids))), rho=4.0 / n)
                        for n in (1, 2, 4)
                        if n <= room
                    ]
                    rows = list({tuple(sorted(r.gpu_ids)): r for r in rows}.values())
                    await outbox.put(
                        pb.AgentMessage(bid=pb.Bid(round=o.round, rho_old=8.0, rows=rows))
                    )
                elif kind == "allocation":
                    for lease in msg.allocation.leases:
                        for g in lease.gpu_ids:
                            held[g] = lease.end_unix_s
                    if msg.allocation.round in offered_at:
                        stats.record(
                            "offer->allocation",
                            time.perf_counter() - offered_at.pop(msg.allocation.round),
                        )
                elif kind == "error":
                    stats.error(f"session {msg.error.code}", msg.error.message)
        except grpc.RpcError as exc:
            if not stop.is_set():
                stats.error(f"Session {exc.code().name}", exc.details())

    read_task = asyncio.create_task(reader())
    loop = asyncio.get_running_loop()
    beat = loop.time() + random.random()  # spread heartbeats over the second
    first = True
    seq = 0
    report = pb.ProgressReport(job_id="j", iter_time_s=0.1)
    while True:
        await asyncio.sleep(max(0.0, beat - loop.time()))
        beat += 1.0
        if stop.is_set():
            break
        seq += 1
        if transport == "stream":
            beats[seq] = time.perf_counter()
            stats.in_flight += 1
            await outbox.put(
                pb.AgentMessage(
                    heartbeat=pb.Heartbeat(
                        sent_unix_s=time.time(), seq=seq, want_ack=True, progress=[report]
                    )
                )
            )
            late = [s for s, sent in beats.items() if time.perf_counter() - sent > ACK_TIMEOUT_S]
            for s in late:  # as a unary call's deadline would: an error, not a latency
                del beats[s]
                stats.in_flight -= 1
                stats.error("Heartbeat ack DEADLINE_EXCEEDED", f"no ack in {ACK_TIMEOUT_S} s")
            if first:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(acked.wait(), ACK_TIMEOUT_S)
        else:
            await outbox.put(pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_s=time.time())))
            t = time.perf_counter()
            stats.in_flight += 1
            try:
                await stub.ReportProgress(report, metadata=md, timeout=ACK_TIMEOUT_S)
                stats.record(HEARTBEAT[transport], time.perf_counter() - t)
                stats.beats.append((t, (time.perf_counter() - t) * 1e3, reg.app_id, seq))
                if time.perf_counter() - t > 0.05:
                    stats.slow.append(t)
            except grpc.RpcError as exc:
                stats.error(f"ReportProgress {exc.code().name}", exc.details())
            stats.in_flight -= 1
        if first:
            first = False
            stats.ready += 1
    await outbox.put(None)
    call.cancel()
    await asyncio.gather(read_task, return_exceptions=True)


async def loop_lag(stats: Stats, stop: asyncio.Event, every: float = 0.005) -> None:
    """Samples how late this process's event loop wakes a timer (``every`` seconds apart): the
    load generator's own lag, which a heartbeat's round trip includes."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(every)
        late = time.perf_counter() - t - every
        stats.lag.append((t + every, late * 1e3))


async def subscriber(stub: rpc.QueryShareStub, stats: Stats, stop: asyncio.Event) -> None:
    reg = await stub.RegisterQuery(
        pb.RegisterQueryRequest(query_name="q"), metadata=[("x-admin-token", ADMIN_TOKEN)]
    )
    call = stub.SubscribeShare(
        pb.SubscribeShareRequest(job_id=reg.job_id), metadata=[("x-app-token", reg.job_token)]
    )

    async def read() -> None:
        try:
            async for _ in call:
                stats.share_updates += 1
        except grpc.RpcError as exc:
            if not stop.is_set():
                stats.error(f"SubscribeShare {exc.code().name}", exc.details())

    task = asyncio.create_task(read())
    stats.ready += 1
    await stop.wait()
    call.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def run_part(
    port: int,
    ks: range,
    subscribers: int,
    seconds: float,
    transport: str,
    server_pid: int,
    sync,
    main: bool,
    profile: str = "",
    quiet: bool = True,
    per_channel: int = AGENTS_PER_CHANNEL,
) -> dict:
    """One load process: agents ``ks`` and ``subscribers`` share subscribers. Every part ramps
    up, meets the others at ``sync`` (a barrier), warms up and measures for ``seconds``; the
    ``main`` part also reads the round counter and the arbiter's CPU time, and samples the
    arbiter with py-spy into the file ``profile`` (when given) while measuring. ``quiet``: keep
    this process's cyclic GC from stalling its loop (``arbiter.server.quiet_gc``, as ``serve``
    does for the arbiter, after the ramp-up); else Python's defaults."""
    stats = Stats()
    stop = asyncio.Event()
    channels = [
        grpc.aio.insecure_channel(f"localhost:{port}")
        for _ in range(max(1, len(ks) // per_channel))
    ]
    tasks = [
        asyncio.create_task(
            agent(rpc.AppMasterStub(channels[k % len(channels)]), stats, stop, k, transport)
        )
        for k in ks
    ]
    tasks += [
        asyncio.create_task(
            subscriber(rpc.QueryShareStub(channels[i % len(channels)]), stats, stop)
        )
        for i in range(subscribers)
    ]
    admin = rpc.AdminStub(channels[0])
    md = [("x-admin-token", ADMIN_TOKEN)]
    # ramp-up: every agent registered and heartbeating, every subscriber subscribed (the
    # RegisterApp burst is reported apart), in every part; then a few seconds of steady state
    t_ramp = time.perf_counter()
    while stats.ready < len(tasks) and time.perf_counter() - t_ramp < 180:
        await asyncio.sleep(0.1)
    await asyncio.get_running_loop().run_in_executor(None, sync.wait, 240)
    ramp_s = time.perf_counter() - t_ramp
    threshold = gc.get_threshold()
    if quiet:  # the objects of the ramp-up out of every collection, and none while measuring
        quiet_gc()
        gc.disable()
    gc_pauses: list[float] = []
    gc_started = [0.0]

    def gc_timer(phase: str, info: dict) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_pauses.append((time.perf_counter() - gc_started[0]) * 1e3)

    gc.callbacks.append(gc_timer)
    # warm-up: a few seconds, and until the registration burst's backlog of heartbeats has
    # drained (at most 30 s more; what is left is measured)
    await asyncio.sleep(min(3.0, seconds / 3))
    t_settle = time.perf_counter()
    while stats.in_flight > max(10, len(ks) // 10) and time.perf_counter() - t_settle < 30:
        await asyncio.sleep(0.2)
    settle_s = time.perf_counter() - t_settle
    beat_kind = HEARTBEAT[transport]
    errors0 = sum(stats.errors.values())
    r0 = (await admin.GetClusterState(pb.ClusterStateRequest(), metadata=md)).round if main else 0
    cpu0 = (cpu_seconds(server_pid) if main else (0.0, 0.0), own_cpu_seconds())
    spy = None
    if profile and main:
        spy = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(server_pid), "--duration", str(int(seconds)),
             "--rate", "50", "--native", "--format", "raw", "--output", profile],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    # the machine's own scheduling delay while measuring: a process that does nothing but wake
    # a 5 ms timer (what neither the arbiter nor the generator can do better than)
    idle = (
        subprocess.Popen([sys.executable, "-c", IDLE_PROBE, str(seconds)], stdout=subprocess.PIPE)
        if main
        else None
    )
    psi0, load0 = cpu_pressure_us(), os.getloadavg()[0]
    t0 = time.perf_counter()
    for kind in (beat_kind, "offer->allocation"):
        stats.lat[kind].clear()
    stats.slow.clear()
    stats.beats.clear()
    lag_task = asyncio.create_task(loop_lag(stats, stop))
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - t0
    psi1, load1 = cpu_pressure_us(), os.getloadavg()[0]
    cpu1 = (cpu_seconds(server_pid) if main else (0.0, 0.0), own_cpu_seconds())
    r1 = (await admin.GetClusterState(pb.ClusterStateRequest(), metadata=md)).round if main else 0
    delivered = len(stats.lat[beat_kind])
    if spy is not None:
        await asyncio.get_running_loop().run_in_executor(None, spy.wait, 120)
    idle_lag = [0.0]
    if idle is not None:
        out, _ = await asyncio.get_running_loop().run_in_executor(None, idle.communicate)
        idle_lag = [float(x) for x in out.split()]
    stop.set()
    await asyncio.gather(*tasks, lag_task, return_exceptions=True)
    if PROBE is not None:  # raw samples for a caller that analyses them (one process only)
        PROBE.update(beats=stats.beats, lag=stats.lag, offers=sorted(stats.offers.values()))
    lags = [x for _, x in stats.lag]
    gc.callbacks.remove(gc_timer)
    if quiet:  # as it was (the next configuration may run in this process)
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*threshold)
    for ch in channels:
        await ch.close()
    return {
        "lat": dict(stats.lat),
        # heartbeats slower than 50 ms sent within a second after a round's first offer
        "slow": len(stats.slow),
        "slow_in_round": sum(
            1 for t in stats.slow if any(0 <= t - o <= 1.0 for o in stats.offers.values())
        ),
        "errors": dict(stats.errors),
        "errors_measured": sum(stats.errors.values()) - errors0,
        "error_examples": stats.examples,
        "delivered": delivered,
        "up": stats.ready,
        "elapsed": elapsed,
        "ramp_s": ramp_s,
        "settle_s": settle_s,
        "server_cpu": cpu1[0][0] - cpu0[0][0],
        "auction_cpu": cpu1[0][1] - cpu0[0][1],
        "client_cpu": cpu1[1] - cpu0[1],
        "load_lag": lags,
        "idle_lag": idle_lag,
        "load_gc_ms": gc_pauses,
        "rounds": r1 - r0,
        "share_updates": stats.share_updates,
        "main": main,
        # the machine meanwhile: CPU pressure (share of the time some task waited for a CPU)
        # and the 1-minute load average at the start and the end
        "cpu_pressure": (psi1 - psi0) / 1e6 / elapsed,
        "loadavg": (load0, load1),
    }


def _part_process(args: tuple, sync, out) -> None:
    try:
        out.put(asyncio.run(run_part(*args[:6], sync, *args[6:])))
    except BaseException as exc:  # reported by the parent
        out.put({"failed": f"{type(exc).__name__}: {exc}"})


def run_load(
    port: int,
    agents: int,
    seconds: float,
    transport: str,
    server_pid: int,
    procs: int = 1,
    profile: str = "",
    quiet: bool = True,
    per_channel: int = AGENTS_PER_CHANNEL,
) -> dict:
    """Drive ``agents`` Agents (and a tenth as many share subscribers) over ``transport`` from
    ``procs`` load processes (their GC quiet or not: :func:`run_part`); merge their
    measurements into one record."""
    subs = max(1, agents // 10)
    procs = max(1, min(procs, agents))
    cut = [agents * p // procs for p in range(procs + 1)]
    parts = [
        (port, range(cut[p], cut[p + 1]), subs * (p + 1) // procs - subs * p // procs, seconds,
         transport, server_pid, p == 0, profile, quiet, per_channel)
        for p in range(procs)
    ]  # fmt: skip
    if procs == 1:
        results = [asyncio.run(run_part(*parts[0][:6], threading.Barrier(1), *parts[0][6:]))]
    else:
        ctx = multiprocessing.get_context("spawn")
        sync, out = ctx.Barrier(procs), ctx.Queue()
        workers = [ctx.Process(target=_part_process, args=(a, sync, out)) for a in parts]
        for w in workers:
            w.start()
        results = [out.get(timeout=seconds + 600) for _ in workers]
        for w in workers:
            w.join(timeout=30)
        failed = [r["failed"] for r in results if "failed" in r]
        if failed:
            raise RuntimeError(f"a load process failed: {failed[0]}")
    main_part = next(r for r in results if r["main"])  # it read the rounds and server CPU
    elapsed = max(r["elapsed"] for r in results)
    lat: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    examples: dict[str, str] = {}
    for r in results:
        for k, v in r["error_examples"].items():
            examples.setdefault(k, v)
        for k, v in r["lat"].items():
            lat[k].extend(v)
        for k, v in r["errors"].items():
            errors[k] += v
    per_type = {
        kind: {
            "n": len(v),
            "p50_ms": round(statistics.median(v), 2),
            "p99_ms": round(pct(v, 99), 2),
        }
        for kind, v in lat.items()
        if v
    }
    beat = per_type.get(HEARTBEAT[transport], {})
    server_cores = main_part["server_cpu"] / elapsed
    return {
        "agents": agents,
        "transport": transport,
        "load_processes": procs,
        "generator_gc": "quiet" if quiet else "default",
        "agents_per_channel": per_channel,
        "seconds": round(elapsed, 1),
        "cpu_pressure_some": round(main_part["cpu_pressure"], 3),
        "loadavg_1m": [round(x, 2) for x in main_part["loadavg"]],
        "ramp_s": round(max(r["ramp_s"] for r in results), 1),  # until everything was up
        "settle_s": round(max(r["settle_s"] for r in results), 1),  # the backlog's drain
        "agents_up": sum(r["up"] for r in results) - subs,
        # cores busy while measuring: the arbiter's process (gRPC, sessions, the scheduling
        # loop: what fan-in costs), its niced auction worker (which takes what is left, up to
        # the time budget per round), the load generator
        "server_cores": round(server_cores, 3),
        "server_cores_per_1000_agents": round(server_cores * 1000 / agents, 3),
        "auction_cores": round(main_part["auction_cpu"] / elapsed, 3),
        # the arbiter's CPU per heartbeat answered (rounds included): its cost, whether or
        # not the machine gave it the cores to keep up
        "server_cpu_ms_per_heartbeat": round(
            main_part["server_cpu"] * 1e3 / max(1, sum(r["delivered"] for r in results)), 3
        ),
        "client_cores": round(sum(r["client_cpu"] for r in results) / elapsed, 2),
        # how late the load generator's own event loop woke a 5 ms timer while measuring: a
        # heartbeat's round trip includes it (p99 near the heartbeat's: the generator's tail)
        "load_loop_lag_p99_ms": round(pct([x for r in results for x in r["load_lag"]], 99), 2),
        # how late an idle process woke a 5 ms timer meanwhile: the machine's scheduling delay
        "idle_timer_lag_p99_ms": round(pct(main_part["idle_lag"], 99), 2),
        "idle_timer_lag_max_ms": round(max(main_part["idle_lag"]), 2),
        # the load generator's cyclic GC pauses while measuring (a stall of its loop)
        "load_gc_pauses": sum(len(r["load_gc_ms"]) for r in results),
        "load_gc_pause_max_ms": round(
            max((x for r in results for x in r["load_gc_ms"]), default=0.0), 2
        ),
        "load_loop_lag_max_ms": round(
            max((x for r in results for x in r["load_lag"]), default=float("nan")), 2
        ),
        # heartbeat round trips: offered (one per Agent per second) and answered, per second
        "heartbeats_offered_per_s": float(agents),
        "heartbeats_per_s": round(sum(r["delivered"] for r in results) / elapsed, 1),
        "p50_ms": beat.get("p50_ms"),
        "p99_ms": beat.get("p99_ms"),
        # every error from registration to shutdown (late bids refused included), and those
        # of the measured seconds
        "errors": sum(errors.values()),
        "errors_measured": sum(r["errors_measured"] for r in results),
        "error_kinds": dict(errors),
        "error_examples": examples,
        "rounds_per_s": round(main_part["rounds"] / elapsed, 2),
        # where the tail is: heartbeats over 50 ms, and those sent within 1 s after an offer
        "slow_heartbeats": sum(r["slow"] for r in results),
        "slow_heartbeats_in_rounds": sum(r["slow_in_round"] for r in results),
        "share_updates": sum(r["share_updates"] for r in results),
        "per_type": per_type,
    }


# The arbiter before the stream heartbeat (the commit this work started from): served from a
# `git archive` of that commit, driven over the unary transport it has.
PREVIOUS_REV = "e0a4189"
CONFIGS = {
    "previous/unary": ("previous", "unary"),
    "ours/unary": ("ours", "unary"),
    "ours/stream": ("ours", "stream"),
    "previous/stream": ("previous", "stream"),  # a --previous-rev that has the stream heartbeat
}
# By default: the three that work with the default --previous-rev (it has no stream heartbeat:
# previous/stream there answers nothing and counts every heartbeat as an error).
DEFAULT_CONFIGS = ("previous/unary", "ours/unary", "ours/stream")


def previous_tree(rev: str, into: Path) -> Path:
    """The repository at ``rev``, unpacked into ``into`` (``git archive``)."""
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def serve_and_load(
    root: Path,
    agents: int,
    seconds: float,
    transport: str,
    policy: str,
    procs: int,
    profile: str = "",
    quiet: bool = True,
    per_channel: int = AGENTS_PER_CHANNEL,
) -> dict:
    """Serve the arbiter of the tree ``root`` in its own process and drive it (``profile``: a
    py-spy raw file to sample it into while measuring)."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        token_file = Path(tmp) / "admin"
        token_file.write_text(ADMIN_TOKEN + "\n")
        env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "ARBITER_LEASE_SECONDS": "3",
            "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "10",
            "ARBITER_BID_DEADLINE_SECONDS": "1",
            "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.5",
            "ARBITER_ADMIN_TOKEN_FILE": str(token_file),
            "ARBITER_POLICY": policy,
            # the Agents register with the admin credential, beyond the default quotas
            "ARBITER_ADMISSION_MAX_APPS": "100000",
            "ARBITER_ADMISSION_MAX_APPS_PER_USER": "100000",
            "ARBITER_ADMISSION_MAX_QUERIES": "100000",
            "ARBITER_ADMISSION_MAX_QUERIES_PER_USER": "100000",
        }
        log_path = Path(tmp) / "arbiter.log"
        with log_path.open("w") as log_file:
            server = subprocess.Popen(
                [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "themis-sim-256",
                 "--port", str(port), "--journal", str(Path(tmp) / "j.db")],
                env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=log_file,
            )  # fmt: skip
            try:
                wait_serving(port, server)
                return run_load(
                    port, agents, seconds, transport, server.pid, procs=procs, profile=profile,
                    quiet=quiet, per_channel=per_channel,
                )  # fmt: skip
            finally:
                server.terminate()
                server.wait(timeout=30)
                lines = log_path.read_text(errors="replace").splitlines()
                bad = [ln for ln in lines if " ERROR " in ln or " WARNING " in ln]
                if bad:  # the arbiter's own account of what went wrong
                    print(f"arbiter log: {len(bad)} warnings/errors, last:", *bad[-5:], sep="\n  ")


def wait_serving(port: int, server: subprocess.Popen, timeout: float = 60.0) -> None:
    """Until the served arbiter accepts connections (or its process ended)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            raise RuntimeError(f"the arbiter exited with {server.returncode} before serving")
        with contextlib.suppress(OSError), socket.create_connection(("localhost", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the arbiter did not listen on {port} within {timeout} s")


def fmt(rec: dict) -> str:
    p50, p99 = rec["p50_ms"], rec["p99_ms"]
    return (
        f"{rec['config']:15s} gen-gc {rec['generator_gc']:7s} agents {rec['agents']:5d} "
        f"({rec['agents_per_channel']} per channel; CPU pressure "
        f"{rec['cpu_pressure_some']:.0%}, load {rec['loadavg_1m'][0]:.1f}->"
        f"{rec['loadavg_1m'][1]:.1f}): "
        f"load lag p99 {rec['load_loop_lag_p99_ms']:.0f} max {rec['load_loop_lag_max_ms']:.0f} "
        f"ms (idle process p99 {rec['idle_timer_lag_p99_ms']:.0f} max "
        f"{rec['idle_timer_lag_max_ms']:.0f} ms), {rec['load_gc_pauses']} GC pauses "
        f"(max {rec['load_gc_pause_max_ms']:.0f} ms)  "
        f"heartbeats {rec['heartbeats_per_s']:7.1f}"
        f"/{rec['heartbeats_offered_per_s']:.0f} per s  p50 {p50 or float('nan'):7.1f} ms  "
        f"p99 {p99 or float('nan'):7.1f} ms  errors {rec['errors']}  "
        f"arbiter {rec['server_cores']:.2f} cores ({rec['server_cores_per_1000_agents']:.2f} per "
        f"1000 Agents, {rec['server_cpu_ms_per_heartbeat']:.3f} ms per heartbeat) + auction "
        f"{rec['auction_cores']:.2f}  load {rec['client_cores']:.2f}  "
        f"rounds/s {rec['rounds_per_s']:.2f}  "
        + "  ".join(
            f"{k} p50 {v['p50_ms']:.0f} p99 {v['p99_ms']:.0f}"
            for k, v in rec["per_type"].items()
            if k in ("RegisterApp", "offer->allocation")
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", default="1000,3000", help="comma-separated counts")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help=f"server/transport pairs to run at each count, in this order (of {', '.join(CONFIGS)};"
        f" default {','.join(DEFAULT_CONFIGS)}: previous/stream needs a --previous-rev with the "
        "stream heartbeat, e.g. main)",
    )
    parser.add_argument(
        "--previous-rev", default=PREVIOUS_REV, help="git revision of the previous server"
    )
    parser.add_argument(
        "--load-processes",
        type=int,
        default=1,
        help="processes the Agents are spread over (each with its own event loop; 2 helped the "
        "3,000-Agent tail when the machine was saturated and did not when it was not: README)",
    )
    parser.add_argument(
        "--policy", default="themis", help="arbiter.policy of the served arbiter (default themis)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="1,000 and 3,000 Agents, 8 measured seconds each"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="sample the served arbiter with py-spy (--native) while measuring, into this "
        "directory (<config>-<agents>.raw), and add the summary to each record (py-spy stops the "
        "arbiter to sample it: CPU and latency of a profiled run are not comparable)",
    )
    parser.add_argument(
        "--generator-gc",
        choices=("quiet", "default", "both"),
        default="quiet",
        help="the load generator's cyclic GC: frozen after ramp-up (quiet, as serve does for "
        "the arbiter), Python's defaults, or both in turn for each configuration",
    )
    parser.add_argument(
        "--agents-per-channel",
        type=int,
        default=AGENTS_PER_CHANNEL,
        help="Agents of the load generator that share one gRPC channel (HTTP/2 connection; "
        "default %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.agents, args.seconds = "1000,3000", 8.0
    out = args.out or RESULTS / ("arbiter_load_quick.json" if args.quick else "arbiter_load.json")
    counts = [int(x) for x in args.agents.split(",")]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown --configs {unknown}; known: {', '.join(CONFIGS)}")
    ours = Path(__file__).resolve().parent.parent
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"ours": ours}
        if any(CONFIGS[c][0] == "previous" for c in configs):
            roots["previous"] = previous_tree(args.previous_rev, Path(tmp) / "previous")
        for n in counts:
            for config, gc_mode in [
                (c, g) for c in configs
                for g in (("quiet", "default") if args.generator_gc == "both"
                          else (args.generator_gc,))
            ]:  # fmt: skip
                server, transport = CONFIGS[config]
                raw = None
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    raw = args.profile / f"{config.replace('/', '-')}-{n}.raw"
                rec = serve_and_load(
                    roots[server], n, args.seconds, transport, args.policy, args.load_processes,
                    profile=str(raw or ""), quiet=gc_mode == "quiet",
                    per_channel=args.agents_per_channel,
                )  # fmt: skip
                rec = {"config": config, "server": server, **rec}
                if raw is not None and raw.is_file():
                    rec["profile"] = profile_summary(raw)
                    print(f"  profile of the arbiter: {rec['profile']['groups']}")
                records.append(rec)
                print(fmt(rec), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "arbiter_load",
                "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
                "target": {"agents": 3000, "p99_ms": 50, "errors": 0},
                "policy": args.policy,
                "previous_rev": args.previous_rev,
                "seconds": args.seconds,
                "records": records,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
