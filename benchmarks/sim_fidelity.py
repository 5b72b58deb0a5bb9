"""Simulator fidelity: our policies on Gavel's published trace, beside Gavel's published results.

Replays ``gavel/max_min_fairness.trace`` (96 jobs: 59x1, 19x2, 18x4 GPUs) on ``gavel:4:4:4``
(4 v100 + 4 p100 + 4 k80, one GPU per server), 360 s rounds, with our ``fifo``, ``las`` and
``themis`` and the isolated run (:func:`arbiter.sim.engine.isolated_run`), and compares the
average JCT with the published Gavel simulator results on the same setup (seed 0): fifo 99,258 s;
LAS / max-min fairness 66,559 s; finish-time fairness 77,525 s; isolated 66,525 s. The goal is
ours / published within ±15 %; a larger gap must come from a documented model difference.

Two throughput models are run (``--throughputs``):

* ``measured`` (ours, the default): a gang spread over machines runs at Gavel's measured
  ``<type>_unconsolidated`` rate. On 1-GPU servers every 2- and 4-GPU job is spread, and those
  rates are 1.7x (v100) / 1.3-1.5x (p100) slower than consolidated on average (up to 4.3x).
* ``placement-blind`` (Gavel's simulator): the consolidated rate, wherever the GPUs are.
  Gavel's simulator looks throughputs up only under the plain worker-type names, so it never
  uses the unconsolidated readings.

Model differences that explain the remaining gaps (found by re-running Gavel's round mechanism
and switching its pieces one at a time; see ``MODEL_DIFFERENCES``):

* fifo: Gavel's FIFO is strict (the head of the queue blocks the jobs behind it), picks a GPU
  type at random, needs one type for a whole gang, and places jobs only when it recomputes its
  allocation (at most every 1,920 s). Ours backfills and picks the fastest GPUs. Under Gavel's
  throughputs that makes ours 0.64x; under ours the slower spread rates cancel it out (1.00x).
* las / isolated: Gavel runs both as an allocation (equal GPU share per job) carried out by its
  round mechanism. With 360 s rounds and the time history reset every 1,920 s, that mechanism
  gives 1-GPU jobs 92-98 % of the GPU time during the first 60,000 s and almost nothing to
  4-GPU jobs, which amounts to smallest gang first. With 60 s rounds it gives the equal shares
  it aims for, and its average JCT rises to ~90,000 s, which matches our LAS (87,466 s) and our
  processor-sharing isolated run (88,812 s) under the placement-blind model.
* themis: an auction over leases, not Gavel's finish-time-fairness optimisation program; it is
  compared with that row because both target ρ (finish-time fairness).

Usage: ``python benchmarks/sim_fidelity.py [--trace PATH] [--cluster SPEC] [--round-s S]
[--throughputs measured|placement-blind|both] [--out PATH]``. Prints one table per throughput
model and writes JSON (per policy: avg_jct_s, published_avg_jct_s, ratio, within_tolerance,
wall_s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from arbiter.cluster import load_cluster
from arbiter.datasets import data_root
from arbiter.policies import make_policy
from arbiter.sim.engine import isolated_run, simulate
from arbiter.sim.perf import SimJob, sim_jobs
from arbiter.tables import format_table
from arbiter.traces import read_trace

RESULTS = Path(__file__).resolve().parent / "results"
TOLERANCE = 0.15
DEFAULT_TRACE = "gavel/max_min_fairness.trace"
DEFAULT_CLUSTER = "gavel:4:4:4"

# Published Gavel simulator results on this trace and cluster (360 s rounds, seed 0).
PUBLISHED = {
    "fifo": ("fifo", 99_258.0),
    "fifo-strict": ("fifo", 99_258.0),
    "las": ("max_min_fairness (LAS)", 66_559.0),
    "themis": ("finish_time_fairness", 77_525.0),
    "isolated": ("isolated", 66_525.0),
}

MODEL_DIFFERENCES = {
    "fifo": (
        "Gavel's FIFO is strict (no backfill), picks a random GPU type, needs one type per gang "
        "and places jobs only when it recomputes its allocation (>= 1,920 s apart); ours "
        "backfills onto the fastest free GPUs. Switching ours to strict FIFO alone takes it from "
        "63,386 s to 94,661 s under the placement-blind throughputs."
    ),
    "fifo-strict": (
        "Our fifo without backfilling (Gavel's FIFO is strict); the remaining differences are "
        "Gavel's random GPU type per gang and its placements only at allocation recomputes."
    ),
    "las": (
        "Gavel's max_min_fairness is an equal-GPU-share allocation carried out by its round "
        "mechanism (priority = allocation / share of the time since the last reset, history "
        "reset at most every 1,920 s). With 360 s rounds that gives smallest gang first (1-GPU "
        "jobs get 92-98 % of the GPU time in the first 60,000 s). With 60 s rounds it gives "
        "equal shares and ~90,800 s, like our LAS, which equalises attained GPU time."
    ),
    "themis": (
        "Themis is an auction over leases; Gavel's finish_time_fairness is a min-max ρ convex "
        "program carried out by the same round mechanism as max_min_fairness. Same goal (ρ), "
        "different mechanism."
    ),
    "isolated": (
        "Ours is exact processor sharing (each job at rate × min(1, C/(N·g))), the policy-"
        "independent denominator of ρ; Gavel's is a policy run through its round mechanism, "
        "with the same bias towards small gangs as its LAS (~90,400 s with 60 s rounds)."
    ),
}


def placement_blind(jobs: list[SimJob]) -> list[SimJob]:
    """Gavel's simulator: the consolidated steps/s wherever the GPUs are."""
    return [replace(j, perf=replace(j.perf, placement_blind=True)) for j in jobs]


