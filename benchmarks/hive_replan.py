"""QOOP on a real HiveServer2: replanned vs the best plan chosen at start, and the cost of
running stage by stage.

Setup: a local HiveServer2 (:class:`hive_hooks.engine.LocalHiveServer`, Spark Thrift Server,
``local[2]``) with TPC-H loaded by :func:`hive_hooks.tpcload.load_tpc` at ``--scale`` (0.1;
``--quick``: 0.01 and queries 3, 5, 10), or an existing server (``--url``, ``--skip-load``).
Every query is run, in this order, by:

* ``direct``: the SQL as one statement on a plain pyhive connection (``qoop-hive --no-replan``);
* ``staged``: :class:`hive_hooks.executor.QueryRunner` under a share that never changes
  (``StaticShare`` of ``--cluster-vcores``, 16): planning, one CTAS checkpoint per stage, the final
  stage as a query. ``overhead = staged / direct - 1`` (target: < 15 % on queries whose direct
  run takes over 5 s);
* ``replanned``: QueryRunner under a volatile share: it starts scarce, at 1/16 of
  ``--cluster-vcores`` (a busy cluster), and jumps to another of 1, 1/2, 1/4, 1/8, 1/16
  (seeded per query) **every time a stage starts** (``--profile stages``, the default); QOOP's
  greedy policy with hysteresis ``--hysteresis`` (0.15);
* ``start-only``: the same share sequence and the plan ``decide`` picks at the start, never
  switched (Clarinet-like: "the best plan chosen at start").

Why share changes at stage starts: the first version changed the share every ``U(1, 4)``
seconds (``--profile timed``, still available with ``--gap-min/--gap-max``). At sf 0.1 most
queries finish in 1-5 s, so a query saw 0 or 1 changes, mostly after its joins were done, and
no query ever switched (``mean_switches`` 0.0 in the first results). A change when a stage
starts always lands while the query still has joins to run, whatever the machine's speed (as
the ``switching`` fixture of ``tests/engine/test_hive_exec.py`` does). The switches and the share
changes each query saw are reported per query. Why start scarce: with the base scans inlined
(the executor's default) the cost model ranks the plans of a query within a few percent of each
other at most shares; the one transition where a plan chosen earlier becomes clearly worse is
from one or two vcores to more (left-deep plans, cheapest in total work, against plans whose
joins can run side by side). A random start share made that transition rare. With QOOP's
hysteresis of 0.15 the model still prefers few switches at sf 0.1 (its estimated gains are
mostly under 15 %); ``--hysteresis 0.05`` shows what the switches themselves cost or buy.

Fairness between the runs: each staged mode has one QueryRunner per round, as a long-lived
client (``qoop-hive -f`` with many queries) has: its connections stay open from query to query.
Every round starts with fresh in-memory registries (no measured history, no checkpoints) and
empty checkpoint databases, one per mode; queries never share checkpoints (each query has its
own namespace). Table statistics are given to the runners (``stats=``, measured by DuckDB on the
same generated data), so no run pays for gathering them while ``direct`` does not. Before
measuring, every query runs once directly (warm-up: JIT), and again right before its four
measured runs (its data warm: the first run of a query after other queries was up to 2x slower at
sf 1). The four modes run one after the other in an order rotated from query to query and round
to round. ``--repeat``
rounds, the median per mode. The rows of every mode are compared with the direct run's (floats to 9
significant digits). The summary splits the overhead into a fixed part (median of ``staged -
direct`` over queries without a checkpoint stage) and a part per checkpoint (CTAS) stage.

The share changes what the planner estimates and how many stages the executor runs at once (a
stage takes ``tasks x vcores`` of the share); the local engine itself always has 2 cores, so the
profile models a cluster share the engine does not enforce.

Usage: ``python benchmarks/hive_replan.py [--quick] [--scale S] [--queries 3,5,10] [--repeat N]
[--url JDBC --skip-load] [--out PATH]``. Writes ``benchmarks/results/hive_replan.json``
(``hive_replan_quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from arbiter.tables import format_table

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_OVERHEAD = 0.15
LONG_QUERY_S = 5.0
QUICK_QUERIES = (3, 5, 10)
FRACTIONS = (1.0, 0.5, 0.25, 0.125, 0.0625)
MODES = ("direct", "staged", "replanned", "start-only")


def volatile_profile(
    seed: int, gap: tuple[float, float], vcores: float, horizon_s: float = 3600.0
) -> list[tuple[float, Any]]:
    """``(t, Share)`` steps: a random fraction of ``vcores`` at 0, then every U(gap) seconds
    a different one."""
    from qoop_planner.model import Share

    rng = random.Random(seed)
    t, frac = 0.0, rng.choice(FRACTIONS)
    steps = [(0.0, Share(frac * vcores, frac * vcores * 2048.0))]
    while t < horizon_s:
        t += rng.uniform(*gap)
        frac = rng.choice([f for f in FRACTIONS if f != frac])
        steps.append((round(t, 3), Share(frac * vcores, frac * vcores * 2048.0)))
    return steps


class StageStartShare:
    """A share that moves to the next step of a seeded sequence of fractions of ``vcores``
    every time a stage (not the final one) starts: a :class:`~hive_hooks.share.ManualShare`
    driven by the runner's events (``hook``)."""

    def __init__(self, seed: int, vcores: float, start: float = FRACTIONS[-1]) -> None:
        from hive_hooks.share import ManualShare

        self.rng = random.Random(seed)
        self.vcores = vcores
        self.frac = start
        self.source = ManualShare(self._share(self.frac))

    def _share(self, frac: float) -> Any:
        from qoop_planner.model import Share

        return Share(frac * self.vcores, frac * self.vcores * 2048.0)

    def hook(self, event: Any) -> None:
        if event.kind == "start" and not event.stage_id.startswith("final"):
            self.frac = self.rng.choice([f for f in FRACTIONS if f != self.frac])
            self.source.set(self._share(self.frac), cause=f"{event.stage_id} started")


