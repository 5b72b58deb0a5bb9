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

Usage: ``python benchmarks/hive_swing.py [--quick] [--scale S] [--queries 3,5,10] [--repeat N]
[--low V --high V --period S --cores-per-vcore C] [--out PATH]``. Needs root (a writable cgroup v1
cpu hierarchy). Writes ``benchmarks/results/hive_swing.json`` (``hive_swing_quick.json`` with
``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
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


def qoop_cache(
    connect: Callable[[], Any], sql: str, stats: dict, physical: tuple, args: argparse.Namespace
) -> dict[str, dict]:
    """What QOOP can switch between: its cached plans' estimates at the low and the high share,
    from a runner of its own (the measured runner's caches stay cold)."""
    from hive_hooks.executor import QueryRunner
    from hive_hooks.registry import CheckpointRegistry
    from hive_hooks.share import as_share

    registry = CheckpointRegistry(":memory:")
    runner = QueryRunner(
        connect, registry=registry, checkpoint_db="qoop_swing_explain", stats=stats,
        physical=physical, k=8, hysteresis=args.hysteresis,
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
    with LocalHiveServer(master="local[2]", driver_memory=args.memory) as srv:
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
                runs: dict[str, list[dict]] = {m: [] for m in modes}
                for r in range(args.repeat):
                    k = (qi + r) % len(modes)
                    order = modes[k:] + modes[:k]
                    for i, mode in enumerate(([order[0]] if r == 0 else []) + order):
                        warm = r == 0 and i == 0
                        if mode == "qoop":
                            physical = tuple(by[p] for p in QOOP_PROFILES)
                            cfg, kk = None, 8
                        else:
                            prof, cfg = forms()[mode]
                            physical, kk = (prof,), 1
                        if mode == "qoop" and "qoop_cache" not in rec:
                            rec["qoop_cache"] = qoop_cache(connect, sql, stats, physical, args)
                        registry = CheckpointRegistry(":memory:")
                        db = f"qoop_swing_{mode}_{r}"
                        runner = QueryRunner(
                            connect,
                            registry=registry,
                            checkpoint_db=db,
                            stats=stats,
                            share=ScriptedShare(profile),
                            physical=physical,
                            k=kk,
                            cost_config=cfg,
                            hysteresis=args.hysteresis,
                            share_enforcer=enforcer,
                        )
                        throttled0 = enforcer.throttled_s()
                        try:
                            res = runner.run(sql, query_id=f"swing-q{n}-{mode}-{r}-{warm}")
                        finally:
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
    out = args.out or RESULTS / ("hive_swing_quick.json" if args.quick else "hive_swing.json")
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