def mean(values) -> float:
    return statistics.fmean(values)


def run_model(jobs: list[SimJob], cluster, round_s: float, seed: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name in ("fifo", "fifo-strict", "las", "themis"):
        knobs = {"lease_s": round_s, "seed": seed} if name == "themis" else {}
        if name == "fifo-strict":
            knobs = {"backfill": False}
        t = time.perf_counter()
        policy = make_policy(name.removesuffix("-strict"), **knobs)
        res = simulate(jobs, cluster, policy, round_s=round_s)
        wall = time.perf_counter() - t
        unfinished = [j.job_id for j in res.jobs if j.jct_s is None]
        if unfinished:
            raise RuntimeError(f"{name}: {len(unfinished)} jobs did not finish")
        out[name] = {
            "avg_jct_s": mean(j.jct_s for j in res.jobs),
            "wall_s": wall,
            "by_gang": _by_gang({j.job_id: j.jct_s for j in res.jobs}, jobs),
        }
    t = time.perf_counter()
    iso = isolated_run(jobs, cluster)
    out["isolated"] = {
        "avg_jct_s": mean(iso.values()),
        "wall_s": time.perf_counter() - t,
        "by_gang": _by_gang(iso, jobs),
    }
    for name, rec in out.items():
        counterpart, published = PUBLISHED[name]
        ratio = rec["avg_jct_s"] / published
        rec.update(
            gavel_counterpart=counterpart,
            published_avg_jct_s=published,
            ratio=ratio,
            within_tolerance=abs(ratio - 1.0) <= TOLERANCE,
        )
    return out


def _by_gang(jct: dict[str, float], jobs: list[SimJob]) -> dict[str, float]:
    gangs = {j.job_id: j.gang for j in jobs}
    out: dict[str, list[float]] = {}
    for job_id, v in jct.items():
        out.setdefault(str(gangs[job_id]), []).append(v)
    return {g: round(mean(v), 1) for g, v in sorted(out.items(), key=lambda kv: int(kv[0]))}


def table(records: dict[str, dict]) -> str:
    rows = []
    for name, r in records.items():
        rows.append(
            [
                name,
                f"{r['avg_jct_s']:,.0f}",
                f"{r['published_avg_jct_s']:,.0f} ({r['gavel_counterpart']})",
                f"{r['ratio']:.2f}x",
                "yes" if r["within_tolerance"] else "no",
                f"{r['wall_s']:.1f}",
            ]
        )
    headers = ["policy", "ours avg JCT s", "published avg JCT s", "ours/published"]
    headers += [f"within ±{TOLERANCE:.0%}", "wall s"]
    return format_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--trace", type=Path, help=f"Gavel trace (default: <data root>/{DEFAULT_TRACE})"
    )
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, help="cluster spec or shorthand")
    parser.add_argument("--round-s", type=float, default=360.0, help="round length, seconds")
    parser.add_argument("--seed", type=int, default=0, help="policy seed (themis)")
    parser.add_argument(
        "--throughputs",
        choices=("measured", "placement-blind", "both"),
        default="both",
        help="throughput model: ours (unconsolidated when spread), Gavel's, or both",
    )
    parser.add_argument("--out", type=Path, help="JSON output path")
    args = parser.parse_args(argv)
    trace = args.trace or data_root() / DEFAULT_TRACE
    out = args.out or RESULTS / "sim_fidelity.json"

    cluster = load_cluster(args.cluster)
    measured = sim_jobs(read_trace(trace, "gavel"))
    models = {"measured": measured, "placement-blind": None}
    if args.throughputs != "both":
        models = {args.throughputs: models[args.throughputs]}

    results: dict[str, dict] = {}
    for model in models:
        jobs = measured if model == "measured" else placement_blind(measured)
        results[model] = run_model(jobs, cluster, args.round_s, args.seed)
        print(f"\n{trace.name} on {cluster.name}, {args.round_s:g} s rounds, throughputs: {model}")
        print(table(results[model]))

    primary = "measured" if "measured" in results else next(iter(results))
    # Every policy, in range or not: fifo's in-range result under our throughputs comes from
    # two differences that cancel out (see the module docstring).
    print("\nModel differences (ours vs Gavel's simulator):")
    for name in results[primary]:
        print(f"  {name}: {MODEL_DIFFERENCES[name]}")

    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "sim_fidelity",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "trace": trace.name,
        "jobs": len(measured),
        "cluster": args.cluster,
        "round_s": args.round_s,
        "seed": args.seed,
        "tolerance": TOLERANCE,
        "published_source": "Gavel simulator (stanford-futuredata/gavel), same trace and cluster",
        "throughput_models": {
            "measured": "Gavel's <type>_unconsolidated rate for gangs spread over machines",
            "placement-blind": "Gavel's consolidated rate wherever the GPUs are (its simulator)",
        },
        "primary": primary,
        "policies": results[primary],
        "by_throughput_model": results,
        "model_differences": MODEL_DIFFERENCES,
    }
    out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