def start_only_policy(hysteresis: float) -> Callable[..., Any]:
    """The plan ``decide`` picks when the query starts, kept to the end (no switches)."""
    from qoop_planner.replan import decide

    def choose(plans: Sequence[Any], progress: Any, share: Any, current: str | None) -> Any:
        if current is not None:
            return next(p for p in plans if p.plan_id == current)
        return decide(plans, progress, share, hysteresis=hysteresis, current_plan_id=None).plan

    return choose


def canonical(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows comparable across plans: floats to 9 significant digits, sorted."""

    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.9g}")
        if isinstance(v, Decimal):
            return float(f"{float(v):.9g}")
        return v

    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


class Bench:
    """A direct connection factory and, per round, one QueryRunner per staged mode."""

    def __init__(self, connect: Callable[[], Any], stats: dict, args: argparse.Namespace):
        self.connect, self.stats, self.args = connect, stats, args
        self.runners: dict[str, Any] = {}
        self.registries: list[Any] = []

    def direct(self, sql: str) -> tuple[float, list[tuple[Any, ...]]]:
        from hive_hooks.demo import timed_one_shot

        return timed_one_shot(self.connect, sql)

    def new_round(self) -> None:
        """Fresh runners: empty in-memory registries (no history, no checkpoints), one
        checkpoint database per mode (emptied first)."""
        from hive_hooks.executor import QueryRunner, greedy_policy
        from hive_hooks.registry import CheckpointRegistry

        self.close()
        policies = {
            "staged": greedy_policy(self.args.hysteresis),
            "replanned": greedy_policy(self.args.hysteresis),
            "start-only": start_only_policy(self.args.hysteresis),
        }
        for mode, policy in policies.items():
            db = "qoop_bench_" + mode.replace("-", "_")
            self._drop(db)
            registry = CheckpointRegistry(":memory:")
            self.registries.append(registry)
            self.runners[mode] = QueryRunner(
                self.connect, registry=registry, checkpoint_db=db, stats=self.stats,
                policy=policy, hysteresis=self.args.hysteresis,
            )  # fmt: skip

    def staged(self, mode: str, sql: str, share: Any, on_event: Any = None) -> Any:
        runner = self.runners[mode]
        runner.share = share
        runner.on_event = on_event
        return runner.run(sql)

    def _drop(self, db: str) -> None:
        conn = self.connect()
        try:
            conn.cursor().execute(f"DROP DATABASE IF EXISTS {db} CASCADE")
        finally:
            conn.close()

    def close(self) -> None:
        for mode, runner in self.runners.items():
            runner.close()
            self._drop("qoop_bench_" + mode.replace("-", "_"))
        for registry in self.registries:
            registry.close()
        self.runners, self.registries = {}, []


def run_query(bench: Bench, n: int, sql: str, args: argparse.Namespace, turn: int) -> dict:
    """One round of the four modes on query ``n``, in an order rotated by ``turn`` (a run
    right after another run of the same query finds its data warm: measured up to 20 %)."""
    from hive_hooks.share import ScriptedShare, StaticShare
    from qoop_planner.model import Share

    full = Share(args.cluster_vcores, args.cluster_vcores * 2048.0)
    profile = volatile_profile(args.seed + n, (args.gap_min, args.gap_max), args.cluster_vcores)
    order = [MODES[(k + turn) % len(MODES)] for k in range(len(MODES))]
    bench.direct(sql)  # warm the query's data (a cold first run is up to 2x slower at sf 1)
    runs: dict[str, Any] = {}
    for mode in order:
        if mode == "direct":
            t, rows = bench.direct(sql)
        elif mode == "staged":
            runs[mode] = bench.staged(mode, sql, StaticShare(full))
        elif args.profile == "stages":
            driver = StageStartShare(args.seed + n, args.cluster_vcores)
            runs[mode] = bench.staged(mode, sql, driver.source, driver.hook)
        else:
            runs[mode] = bench.staged(mode, sql, ScriptedShare(profile))
    expected = canonical(rows)
    staged = runs["staged"]
    return {
        "query": n,
        "order": order,
        "direct_s": t,
        **{f"{m}_s": r.elapsed_s for m, r in runs.items()},
        "rows_equal": all(canonical(r.rows) == expected for r in runs.values()),
        "rows": len(expected),
        "passthrough": staged.passthrough,
        "checkpoints": sum(1 for x in staged.stages if x.outcome == "done" and x.kind != "final"),
        "planning_s": staged.planning_s,
        "stage_s": sum(x.seconds for x in staged.stages if x.outcome == "done"),
        "switches": len(runs["replanned"].switches),
        "switched_to": [x.to_plan.rsplit("/", 1)[-1] for x in runs["replanned"].switches],
        "start_plan": runs["start-only"].plan_id.rsplit("/", 1)[-1],
        "cancelled": sum(1 for x in runs["replanned"].stages if x.outcome == "cancelled"),
        "reused": len(runs["replanned"].reused),
        "share_changes": runs["replanned"].share_changes,
        "start_only_share_changes": runs["start-only"].share_changes,
    }


def combine(rounds: list[dict]) -> dict:
    """Median times over rounds; the other fields of the last round."""
    rec = dict(rounds[-1])
    for m in MODES:
        rec[f"{m}_s"] = statistics.median(r[f"{m}_s"] for r in rounds)
        rec[f"{m}_all_s"] = [r[f"{m}_s"] for r in rounds]
    rec["switches"] = statistics.fmean(r["switches"] for r in rounds)
    rec["rows_equal"] = all(r["rows_equal"] for r in rounds)
    rec["overhead"] = rec["staged_s"] / rec["direct_s"] - 1
    rec["speedup"] = rec["start-only_s"] / rec["replanned_s"]
    return rec


def plan_counts(queries: dict[int, str], schema: dict, stats: dict) -> dict[int, int]:
    from qoop_planner import enumerate_plans

    out = {}
    for n, sql in queries.items():
        try:
            out[n] = len(enumerate_plans(sql, schema, stats, k=8, query_id=f"q{n}"))
        except ValueError:
            out[n] = 1
    return out


def summarize(recs: list[dict]) -> dict:
    long = [r for r in recs if r["direct_s"] >= LONG_QUERY_S]
    multi = [r for r in recs if r["cached_plans"] >= 2]
    out: dict[str, Any] = {
        "queries": len(recs),
        "median_overhead": statistics.median(r["overhead"] for r in recs) if recs else None,
        "max_overhead": max((r["overhead"] for r in recs), default=None),
        "long_queries": [r["query"] for r in long],
        "median_overhead_long": statistics.median(r["overhead"] for r in long) if long else None,
        "max_overhead_long": max((r["overhead"] for r in long), default=None),
        "multi_plan_queries": [r["query"] for r in multi],
        "median_speedup": statistics.median(r["speedup"] for r in multi) if multi else None,
        "faster_share": (
            sum(1 for r in multi if r["speedup"] > 1.0) / len(multi) if multi else None
        ),
        "mean_switches": statistics.fmean(r["switches"] for r in multi) if multi else None,
        "switched_queries": [r["query"] for r in multi if r["switches"] > 0],
        "mean_share_changes": (
            statistics.fmean(r["share_changes"] for r in multi) if multi else None
        ),
        "rows_equal": all(r["rows_equal"] for r in recs),
    }
    if long:
        out["target_met"] = out["max_overhead_long"] < TARGET_OVERHEAD
    flat = [r["staged_s"] - r["direct_s"] for r in recs if r["checkpoints"] == 0]
    fixed = statistics.median(flat) if flat else 0.0
    per = [
        (r["staged_s"] - r["direct_s"] - fixed) / r["checkpoints"]
        for r in recs
        if r["checkpoints"] > 0
    ]
    out["fixed_overhead_s"] = fixed if flat else None
    out["overhead_per_checkpoint_s"] = statistics.median(per) if per else None
    return out


def table(recs: list[dict]) -> str:
    headers = ["query", "plans", "ckpts", "direct s", "staged s", "overhead", "replanned s",
               "switches", "start-only s", "speedup", "rows ok"]  # fmt: skip
    rows = [
        [
            f"Q{r['query']}", str(r["cached_plans"]), str(r["checkpoints"]), f"{r['direct_s']:.2f}",
            f"{r['staged_s']:.2f}", f"{100 * r['overhead']:+.0f} %", f"{r['replanned_s']:.2f}",
            f"{r['switches']:g}", f"{r['start-only_s']:.2f}", f"{r['speedup']:.2f}x",
            "yes" if r["rows_equal"] else "NO",
        ]
        for r in recs
    ]  # fmt: skip
    return format_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sf 0.01, queries 3, 5, 10")
    ap.add_argument("--scale", type=float, help="TPC-H scale factor (default 0.1; quick 0.01)")
    ap.add_argument("--queries", help="comma-separated TPC-H query numbers (default: all 22)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode, median (default 1)")
    ap.add_argument("--cluster-vcores", type=float, default=16.0, help="the full share")
    ap.add_argument(
        "--profile",
        choices=("stages", "timed"),
        default="stages",
        help="share changes at every stage start (default) or every U(gap) seconds",
    )
    ap.add_argument("--gap-min", type=float, default=1.0, help="timed: change gap, min s")
    ap.add_argument("--gap-max", type=float, default=4.0, help="timed: change gap, max s")
    ap.add_argument("--hysteresis", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--url", help="use this HiveServer2 (jdbc:hive2://...) instead of starting one")
    ap.add_argument("--skip-load", action="store_true", help="--url: TPC-H is already loaded")
    ap.add_argument("--database", default="tpch")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    scale = args.scale or (0.01 if args.quick else 0.1)
    from hive_hooks.engine import LocalHiveServer
    from hive_hooks.jdbc import parse_jdbc_url
    from hive_hooks.tpcload import load_tpc as load_into_hive
    from qoop_planner.tpc import load_tpc

    wall0 = time.perf_counter()
    loadavg_start = list(os.getloadavg())
    tpc = load_tpc("tpch", scale)
    wanted = (
        [int(x) for x in args.queries.split(",")]
        if args.queries
        else list(QUICK_QUERIES)
        if args.quick
        else sorted(tpc.queries)
    )
    stats = {f"{args.database}.{t}": s for t, s in tpc.stats.items()}
    counts = plan_counts({n: tpc.queries[n] for n in wanted}, tpc.schema, tpc.stats)

    with contextlib.ExitStack() as stack:
        if args.url:
            url = parse_jdbc_url(args.url)
            kw = url.pyhive_kwargs()
            kw["database"] = args.database

            def connect() -> Any:
                from pyhive import hive

                return hive.connect(**kw)

            base_connect = url.connect
        else:
            srv = stack.enter_context(LocalHiveServer())
            print(f"engine ready in {srv.start_seconds:.1f} s: {srv.jdbc_url}", file=sys.stderr)

            def connect() -> Any:
                return srv.connect(database=args.database)

            base_connect = srv.connect
        if not (args.url and args.skip_load):
            rep = load_into_hive(
                base_connect, "tpch", scale, args.database,
                data_dir=None if args.url else Path(srv.work_dir) / "data",
            )  # fmt: skip
            print(f"loaded TPC-H sf {scale:g} in {rep.seconds:.1f} s", file=sys.stderr)
        bench = Bench(connect, stats, args)
        for n in wanted:  # warm-up
            bench.direct(tpc.queries[n])
        rounds: dict[int, list[dict]] = {n: [] for n in wanted}
        try:
            for rep in range(args.repeat):
                bench.new_round()
                for k, n in enumerate(wanted):
                    t0 = time.perf_counter()
                    r = run_query(bench, n, tpc.queries[n], args, turn=k + rep)
                    rounds[n].append(r)
                    print(
                        f"[{rep + 1}/{args.repeat}] Q{n}: direct {r['direct_s']:.2f} s, staged "
                        f"{r['staged_s']:.2f} s, replanned {r['replanned_s']:.2f} s "
                        f"({r['switches']} switches), start-only {r['start-only_s']:.2f} s "
                        f"[{time.perf_counter() - t0:.0f} s]",
                        file=sys.stderr,
                    )
        finally:
            bench.close()
        recs = []
        for n in wanted:
            rec = combine(rounds[n])
            rec["cached_plans"] = counts[n]
            recs.append(rec)
    summary = summarize(recs)
    print(table(recs))
    if summary["median_overhead"] is not None:
        print(
            "stage-by-stage overhead (constant share): median "
            f"{100 * summary['median_overhead']:+.0f} %, max {100 * summary['max_overhead']:+.0f} %"
        )
    if summary["overhead_per_checkpoint_s"] is not None:
        fixed = summary["fixed_overhead_s"]
        head = f"fixed {fixed:.2f} s per query + " if fixed is not None else ""
        per = summary["overhead_per_checkpoint_s"]
        print(f"overhead split (medians): {head}{per:.2f} s per checkpoint stage")
    if summary["long_queries"]:
        print(
            f"queries over {LONG_QUERY_S:.0f} s direct ({len(summary['long_queries'])}): max "
            f"overhead {100 * summary['max_overhead_long']:+.0f} % (target < "
            f"{100 * TARGET_OVERHEAD:.0f} %: {'met' if summary['target_met'] else 'MISSED'})"
        )
    else:
        print(f"no query ran over {LONG_QUERY_S:.0f} s directly at sf {scale:g}")
    if summary["median_speedup"] is not None:
        print(
            f"replanned vs start-only ({len(summary['multi_plan_queries'])} queries with >= 2 "
            f"plans): median {summary['median_speedup']:.2f}x, faster in "
            f"{100 * summary['faster_share']:.0f} %, {summary['mean_switches']:.1f} switches/query "
            f"({len(summary['switched_queries'])} queries switched; "
            f"{summary['mean_share_changes']:.1f} share changes/query)"
        )
    out = args.out or RESULTS / ("hive_replan_quick.json" if args.quick else "hive_replan.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": platform.platform(),
        "scale": scale,
        "cluster_vcores": args.cluster_vcores,
        "profile": args.profile,
        "gap_s": [args.gap_min, args.gap_max] if args.profile == "timed" else None,
        "hysteresis": args.hysteresis,
        "repeat": args.repeat,
        "seed": args.seed,
        "wall_s": time.perf_counter() - wall0,
        "loadavg_start": loadavg_start,
        "loadavg_end": list(os.getloadavg()),
        **summary,
        "per_query": recs,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
