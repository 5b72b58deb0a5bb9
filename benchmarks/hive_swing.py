"""QOOP against every static plan on the real local engine under a share that swings 10x during
each query (QOOP §2.6.2 micro-benchmarks, spec A.7: the share is what the query gets).

The engine is :class:`hive_hooks.engine.LocalHiveServer` (Spark Thrift Server, ``local[2]``, one
JVM). Its share is enforced by :class:`hive_hooks.cpu_share.CpuQuotaEnforcer`: the JVM sits in a
cgroup whose CFS quota the executor sets on every share change (``apply_share``), so a fall from
2 cores to 0.2 takes effect within 0.1 s, mid-task. The profile (:class:`hive_hooks.share.
ScriptedShare`, replayed from each query's start) alternates ``--low`` and ``--high`` vcores
every ``--period`` seconds, starting low: 1 and 10 vcores by default, i.e. 0.2 and 2 cores at
``--cores-per-vcore`` 0.2, a 10x swing, several times in every query.

What the two cores limit: the quota can only take CPU away; 2 cores (the machine, shared with
other work) is the most a share can get, so a 10x swing has to go down to 0.2 cores, where
every query is slow. The planner's model has 1-vcore tasks and no fractional cores, so the
share it sees is in vcores of 0.2 cores each: at 10 vcores it assumes 10 tasks in parallel
where the JVM has 2 task threads at full speed (it overrates wide plans at the high share).
Memory is not part of the share: the heap is fixed when the JVM starts (``--memory``).

Queries: TPC-H at ``--scale`` (1), the ones whose fastest form changed with the share in the
static A/B (``benchmarks/hive_physical_ab.py``: Q3, Q5 and Q10; ``--quick``: Q5 and Q10). For
every query, in an order rotated per query and repeat:

* ``qoop``: :class:`hive_hooks.executor.QueryRunner` with the diverse plan space of the A/B's
  physical profiles (broadcast, shuffle, shuffle_wide, shuffle_bounded), hysteresis
  ``--hysteresis`` (0.15), switching on every share change;
* every static form of the A/B (the same five, each pinned, ``k=1``) under the same profile and
  enforcement; ``best static`` is the fastest of them for that query (in hindsight).

Every answer is compared with the direct SQL (run without a quota). Reported per query: seconds
per mode (median of ``--repeat``), QOOP's switches and share changes seen, QOOP / best static,
and whether every answer equals the direct one; the quota's throttled seconds; the load.

``--calibrated`` (QOOP's demands and durations "based on prior runs", seed 000 L610): before
the modes of a query, every plan in QOOP's cache runs once with the engine's full CPU (no
quota), forced; the engine's own record of those runs (Spark's REST API on the driver's UI
port, :mod:`hive_hooks.spark_history`) is calibrated into stage costs in the share's vcores
(:mod:`qoop_planner.calibrate`), and QOOP plans with them (``calibration`` in the JSON: each
plan's unthrottled time, the model's and the calibrated estimates at both shares).

``--arbiter``: the share is not scripted but QOOP's 1-over-n from a real ``yarn-arbiter serve
--demo`` (a child process; 384 vcores): the query registers through
:class:`~hive_hooks.share.ArbiterShare`, and ``--rivals`` other query jobs register with the
arbiter for ``--period`` s and leave for the next ``--period`` s, from each run's start
(:class:`Rivals`), so the share moves between R/(k+1) and R. It is enforced as the CPU quota
(R is the high share's cores); the planner sees the arbiter's vcores.

Usage: ``python benchmarks/hive_swing.py [--quick] [--scale S] [--queries 3,5,10] [--repeat N]
[--low V --high V --period S --cores-per-vcore C] [--calibrated] [--arbiter [--rivals K]]
[--out PATH]``. Needs root (a writable cgroup v1
cpu hierarchy). Writes ``benchmarks/results/hive_swing[_arbiter][_calibrated][_quick].json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from arbiter.tables import format_table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from hive_physical_ab import canonical, forms  # noqa: E402

QOOP_PROFILES = ("broadcast", "shuffle", "shuffle_wide", "shuffle_bounded")


def swing_profile(low: float, high: float, period: float, horizon: float) -> list[tuple]:
    """``(t, vcores)`` steps alternating low and high every ``period`` s up to ``horizon``."""
    steps: list[tuple] = []
    t, k = 0.0, 0
    while t < horizon:
        steps.append((t, low if k % 2 == 0 else high))
        t += period
        k += 1
    return steps


class Rivals:
    """Other jobs registering with the arbiter and leaving it on the swing schedule (QOOP's
    1-over-n, seed 000 §2.3): from :meth:`start`, ``k`` query jobs are registered for
    ``period`` seconds (the measured query's share is then R/(k+1)), gone for the next
    ``period`` seconds (R), and so on; :meth:`stop` unregisters them."""

    def __init__(self, address: str, k: int, period: float) -> None:
        from hive_hooks.share import ArbiterShare

        self.shares = [ArbiterShare(address, user=f"rival{i}") for i in range(k)]
        self.period = period
        self.toggles = 0
        self._on = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _set(self, on: bool) -> None:
        for i, sh in enumerate(self.shares):
            (sh.begin if on else sh.end)(f"rival-{i}")
        self._on = on
        self.toggles += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._set(not self._on)

    def start(self) -> None:
        self._set(True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="rivals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._on:
            self._set(False)


@contextlib.contextmanager
def served_arbiter(workdir: Path) -> Iterator[str]:
    """A real ``yarn-arbiter serve --demo`` (the Themis testbed, 384 vcores) in a child process;
    yields its ``host:port``; stopped (SIGTERM, then SIGKILL) on exit."""
    from arbiter.localhost import free_port
    from hive_hooks.engine import port_is_open

    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--demo", "--port", str(port),
           "--journal", str(workdir / "journal.db")]  # fmt: skip
    log_path = workdir / "arbiter.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not port_is_open(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the arbiter did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def full_share(address: str) -> float:
    """The vcores of a query alone at the arbiter (R of QOOP's R/|J|)."""
    from hive_hooks.share import ArbiterShare

    probe = ArbiterShare(address, user="probe")
    probe.begin("probe")
    try:
        return float(probe.current().share.vcores)
    finally:
        probe.end("probe")


def qoop_cache(
    connect: Callable[[], Any],
    sql: str,
    stats: dict,
    physical: tuple,
    args: argparse.Namespace,
    history: Any = None,
    cost_config: Any = None,
) -> dict[str, dict]:
    """What QOOP can switch between: its cached plans' estimates at the low and the high share,
    from a runner of its own (the measured runner's caches stay cold)."""
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import as_share

    registry = CheckpointRegistry(":memory:")
    runner = QueryRunner(
        connect, registry=registry, checkpoint_db="qoop_swing_explain", stats=stats,
        physical=physical, k=8, hysteresis=args.hysteresis, history=history,
        cost_config=cost_config,
    )  # fmt: skip
    try:
        # explain plans under a fresh query id each call: key by the plan's number ("<id>/p<k>")
        est = {
            label: {
                e.plan.plan_id.rsplit("/", 1)[-1]: e for e in runner.explain(sql, share=as_share(v))
            }
            for label, v in (("low", args.low), ("high", args.high))
        }
    finally:
        runner.close()
        registry.close()
    return {
        pid: {
            "physical": e.plan.physical,
            "estimate_low_s": e.estimate_s,
            "estimate_high_s": est["high"][pid].estimate_s,
        }
        for pid, e in est["low"].items()
    }


def _unmeasured(e: Any, history: Any) -> bool:
    """Whether a cached plan (a PlanEstimate) has a stage to run that no prior run measured."""
    from qoop_planner.calibrate import lookup_form

    for sid in e.to_run:
        st = e.plan.stage(sid)
        form = lookup_form(st)
        if (f"{st.signature.digest}@{form}" if form else st.signature.digest) not in history:
            return True
    return False


def calibrate_query(
    connect: Callable[[], Any],
    sql: str,
    stats: dict,
    physical: tuple,
    args: argparse.Namespace,
    ui_url: str,
    tag: str,
    rounds: int = 3,
) -> tuple[Any, Any, dict]:
    """QOOP's prior runs (seed 000 L610): every cached plan of ``sql`` that has a stage no
    prior run measured runs once with the engine's full CPU (no quota), forced by the policy;
    the engine's stages of all those runs (Spark's REST API) are calibrated into a history and
    a scaled cost config (:func:`hive_hooks.spark_history.calibration`); the cache planned with
    them may hold other plans, so this repeats until every cached plan's stages are measured
    (at most ``rounds`` times). Returns (history, config, report)."""
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import StaticShare, as_share
    from hive_hooks.spark_history import SparkHistory, calibration
    from qoop_planner.cost import CostConfig, History

    def forced(suffix: str) -> Any:
        def policy(plans: Any, progress: Any, share: Any, current: Any) -> Any:
            return next(p for p in plans if p.plan_id.endswith(suffix))

        return policy

    def runner(db: str, history: Any, cfg: Any, policy: Any = None) -> Any:
        return QueryRunner(
            connect, registry=CheckpointRegistry(":memory:"), checkpoint_db=db, stats=stats,
            physical=physical, k=8, share=StaticShare(as_share(args.high)), policy=policy,
            history=history, cost_config=cfg,
        )  # fmt: skip

    history: Any = History()
    cfg = CostConfig()
    runs: list[Any] = []
    report: dict[str, Any] = {"runs": []}
    for rnd in range(rounds):
        ex = runner(f"qoop_swing_cal_{tag}_x", history, cfg)
        try:
            cache = ex.explain(sql, share=as_share(args.high))
        finally:
            ex.close()
            ex.registry.close()

        todo = [e for e in cache if _unmeasured(e, history)]
        if not todo:
            break
        for e in todo:
            suffix = "/" + e.plan.plan_id.rsplit("/", 1)[-1]
            db = f"qoop_swing_cal_{tag}_{rnd}_{suffix[1:]}"
            r = runner(db, history, cfg, forced(suffix))
            try:
                res = r.run(sql, query_id=f"cal-{tag}-{rnd}{suffix}")
            finally:
                r.close()
                r.registry.close()
                conn = connect()
                try:
                    conn.cursor().execute(f"DROP DATABASE IF EXISTS {db} CASCADE")
                finally:
                    conn.close()
            runs.append(res)
            report["runs"].append(
                {"round": rnd, "physical": e.plan.physical, "estimate_high_s": e.estimate_s,
                 "measured_unthrottled_s": res.elapsed_s - res.planning_s}
            )  # fmt: skip
            print(f"  calibration run {tag} round {rnd} {e.plan.physical}: estimated "
                  f"{e.estimate_s:.1f} s, took {res.elapsed_s - res.planning_s:.1f} s",
                  file=sys.stderr)  # fmt: skip
        stages = SparkHistory(ui_url).stages()
        history, cfg = calibration(runs, stages, CostConfig(), cores_per_vcore=args.cores_per_vcore)
    report["measured_stages"] = len(history)
    report["rate_scale"] = cfg.task_overhead_s / CostConfig().task_overhead_s
    report["model_cache"] = qoop_cache(connect, sql, stats, physical, args)
    return history, cfg, report


def run(
    args: argparse.Namespace,
    queries: dict[int, str],
    stats: dict,
    on_query: Callable[[dict[int, dict]], None] = lambda _: None,
) -> dict:
    """Every mode of every query on one engine; ``on_query`` gets the results so far after each
    query (the benchmark writes them, so a run cut short keeps its finished queries)."""
    from hive_hooks.cpu_share import CpuQuotaEnforcer
    from hive_hooks.demo import timed_one_shot
    from hive_hooks.engine import LocalHiveServer
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import ScriptedShare
    from hive_hooks.tpcload import load_tpc as load_into_hive
    from qoop_planner.physical import PROFILES

    by = {p.name: p for p in PROFILES}
    out: dict[int, dict] = {}
    profile = swing_profile(args.low, args.high, args.period, 3600.0)
    from arbiter.localhost import free_port
    from hive_hooks.spark_history import ui_conf

    ui_port = free_port()
    conf = ui_conf(ui_port) if args.calibrated else {}
    stack = contextlib.ExitStack()
    address = ""
    if args.arbiter:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="swing-arb-")))
        address = stack.enter_context(served_arbiter(work))
        r = full_share(address)
        # the share the query gets alone (R) is the engine's high CPU; R/(k+1) the low one
        high_cores = args.high * args.cores_per_vcore
        args.cores_per_vcore = high_cores / r
        args.high, args.low = r, r / (args.rivals + 1)
        print(f"arbiter at {address}: R = {r:g} vcores, {args.rivals} rivals every "
              f"{args.period:g} s", file=sys.stderr)  # fmt: skip

    def share_source() -> Any:
        if args.arbiter:
            from hive_hooks.share import ArbiterShare

            return ArbiterShare(address, user="swing")
        return ScriptedShare(profile)

    with stack, LocalHiveServer(master="local[2]", driver_memory=args.memory,
                                extra_conf=conf) as srv:  # fmt: skip
        assert srv.pid is not None
        comm = Path(f"/proc/{srv.pid}/comm").read_text().strip()
        print(f"engine pid {srv.pid} ({comm}) up in {srv.start_seconds:.1f} s", file=sys.stderr)
        rep = load_into_hive(
            srv.connect, "tpch", args.scale, "tpch", data_dir=Path(srv.work_dir) / "data"
        )
        print(f"loaded sf {args.scale:g} in {rep.seconds:.1f} s", file=sys.stderr)

        def connect() -> Any:
            return srv.connect(database="tpch")

        with CpuQuotaEnforcer(srv.pid, cores_per_vcore=args.cores_per_vcore) as enforcer:
            modes = ["qoop", *forms()]
            for qi, (n, sql) in enumerate(queries.items()):
                timed_one_shot(connect, sql)  # warm-up
                d_s, d_rows = timed_one_shot(connect, sql)
                expected = canonical(d_rows)
                rec: dict[str, Any] = {"direct_s_unthrottled": d_s, "modes": {}}
                history = cal_cfg = None
                if args.calibrated:
                    enforcer.set_cores(None)
                    history, cal_cfg, rec["calibration"] = calibrate_query(
                        connect, sql, stats, tuple(by[p] for p in QOOP_PROFILES), args,
                        f"http://127.0.0.1:{ui_port}", f"q{n}",
                    )  # fmt: skip
                runs: dict[str, list[dict]] = {m: [] for m in modes}
                for r in range(args.repeat):
                    k = (qi + r) % len(modes)
                    order = modes[k:] + modes[:k]
                    for i, mode in enumerate(([order[0]] if r == 0 else []) + order):
                        warm = r == 0 and i == 0
                        hist = None
                        if mode == "qoop":
                            physical = tuple(by[p] for p in QOOP_PROFILES)
                            cfg, kk, hist = cal_cfg, 8, history
                        else:
                            prof, cfg = forms()[mode]
                            physical, kk = (prof,), 1
                        if mode == "qoop" and "qoop_cache" not in rec:
                            rec["qoop_cache"] = qoop_cache(
                                connect, sql, stats, physical, args, history, cal_cfg
                            )
                        registry = CheckpointRegistry(":memory:")
                        db = f"qoop_swing_{mode}_{r}"
                        runner = QueryRunner(
                            connect,
                            registry=registry,
                            checkpoint_db=db,
                            stats=stats,
                            share=share_source(),
                            physical=physical,
                            k=kk,
                            cost_config=cfg,
                            hysteresis=args.hysteresis,
                            share_enforcer=enforcer,
                            history=hist,
                        )
                        throttled0 = enforcer.throttled_s()
                        rivals = Rivals(address, args.rivals, args.period) if args.arbiter else None
                        try:
                            if rivals is not None:
                                rivals.start()
                            res = runner.run(sql, query_id=f"swing-q{n}-{mode}-{r}-{warm}")
                        finally:
                            if rivals is not None:
                                rivals.stop()
                            runner.close()
                            registry.close()
                            enforcer.set_cores(None)
                            conn = connect()
                            try:
                                conn.cursor().execute(f"DROP DATABASE IF EXISTS {db} CASCADE")
                            finally:
                                conn.close()
                        one = {
                            "seconds": res.elapsed_s,
                            "equal_to_direct": canonical(res.rows) == expected,
                            "switches": len(res.switches),
                            "share_changes": res.share_changes,
                            "initial_plan": res.initial_plan_id,
                            "final_plan": res.plan_id,
                            "throttled_s": enforcer.throttled_s() - throttled0,
                        }
                        print(
                            f"Q{n} {mode}{' (warm-up)' if warm else ''}: {res.elapsed_s:.1f} s, "
                            f"{one['switches']} switches, {one['share_changes']} changes, "
                            f"equal={one['equal_to_direct']}",
                            file=sys.stderr,
                        )
                        if warm:
                            rec["warmup"] = {"mode": mode, **one}
                        else:
                            runs[mode].append(one)
                for mode, rs in runs.items():
                    rec["modes"][mode] = {
                        "seconds": statistics.median(x["seconds"] for x in rs),
                        "runs": rs,
                        "equal_to_direct": all(x["equal_to_direct"] for x in rs),
                        "switches_mean": statistics.fmean(x["switches"] for x in rs),
                        "share_changes_mean": statistics.fmean(x["share_changes"] for x in rs),
                    }
                static = {m: v for m, v in rec["modes"].items() if m != "qoop"}
                best = min(static, key=lambda m: static[m]["seconds"])
                rec["best_static"] = best
                rec["qoop_speedup_vs_best_static"] = (
                    static[best]["seconds"] / rec["modes"]["qoop"]["seconds"]
                )
                rec["qoop_speedup_vs_median_static"] = (
                    statistics.median(v["seconds"] for v in static.values())
                    / rec["modes"]["qoop"]["seconds"]
                )
                out[n] = rec
                on_query(out)
            applied = [(round(t, 2), c) for t, c in enforcer.applied]
    return {"per_query": out, "quota_changes": len(applied)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="queries 5 and 10, one repeat")
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    ap.add_argument("--queries", help="TPC-H query numbers (default 3,5,10; quick 5,10)")
    ap.add_argument("--repeat", type=int, help="runs per mode, median (default 2, quick 1)")
    ap.add_argument("--low", type=float, default=1.0, help="low share, vcores (default 1)")
    ap.add_argument("--high", type=float, default=10.0, help="high share, vcores (default 10)")
    ap.add_argument("--period", type=float, default=5.0, help="seconds per step (default 5)")
    ap.add_argument("--cores-per-vcore", type=float, default=0.2, help="CPU quota per vcore")
    ap.add_argument("--hysteresis", type=float, default=0.15)
    ap.add_argument("--memory", default="2g", help="the engine's heap (default 2g)")
    ap.add_argument(
        "--calibrated",
        action="store_true",
        help="QOOP plans with stage costs calibrated from prior runs on the engine",
    )
    ap.add_argument(
        "--arbiter",
        action="store_true",
        help="the share from a real yarn-arbiter serve, moved by --rivals jobs registering "
        "and leaving every --period s",
    )
    ap.add_argument("--rivals", type=int, default=9, help="other jobs (default 9: a 10x swing)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 2)
    wanted = [int(x) for x in (args.queries or ("5,10" if args.quick else "3,5,10")).split(",")]
    from qoop_planner.tpc import load_tpc

    wall0 = time.perf_counter()
    load0 = list(os.getloadavg())
    tpc = load_tpc("tpch", args.scale)
    queries = {n: tpc.queries[n] for n in wanted}
    stats = {f"tpch.{t}": s for t, s in tpc.stats.items()}
    name = "hive_swing" + ("_arbiter" if args.arbiter else "")
    name += ("_calibrated" if args.calibrated else "") + ("_quick" if args.quick else "")
    out = args.out or RESULTS / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    def partial(per: dict[int, dict]) -> None:
        doc = {"partial": True, "per_query": {str(n): v for n, v in per.items()}}
        out.write_text(json.dumps(doc, indent=2) + "\n")

    res = run(args, queries, stats, partial)
    per = res["per_query"]
    modes = ["qoop", *forms()]
    rows = []
    for n in wanted:
        rec = per[n]
        rows.append(
            [
                f"Q{n}",
                *(f"{rec['modes'][m]['seconds']:.1f}" for m in modes),
                f"{rec['modes']['qoop']['switches_mean']:.1f}",
                f"{rec['modes']['qoop']['share_changes_mean']:.1f}",
                rec["best_static"],
                f"{rec['qoop_speedup_vs_best_static']:.2f}x",
                "yes" if all(v["equal_to_direct"] for v in rec["modes"].values()) else "NO",
            ]
        )
    print(
        format_table(
            ["query", *(f"{m} s" for m in modes), "qoop switches", "share changes",
             "best static", "qoop vs best", "answers equal"],
            rows,
        )
    )  # fmt: skip
    cores = (args.low * args.cores_per_vcore, args.high * args.cores_per_vcore)
    print(
        f"share: {args.low:g} <-> {args.high:g} vcores every {args.period:g} s, enforced as "
        f"{cores[0]:g} <-> {cores[1]:g} cores (CFS quota on the engine JVM)"
    )
    doc = {
        "machine": platform.platform(),
        "cpu_count": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": list(os.getloadavg()),
        "parameters": {
            "quick": args.quick,
            "scale": args.scale,
            "queries": wanted,
            "repeat": args.repeat,
            "low_vcores": args.low,
            "high_vcores": args.high,
            "period_s": args.period,
            "cores_per_vcore": args.cores_per_vcore,
            "enforced_cores": list(cores),
            "hysteresis": args.hysteresis,
            "calibrated": args.calibrated,
            "share_source": "arbiter" if args.arbiter else "scripted",
            "rivals": args.rivals if args.arbiter else None,
            "memory": args.memory,
            "master": "local[2]",
            "qoop_profiles": list(QOOP_PROFILES),
            "static_forms": list(forms()),
        },
        "per_query": {str(n): v for n, v in per.items()},
        "quota_changes": res["quota_changes"],
        "all_answers_equal": all(
            v["equal_to_direct"] for rec in per.values() for v in rec["modes"].values()
        ),
        "qoop_beats_best_static": [
            f"Q{n}" for n, rec in per.items() if rec["qoop_speedup_vs_best_static"] > 1.0
        ],
        "wall_s": time.perf_counter() - wall0,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} ({doc['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
