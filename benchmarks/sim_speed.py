"""Simulator speed: how long a replay takes, per policy, on the shipped traces.

Targets (this 2-core machine): a 160-job Pollux workload (``workload-6`` on ``nodes:16:4``)
in under 10 s per policy; the whole Philly trace (82,247 jobs; ``nodes:64:8``, 512 GPUs, i.e.
about 73 % of the GPU-time the trace asks for over its 109 days) under ``fifo`` and ``las`` in
under 10 minutes. ``themis`` runs a PA auction per scheduling event, so its full-Philly time
is reported on a one-day window (day 40, the busiest stretch: about 3,000 jobs) beside fifo and
las on the same jobs; ``--themis-full`` runs the whole trace too (hours).

Each row times load + isolated run + simulation separately, so the two baselines in one run
(``fifo`` vs ``las``) are measured under the same machine noise.

Usage: ``python benchmarks/sim_speed.py [--quick] [--themis-full] [--out PATH]``.
``--quick`` skips the full Philly rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from arbiter.cluster import load_cluster
from arbiter.sim.engine import isolated_run
from arbiter.sim.run import load_jobs, run_policy
from arbiter.tables import format_table

RESULTS = Path(__file__).resolve().parent / "results"
DAY = (40 * 86400.0, 41 * 86400.0)


def case(name, trace, cluster_spec, policies, target_s, **load) -> list[dict]:
    cluster = load_cluster(cluster_spec)
    t0 = time.perf_counter()
    jobs = load_jobs(trace, cluster=cluster, **load)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    iso = isolated_run(jobs, cluster)
    iso_s = time.perf_counter() - t0
    rows = []
    for policy in policies:
        t0 = time.perf_counter()
        run = run_policy(jobs, cluster, policy, isolated=iso)
        sim_s = time.perf_counter() - t0
        s = run.summary
        rows.append(
            {
                "case": name,
                "policy": policy,
                "jobs": len(jobs),
                "cluster": cluster_spec,
                "load_s": load_s,
                "isolated_s": iso_s,
                "simulate_s": sim_s,
                "decisions": s["decisions"],
                "avg_jct_s": s["avg_jct_s"],
                "target_s": target_s,
                "met": None if target_s is None else sim_s + load_s + iso_s <= target_s,
            }
        )
        print(f"  {name} {policy}: {sim_s:.1f} s", file=sys.stderr)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Pollux and the Philly day only")
    ap.add_argument("--themis-full", action="store_true", help="also themis on all of Philly")
    ap.add_argument("--out", type=Path, default=None, help="JSON path")
    args = ap.parse_args(argv)

    rows = case(
        "pollux workload-6 (160 jobs)",
        "pollux/workloads/workload-6.csv",
        "nodes:16:4",
        ["fifo", "las", "yarn-cs", "themis"],
        10.0,
    )
    rows += case(
        "philly day 40",
        "philly/philly.csv",
        "nodes:64:8",
        ["fifo", "las", "themis"],
        None,
        time_window=DAY,
    )
    if not args.quick:
        rows += case(
            "philly full (82,247 jobs)",
            "philly/philly.csv",
            "nodes:64:8",
            ["fifo", "las", *(["themis"] if args.themis_full else [])],
            600.0,
        )
    table = format_table(
        ["case", "policy", "jobs", "decisions", "load s", "isolated s", "simulate s", "target"],
        [
            [
                r["case"], r["policy"], str(r["jobs"]), str(r["decisions"]), f"{r['load_s']:.1f}",
                f"{r['isolated_s']:.1f}", f"{r['simulate_s']:.1f}",
                "-" if r["target_s"] is None
                else f"<= {r['target_s']:.0f} s: {'met' if r['met'] else 'MISSED'}",
            ]
            for r in rows
        ],
    )  # fmt: skip
    print(table)
    out = args.out or RESULTS / ("sim_speed_quick.json" if args.quick else "sim_speed.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": platform.platform(), "python": platform.python_version(), "rows": rows}
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
