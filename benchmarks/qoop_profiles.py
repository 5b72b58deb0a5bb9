"""QOOP vs static plans under low / medium / high volatility share profiles (spec A.7).

The QOOP paper (T:654-669) cuts a resource profile into 10-minute regions, classes each region
by its largest resource rise or fall (< 10 % low, 10-20 % medium, > 20 % high), runs every
TPC-DS query in 10 random regions of each class with QOOP and with Clarinet (the best fixed plan
chosen with the share seen at query start) and reports the median improvement and the share of
queries that QOOP makes faster: spot profile 1.08x / 1.11x / 1.47x and 58 / 62 / 66 %; shared
cluster profile 1.08x / 1.11x / 1.20x and 56 / 58 / 60 %. This benchmark does the same in
simulation with the planner library (:mod:`qoop_planner`):

* **Profile** (the shared-cluster motivation, T:390-394): a cluster of ``--vcores`` containers
  (1 vcore and ``--mb-per-vcore`` MB each) shared "1-over-n" (:func:`arbiter.shares.fair_share`)
  by background jobs arriving Poisson (mean inter-arrival 20 s) and lasting an exponential time
  (mean 500 s), independent of the shares (an M/M/inf queue, about 25 jobs active). The tagged
  query's profile is ``C / (1 + n_active(t))``: it changes at every arrival and departure, every
  ~10 s. ``--hours`` (default 200) are generated (seeded, after an hour of warm-up) and cut into
  10-minute windows;
  a window's class is its largest ``|share(t) / share(window start) - 1|`` inside the window
  (< 10 % low, 10-20 % medium with both boundaries medium, > 20 % high). With ~25 jobs active
  the count drifts by ~6 jobs (~23 %) in 10 minutes, so low windows are very rare (1 in 200 h
  with seed 0: every low run replays that one window) and most windows are high.
* **Queries**: DuckDB's 99 TPC-DS texts (``tpcds_queries()``, transpiled to Hive with sqlglot),
  schema and statistics measured on a generated sf=0.01 database (as in
  ``tests/unit/test_qoop_plans.py``), ``enumerate_plans(k=8)``. To make queries last minutes under a
  ~23-vcore share, the statistics are scaled to ``--sf`` (default 500, the paper's scale): the
  fact tables plus customer and customer_address are multiplied by ``sf / 0.01`` (rows, and the
  NDV of columns with NDV > rows / 2, i.e. keys); the other dimension tables keep their sf=0.01
  size (most TPC-DS dimensions are fixed-size or grow slowly). Queries with one plan are
  skipped, and so are queries whose static plan would run longer than ``--max-query-h`` hours at
  the mean share (the cost model's estimate for q37 / q82 explodes to days).
* **Runs**: for every query and class, ``R`` windows drawn at random (seeded; 10, or 3 with
  ``--quick``); the query starts at the window start and the profile is replayed from there (past
  the window's end if the query outlives it). Three planners:

  - ``qoop``: :func:`qoop_planner.replan.decide` (``--hysteresis``, 0.15) at the start and every
    share change, switching plans with checkpoint reuse;
  - ``clarinet``: the plan ``decide`` picks at the start (best estimate under the start share),
    never switching (the spec's "upper bound of fixed-plan approaches");
  - ``volcano``: the plan of least ``total_cost`` (resource-agnostic), never switching.

  Between share changes the plan runs under :func:`qoop_planner.packing.advance`; the job ends
  when :func:`~qoop_planner.packing.estimate` under the current share finishes before the next
  change. JCT is the time from the window start to that end.

Assumption about revocation (spec A.7: a decrease "revokes containers immediately and fails the
tasks on them"): ``advance`` keeps finished tasks and finished stages (checkpoints) but does not
credit tasks in flight at the horizon; the estimator restarts them. So in this replay *every*
share change, up or down, restarts the tasks in flight (a pessimistic superset of the spec's
rule, which only fails the revoked ones), for all three planners alike. Tasks last ~0.5-20 s
(median ~5 s) and shares change every ~10 s, so this costs every planner a sizeable slowdown
(reported as ``slowdown_vs_constant``: JCT / the estimate under the constant start share);
QOOP's switches add the work the switch discards (``backtrack_depth``). On a switch, running
stages the new plan shares are not credited either (``advance`` credits task-level progress only
within the current plan).

Reported per class: the median over runs of JCT_clarinet / JCT_qoop and the share of runs where
QOOP is strictly faster, the same per query (mean JCT over its R windows, as the paper), the
same against volcano, switches per run (mean, max) and the distribution of each run's largest
backtrack depth.

Usage: ``python benchmarks/qoop_profiles.py [--quick] [--runs R] [--sf SF] [--hours H]
[--seed S] [--out PATH]``. Prints a table and writes JSON (``results/qoop_profiles.json``;
``results/qoop_profiles_quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import platform
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from arbiter.shares import Resources as ClusterResources
from arbiter.shares import fair_share
from arbiter.tables import format_table
from qoop_planner.cost import TableStats
from qoop_planner.model import Plan, Progress, Share
from qoop_planner.packing import advance, estimate
from qoop_planner.replan import decide
from qoop_planner.sqlplan import enumerate_plans
from qoop_planner.tpc import load_tpc

RESULTS = Path(__file__).resolve().parent / "results"
WINDOW_S = 600.0
CLASSES = ("low", "medium", "high")
PLANNERS = ("qoop", "clarinet", "volcano")
HYSTERESIS = 0.15
# spec A.7 (T:661, T:669): median improvement and share of queries faster, low/medium/high
PAPER_SPOT = {"low": (1.08, 0.58), "medium": (1.11, 0.62), "high": (1.47, 0.66)}
PAPER_CLUSTER = {"low": (1.08, 0.56), "medium": (1.11, 0.58), "high": (1.20, 0.60)}
SCALED_TABLES = frozenset(
    {
        "store_sales",
        "store_returns",
        "catalog_sales",
        "catalog_returns",
        "web_sales",
        "web_returns",
        "inventory",
        "customer",
        "customer_address",
    }
)


# --------------------------------------------------------------------------------------------
# The share profile


def shared_cluster_profile(
    hours: float, vcores: float, mb_per_vcore: float, seed: int
) -> tuple[list[float], list[Share]]:
    """Change times (s, from 0) and the tagged query's share from each time on."""
    rng = random.Random(seed)
    capacity = ClusterResources(vcores=vcores, memory_mb=vcores * mb_per_vcore)
    warmup = 3600.0
    end = hours * 3600.0
    events: list[tuple[float, int]] = []  # (time, +1 arrival / -1 departure)
    t = -warmup
    while t < end:
        t += rng.expovariate(1 / 20.0)
        events.append((t, 1))
        events.append((t + rng.expovariate(1 / 500.0), -1))
    events.sort()
    n = 0
    times: list[float] = []
    shares: list[Share] = []
    for t, d in events:
        if t >= end:
            break
        if t >= 0 and not times:  # the share at time 0
            fs = fair_share(capacity, 1 + n)
            times.append(0.0)
            shares.append(Share(fs.vcores, fs.memory_mb))
        n += d
        if t < 0:
            continue
        fs = fair_share(capacity, 1 + n)  # the background jobs plus the tagged query
        s = Share(fs.vcores, fs.memory_mb)
        if s != shares[-1]:
            times.append(t)
            shares.append(s)
    return times, shares


def classify_windows(times: list[float], shares: list[Share], hours: float) -> dict[str, list]:
    """Window start times by class (largest relative change from the window's start share)."""
    out: dict[str, list[float]] = {c: [] for c in CLASSES}
    for w in range(int(hours * 3600 // WINDOW_S)):
        start, end = w * WINDOW_S, (w + 1) * WINDOW_S
        i = bisect.bisect_right(times, start) - 1
        s0 = shares[i].vcores
        change = 0.0
        j = i
        while j < len(times) and (j == i or times[j] < end):
            change = max(change, abs(shares[j].vcores / s0 - 1))
            j += 1
        c = "low" if change < 0.10 - 1e-12 else "high" if change > 0.20 + 1e-12 else "medium"
        out[c].append(start)
    return out


# --------------------------------------------------------------------------------------------
# Queries and plans


def tpcds_plans(sf: float, k: int = 8) -> tuple[dict[int, list[Plan]], float]:
    """Plans of the TPC-DS queries with statistics scaled from sf=0.01 to ``sf``."""
    data = load_tpc("tpcds", 0.01)
    factor = sf / 0.01
    stats = {}
    for t, st in data.stats.items():
        rows, ndv = st.rows, dict(st.ndv)
        if t in SCALED_TABLES:
            ndv = {c: v * factor if v > rows / 2 else v for c, v in ndv.items()}
            rows *= factor
        stats[t] = TableStats(rows=rows, ndv=ndv)
    return {
        n: enumerate_plans(q, data.schema, stats, k=k, query_id=f"tpcds{n}")
        for n, q in data.queries.items()
    }, factor


# --------------------------------------------------------------------------------------------
# Replay


def replay(
    plans: list[Plan],
    planner: str,
    times: list[float],
    shares: list[Share],
    start: float,
    hysteresis: float = HYSTERESIS,
) -> dict:
    """Run one query from ``start`` under the profile; JCT, switches, backtrack depths."""
    i = bisect.bisect_right(times, start) - 1
    t = start
    progress = Progress()
    share = shares[i]
    if planner == "volcano":
        plan = min(plans, key=lambda p: (p.total_cost, p.plan_id))
    else:
        plan = decide(plans, progress, share, hysteresis=math.inf, current_plan_id=None).plan
    const = estimate(plan, progress, share).finish_s
    switches = 0
    depths: list[int] = []
    first = True
    while True:
        share = shares[i]
        if planner == "qoop" and not first:
            d = decide(plans, progress, share, hysteresis=hysteresis, current_plan_id=plan.plan_id)
            if d.switch:
                switches += 1
                depths.append(d.backtrack_depth)
                plan = d.plan
        first = False
        t_next = times[i + 1] if i + 1 < len(times) else math.inf
        left = estimate(plan, progress, share).finish_s
        if t + left <= t_next:
            jct = t + left - start
            break
        if math.isinf(t_next):  # the profile ended and the plan cannot finish: give up
            jct = math.inf
            break
        progress = advance(plan, progress, share, t_next - t)
        t = t_next
        i += 1
    return {"jct_s": jct, "const_s": const, "switches": switches, "depths": depths}


# --------------------------------------------------------------------------------------------
# Report


def _summary(pairs: list[tuple[float, float]]) -> dict:
    """pairs of (baseline JCT, qoop JCT): median / p10 / p90 speedup, share strictly faster."""
    sp = sorted(b / q for b, q in pairs)
    n = len(sp)
    return {
        "n": n,
        "median_speedup": statistics.median(sp) if sp else None,
        "p10_speedup": sp[int(0.1 * (n - 1))] if sp else None,
        "p90_speedup": sp[int(0.9 * (n - 1))] if sp else None,
        "share_faster": sum(q < b * (1 - 1e-9) for b, q in pairs) / n if n else None,
        "share_slower": sum(q > b * (1 + 1e-9) for b, q in pairs) / n if n else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 windows per query and class")
    ap.add_argument("--runs", type=int, help="windows per query and class (default 10, quick 3)")
    ap.add_argument("--sf", type=float, default=500.0, help="statistics scale (default 500)")
    ap.add_argument("--hours", type=float, default=200.0, help="profile length (default 200)")
    ap.add_argument("--vcores", type=float, default=600.0)
    ap.add_argument("--mb-per-vcore", type=float, default=4096.0)
    ap.add_argument("--max-query-h", type=float, default=4.0)
    ap.add_argument("--hysteresis", type=float, default=HYSTERESIS, help="QOOP's (default 0.15)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 10)
    wall0 = time.perf_counter()

    # the profile gets a tail of extra hours so that queries started late can finish
    tail_h = args.max_query_h + 1
    times, shares = shared_cluster_profile(
        args.hours + tail_h, args.vcores, args.mb_per_vcore, args.seed
    )
    windows = classify_windows(times, shares, args.hours)
    mean_share = statistics.fmean(s.vcores for s in shares)
    print(
        f"profile: {len(times)} share changes in {args.hours + tail_h:.0f} h, mean share "
        f"{mean_share:.1f} vcores; windows low/medium/high "
        + "/".join(str(len(windows[c])) for c in CLASSES),
        file=sys.stderr,
    )

    t0 = time.perf_counter()
    all_plans, factor = tpcds_plans(args.sf)
    typical = Share(mean_share, mean_share * args.mb_per_vcore)
    queries: dict[int, list[Plan]] = {}
    skipped: dict[str, list[int]] = {"single_plan": [], "too_long": []}
    for n, plans in sorted(all_plans.items()):
        if len(plans) < 2:
            skipped["single_plan"].append(n)
            continue
        p0 = decide(plans, Progress(), typical, current_plan_id=None).plan
        if estimate(p0, Progress(), typical).finish_s > args.max_query_h * 3600:
            skipped["too_long"].append(n)
            continue
        queries[n] = plans
    print(
        f"{len(queries)} TPC-DS queries with >= 2 plans at sf={args.sf:g} "
        f"({time.perf_counter() - t0:.1f} s); skipped: {len(skipped['single_plan'])} "
        f"single-plan, too long {skipped['too_long']}",
        file=sys.stderr,
    )

    rng = random.Random(args.seed + 1)
    per_class: dict[str, dict] = {}
    for c in CLASSES:
        tc = time.perf_counter()
        rs: list[dict] = []
        by_query: dict[int, list[dict]] = {}
        for n, plans in queries.items():
            pool = windows[c]
            if not pool:
                continue
            starts = rng.sample(pool, runs) if len(pool) >= runs else rng.choices(pool, k=runs)
            for s in starts:
                r = {p: replay(plans, p, times, shares, s, args.hysteresis) for p in PLANNERS}
                r["query"] = n
                r["start_s"] = s
                rs.append(r)
                by_query.setdefault(n, []).append(r)
        finite = [r for r in rs if all(math.isfinite(r[p]["jct_s"]) for p in PLANNERS)]
        qpairs = {
            b: [
                (
                    statistics.fmean(r[b]["jct_s"] for r in v),
                    statistics.fmean(r["qoop"]["jct_s"] for r in v),
                )
                for v in by_query.values()
                if all(math.isfinite(r[p]["jct_s"]) for r in v for p in PLANNERS)
            ]
            for b in ("clarinet", "volcano")
        }
        sw = [r["qoop"]["switches"] for r in rs]
        max_depth = Counter(max(r["qoop"]["depths"], default=0) for r in rs)
        all_depths = Counter(d for r in rs for d in r["qoop"]["depths"])
        per_class[c] = {
            "windows_available": len(windows[c]),
            "runs": len(rs),
            "runs_unfinished": len(rs) - len(finite),
            "queries": len(by_query),
            "vs_clarinet": _summary([(r["clarinet"]["jct_s"], r["qoop"]["jct_s"]) for r in finite]),
            "vs_volcano": _summary([(r["volcano"]["jct_s"], r["qoop"]["jct_s"]) for r in finite]),
            "per_query_vs_clarinet": _summary(qpairs["clarinet"]),
            "per_query_vs_volcano": _summary(qpairs["volcano"]),
            "switches_mean": statistics.fmean(sw) if sw else 0.0,
            "switches_max": max(sw, default=0),
            "runs_with_switch": sum(s > 0 for s in sw) / len(sw) if sw else 0.0,
            "run_max_backtrack_depth": {str(k): v / len(rs) for k, v in sorted(max_depth.items())},
            "switch_backtrack_depth": {str(k): v for k, v in sorted(all_depths.items())},
            "median_jct_s": {
                p: statistics.median(r[p]["jct_s"] for r in finite) if finite else None
                for p in PLANNERS
            },
            "median_slowdown_vs_constant": {
                p: statistics.median(r[p]["jct_s"] / r[p]["const_s"] for r in finite)
                if finite
                else None
                for p in PLANNERS
            },
            "wall_s": time.perf_counter() - tc,
            "runs_detail": [
                {
                    "query": r["query"],
                    "start_s": r["start_s"],
                    **{f"{p}_jct_s": r[p]["jct_s"] for p in PLANNERS},
                    "switches": r["qoop"]["switches"],
                    "depths": r["qoop"]["depths"],
                }
                for r in rs
            ],
        }
        # the keys the brief asks for at the top of each class
        per_class[c]["median_speedup"] = per_class[c]["vs_clarinet"]["median_speedup"]
        per_class[c]["share_faster"] = per_class[c]["vs_clarinet"]["share_faster"]
        print(f"  {c}: {len(rs)} runs, {per_class[c]['wall_s']:.1f} s", file=sys.stderr)

    def f2(v: float | None, fmt: str = ".2f") -> str:
        return "-" if v is None else format(v, fmt)

    rows = []
    for c in CLASSES:
        pc = per_class[c]
        vc, vv, qc = pc["vs_clarinet"], pc["vs_volcano"], pc["per_query_vs_clarinet"]
        ps, pcl = PAPER_SPOT[c], PAPER_CLUSTER[c]
        rows.append(
            [
                c,
                str(pc["runs"]),
                f"{f2(vc['median_speedup'])}x / {f2(vc['share_faster'], '.0%')}",
                f"{f2(qc['median_speedup'])}x / {f2(qc['share_faster'], '.0%')}",
                f"{ps[0]:.2f}x / {ps[1]:.0%}",
                f"{pcl[0]:.2f}x / {pcl[1]:.0%}",
                f"{f2(vv['median_speedup'])}x / {f2(vv['share_faster'], '.0%')}",
                f"{f2(vc['p90_speedup'])}x",
                f"{pc['switches_mean']:.2f} / {pc['switches_max']}",
                " ".join(f"{k}:{v:.0%}" for k, v in pc["run_max_backtrack_depth"].items()),
                f"{f2(pc['median_slowdown_vs_constant']['clarinet'])}",
            ]
        )
    print(
        format_table(
            ["class", "runs", "vs clarinet (runs)", "vs clarinet (queries)", "paper spot",
             "paper cluster", "vs volcano (runs)", "p90 vs clar.", "switches mean/max",
             "run max backtrack depth", "clarinet JCT/const"],
            rows,
        )
    )  # fmt: skip
    print(
        "speedup = JCT_baseline / JCT_qoop (median), % = share of runs (queries: mean JCT over "
        "its windows) QOOP makes strictly faster; paper: spec A.7 (T:661, T:669)"
    )

    out = args.out or RESULTS / ("qoop_profiles_quick.json" if args.quick else "qoop_profiles.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": platform.platform(),
        "parameters": {
            "quick": args.quick,
            "runs_per_query_and_class": runs,
            "sf": args.sf,
            "stats_scale_factor": factor,
            "scaled_tables": sorted(SCALED_TABLES),
            "hours": args.hours,
            "profile_tail_h": tail_h,
            "vcores": args.vcores,
            "mb_per_vcore": args.mb_per_vcore,
            "mean_interarrival_s": 20.0,
            "mean_job_s": 500.0,
            "window_s": WINDOW_S,
            "hysteresis": args.hysteresis,
            "k_plans": 8,
            "max_query_h": args.max_query_h,
            "seed": args.seed,
            "revocation": "every share change restarts tasks in flight (packing.advance)",
        },
        "profile": {
            "share_changes": len(times),
            "mean_share_vcores": mean_share,
            "windows": {c: len(windows[c]) for c in CLASSES},
        },
        "queries": sorted(queries),
        "skipped": skipped,
        "paper_spot": {c: dict(zip(("median_speedup", "share_faster"), v, strict=True))
                       for c, v in PAPER_SPOT.items()},
        "paper_cluster": {c: dict(zip(("median_speedup", "share_faster"), v, strict=True))
                          for c, v in PAPER_CLUSTER.items()},
        "classes": per_class,
        "wall_s": time.perf_counter() - wall0,
    }  # fmt: skip
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} ({doc['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
