"""Simulator speed: how long a replay takes, per policy, on the shipped traces.

Targets (this 2-core machine): a 160-job Pollux workload (``workload-6`` on ``nodes:16:4``)
in under 10 s per policy; the whole Philly trace (82,247 jobs; ``nodes:64:8``, 512 GPUs, i.e.
about 73 % of the GPU-time the trace asks for over its 109 days) under ``fifo`` and ``las`` in
under 10 minutes. ``themis`` runs a PA auction per scheduling event, so its full-Philly time
is reported on a one-day window (day 40, the busiest stretch: about 3,000 jobs) beside fifo and
las on the same jobs; ``--themis-full`` runs the whole trace too (hours).

Each row times load + isolated run + simulation separately, so the two baselines in one run
(``fifo`` vs ``las``) are measured under the same machine noise. ``simulate s`` is wall time;
``cpu s`` is the process's CPU time for the same step (the simulator is single-threaded, so on
an idle machine the two agree; on a shared one the CPU time is the stable number).

**Before / after in one run.** ``--baseline REV`` (default ``e0a4189``, the commit before the
themis speed work) exports ``arbiter/`` of that revision with ``git archive`` into a temporary
directory and replays Philly day 40 under themis with it in a subprocess, beside the current
code's row, and checks that both give the same decisions and the same per-job start and finish
times (the speed work must not change results; ``tests/unit/test_themis_replay_reference.py``
pins smaller replays). ``--baseline none`` skips it; ``--quick`` skips it too.

**Whole Philly under themis.** ``--themis-full`` runs it to the end; ``--themis-full-budget S``
stops it after S seconds of simulation and reports how far it got (simulated day, decisions,
jobs finished) and the CPU seconds per decision, the measured reason when it cannot finish in
the target.

**Batched themis** (opt-in; ``arbiter.sim.engine`` module docstring): ``--batch-s S`` runs the
whole-Philly themis replay with Themis's batch window ``batch_s = S`` (every event within S
seconds of the first is decided together, at the window's end; 0 = exact).
``--themis-full-only`` runs only that replay (to the end, or ``--themis-full-budget``), with a
progress line (simulated day, jobs arrived, active jobs, decisions, wall and CPU seconds, load
average) every 30 s to ``--progress-log``, the load averages seen, the summary metrics of a
finished run, then Philly day 40 exact beside the same window; it writes
``results/philly_themis_full.json``. ``--batch-compare S1,S2`` replays only day 40, exact and
with each window, and writes ``results/philly_themis_batch_day40.json``: what batching costs.

Usage: ``python benchmarks/sim_speed.py [--quick] [--baseline REV|none] [--themis-full |
--themis-full-budget S] [--batch-s S] [--themis-full-only] [--progress-log PATH]
[--batch-compare S1,S2] [--out PATH]``. ``--quick`` skips the full Philly rows.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from arbiter.cluster import load_cluster
from arbiter.policies import make_policy
from arbiter.sim.engine import isolated_run, simulate
from arbiter.sim.metrics import attach_isolated, summarize
from arbiter.sim.run import app_denominator, load_jobs, run_policy
from arbiter.tables import format_table

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
DAY = (40 * 86400.0, 41 * 86400.0)
BASELINE_REV = "e0a4189"  # the commit before the themis speed work

# Run in a subprocess against another revision's arbiter/ (first on sys.path): Philly day 40
# under themis, timed like case(), printed as one JSON line.
_BASELINE_SCRIPT = """
import hashlib, json, sys, time
from arbiter.cluster import load_cluster
from arbiter.sim.engine import isolated_run
from arbiter.sim.metrics import attach_isolated, summarize
from arbiter.sim.run import app_denominator, load_jobs, run_policy
cluster = load_cluster("nodes:64:8")
jobs = load_jobs("philly/philly.csv", cluster=cluster, time_window=(40 * 86400.0, 41 * 86400.0))
iso = isolated_run(jobs, cluster)
t0, c0 = time.perf_counter(), time.process_time()
run = run_policy(jobs, cluster, "themis", isolated=iso)
sim_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
rows = sorted((j.job_id, j.start_s, j.finish_s, j.preemptions) for j in run.result.jobs)
print(json.dumps({"simulate_s": sim_s, "simulate_cpu_s": cpu_s, "jobs": len(jobs),
                  "decisions": run.summary["decisions"], "avg_jct_s": run.summary["avg_jct_s"],
                  "digest": hashlib.sha256(repr(rows).encode()).hexdigest()}))
"""


def _commit() -> str | None:
    """The checked-out commit (``+dirty`` with local changes), for the record."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "arbiter"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev + ("+dirty" if dirty else "")  # fmt: skip


def _digest(result) -> str:
    rows = sorted((j.job_id, j.start_s, j.finish_s, j.preemptions) for j in result.jobs)
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def baseline_day40(rev: str) -> dict:
    """Philly day 40 under themis with ``arbiter/`` of git revision ``rev`` (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="sim-speed-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev, "arbiter"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tmp}
        out = subprocess.run(
            [sys.executable, "-c", _BASELINE_SCRIPT], cwd=tmp, env=env, check=True,
            capture_output=True, text=True,
        ).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


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
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_policy(jobs, cluster, policy, isolated=iso)
        sim_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        s = run.summary
        rows.append(
            {
                "case": name,
                "policy": policy,
                "code": "current",
                "jobs": len(jobs),
                "cluster": cluster_spec,
                "load_s": load_s,
                "isolated_s": iso_s,
                "simulate_s": sim_s,
                "simulate_cpu_s": cpu_s,
                "decisions": s["decisions"],
                "avg_jct_s": s["avg_jct_s"],
                "digest": _digest(run.result),
                "target_s": target_s,
                "met": None if target_s is None else sim_s + load_s + iso_s <= target_s,
            }
        )
        print(f"  {name} {policy}: {sim_s:.1f} s ({cpu_s:.1f} s CPU)", file=sys.stderr)
    return rows


class _Budget(Exception):
    pass


def themis_full_budget(
    budget_s: float | None, batch_s: float = 0.0, log: Path | None = None
) -> dict:
    """Whole Philly under themis, to the end or stopped after ``budget_s`` seconds of
    simulation: how far it got (module docstring). ``batch_s`` is Themis's batch window (0 =
    exact). Every 30 s of wall time a progress line (simulated day, jobs arrived and finished,
    decisions, wall and CPU seconds, load average) goes to ``log`` (and stderr); the load
    averages seen are summarised in the row. A finished run also gets the summary metrics."""
    cluster = load_cluster("nodes:64:8")
    t0 = time.perf_counter()
    jobs = load_jobs("philly/philly.csv", cluster=cluster)
    load_s = time.perf_counter() - t0
    policy = make_policy("themis", seed=0, batch_s=batch_s)
    seen = {"decisions": 0, "now": 0.0, "active": 0}
    loads: list[float] = []
    arrivals = sorted(j.arrival_s for j in jobs)
    fh = open(log, "w") if log is not None else None  # noqa: SIM115 - closed below
    t0, c0 = time.perf_counter(), time.process_time()
    next_report = t0

    def report(now: float, wall: float) -> None:
        import bisect

        load1 = os.getloadavg()[0]
        loads.append(load1)
        line = (f"wall {wall - t0:7.0f} s  cpu {time.process_time() - c0:7.0f} s  "
                f"day {now / 86400.0:6.2f}  arrived {bisect.bisect_right(arrivals, now):6d}  "
                f"active {seen['active']:5d}  decisions {seen['decisions']:8d}  "
                f"load {load1:.2f}")  # fmt: skip
        print(line, file=sys.stderr, flush=True)
        if fh is not None:
            fh.write(line + "\n")
            fh.flush()

    def watch(snapshot, _decision) -> None:
        nonlocal next_report
        seen.update(decisions=seen["decisions"] + 1, now=snapshot.now, active=len(snapshot.jobs))
        if seen["decisions"] % 64 == 0:
            wall = time.perf_counter()
            if wall >= next_report:
                report(snapshot.now, wall)
                next_report = wall + 30.0
            if budget_s is not None and wall - t0 > budget_s:
                raise _Budget

    result = None
    with contextlib.suppress(_Budget):
        result = simulate(jobs, cluster, policy, on_decision=watch)
    sim_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    report(seen["now"], time.perf_counter())
    if fh is not None:
        fh.close()
    row = {
        "case": "philly full (82,247 jobs)" + ("" if budget_s is None else ", time budget"),
        "policy": "themis",
        "code": "current" if not batch_s else f"current, batch_s={batch_s:g}",
        "batch_s": batch_s,
        "jobs": len(jobs),
        "cluster": "nodes:64:8",
        "load_s": load_s,
        "isolated_s": 0.0,
        "simulate_s": sim_s,
        "simulate_cpu_s": cpu_s,
        "decisions": seen["decisions"],
        "finished": result is not None,
        "reached_day": seen["now"] / 86400.0,
        "last_day": max(j.arrival_s for j in jobs) / 86400.0,
        "jobs_arrived": sum(j.arrival_s <= seen["now"] for j in jobs),
        "active_at_stop": seen["active"],
        "cpu_ms_per_decision": 1e3 * cpu_s / max(1, seen["decisions"]),
        "load_average_during": {
            "min": min(loads),
            "mean": sum(loads) / len(loads),
            "max": max(loads),
            "samples": len(loads),
        },
        "target_s": 600.0,
        "met": result is not None and sim_s + load_s <= 600.0,
    }
    if result is not None:
        t1 = time.perf_counter()
        iso = isolated_run(jobs, cluster)
        row["isolated_s"] = time.perf_counter() - t1
        attach_isolated(result, iso, app_denominator(jobs, cluster, iso))
        summary = summarize(result)
        row["avg_jct_s"] = summary["avg_jct_s"]
        row["digest"] = _digest(result)
        row["summary"] = summary
    return row


def batch_cost_day40(
    windows: list[float], spec: str = "nodes:64:8", max_jobs: int | None = None
) -> list[dict]:
    """Philly day 40 (its first ``max_jobs`` jobs) on ``spec`` under themis, exact and with each
    batch window in ``windows``: what batching changes (the decisions, the time, and the
    summary metrics), one run after the other on the same jobs."""
    cluster = load_cluster(spec)
    jobs = load_jobs("philly/philly.csv", cluster=cluster, time_window=DAY, max_jobs=max_jobs)
    iso = isolated_run(jobs, cluster)
    rows = []
    for b in (0.0, *windows):
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_policy(jobs, cluster, "themis", isolated=iso, batch_s=b)
        sim_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
        s = run.summary
        rows.append({"case": "philly day 40", "cluster": spec, "policy": "themis", "batch_s": b,
                     "jobs": len(jobs), "simulate_s": sim_s, "simulate_cpu_s": cpu_s,
                     "decisions": s["decisions"], "digest": _digest(run.result),
                     **{k: s[k] for k in _COMPARED}})  # fmt: skip
        print(f"  day 40 themis batch_s={b:g}: {sim_s:.1f} s ({cpu_s:.1f} s CPU), "
              f"{s['decisions']} decisions", file=sys.stderr)  # fmt: skip
    return rows


def _batch_table(rows: list[dict]) -> str:
    return format_table(["batch_s", "decisions", "cpu s", *_COMPARED], [
        [f"{r['batch_s']:g}", str(r["decisions"]), f"{r['simulate_cpu_s']:.1f}",
         *(f"{r[k]:.4g}" for k in _COMPARED)] for r in rows
    ])  # fmt: skip


_COMPARED = ("avg_jct_s", "p99_jct_s", "avg_queueing_s", "avg_rho", "p99_rho", "max_rho",
             "utilization", "placement_score", "preemptions", "makespan_s")  # fmt: skip


def full_only(args) -> int:
    """``--themis-full-only``: the whole-Philly themis row, then day 40 exact vs batched;
    written to ``philly_themis_full.json`` after each step."""
    out = args.out or RESULTS / "philly_themis_full.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc: dict = {"machine": platform.platform(), "python": platform.python_version(),
                 "cpus": os.cpu_count(), "command": " ".join(sys.argv),
                 "commit": _commit()}  # fmt: skip
    row = themis_full_budget(args.themis_full_budget, args.batch_s, args.progress_log)
    doc.update(load_average_at_end=os.getloadavg(), full=row)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"themis, all of Philly (batch_s={args.batch_s:g}): "
          f"{'finished' if row['finished'] else 'stopped'} after {row['simulate_s']:.0f} s "
          f"({row['simulate_cpu_s']:.0f} s CPU) at day {row['reached_day']:.1f}, "
          f"{row['decisions']} decisions; load average "
          f"{row['load_average_during']['mean']:.2f}")  # fmt: skip
    if row["finished"]:
        s = row["summary"]
        print("  " + ", ".join(f"{k} {s[k]:.4g}" for k in _COMPARED))
    if args.batch_s and not args.quick and row["finished"]:
        doc["day40_exact_vs_batched"] = batch_cost_day40([args.batch_s])
        print(_batch_table(doc["day40_exact_vs_batched"]))
        out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _windows(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not S1,S2,... seconds") from None
    if not out or any(not (x > 0) for x in out):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive windows in seconds")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Pollux and the Philly day only")
    ap.add_argument("--themis-full", action="store_true", help="also themis on all of Philly")
    ap.add_argument(
        "--themis-full-budget",
        type=float,
        default=None,
        metavar="S",
        help="themis on all of Philly, stopped after S seconds: how far it got",
    )
    ap.add_argument("--baseline", default=BASELINE_REV, metavar="REV",
                    help=f"git revision for the day-40 themis before/after (default {BASELINE_REV}"
                         "; 'none' skips it)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help="JSON path")
    ap.add_argument(
        "--batch-s",
        type=float,
        default=0.0,
        metavar="S",
        help="Themis batch window for the whole-Philly themis run (0 = exact)",
    )
    ap.add_argument(
        "--themis-full-only",
        action="store_true",
        help="only whole-Philly themis (to the end, or --themis-full-budget), then "
        "day 40 exact vs --batch-s; writes philly_themis_full.json",
    )
    ap.add_argument("--progress-log", type=Path, default=None, metavar="PATH",
                    help="progress lines of the whole-Philly themis run")  # fmt: skip
    ap.add_argument("--batch-compare", type=_windows, default=None, metavar="S1,S2",
                    help="only Philly day 40 under themis, exact and with each batch window; "
                         "writes philly_themis_batch_day40.json")  # fmt: skip
    ap.add_argument(
        "--batch-compare-cluster",
        default="nodes:64:8",
        metavar="SPEC",
        help="cluster of --batch-compare (default nodes:64:8; a smaller one is contended)",
    )
    ap.add_argument("--batch-compare-max-jobs", type=int, default=None, metavar="N",
                    help="only the first N jobs of day 40 for --batch-compare")  # fmt: skip
    args = ap.parse_args(argv)
    if args.batch_compare is not None:
        spec, n = args.batch_compare_cluster, args.batch_compare_max_jobs
        rows = batch_cost_day40(args.batch_compare, spec, n)
        print(_batch_table(rows))
        name = "philly_themis_batch_day40" + (
            "" if (spec, n) == ("nodes:64:8", None) else f"_{spec.replace(':', '-')}_{n or 'all'}"
        )
        out = args.out or RESULTS / f"{name}.json"
        doc = {"machine": platform.platform(), "python": platform.python_version(),
               "command": " ".join(sys.argv), "load_average_at_end": os.getloadavg(),
               "rows": rows}  # fmt: skip
        out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {out}", file=sys.stderr)
        return 0
    if args.themis_full_only:
        return full_only(args)

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
    ratio = None
    if not args.quick and args.baseline != "none":
        base = baseline_day40(args.baseline)
        ours = next(r for r in rows if r["case"] == "philly day 40" and r["policy"] == "themis")
        same = (base["decisions"], base["digest"]) == (ours["decisions"], ours["digest"])
        rows.append(
            {
                "case": "philly day 40",
                "policy": "themis",
                "code": f"baseline {args.baseline}",
                "cluster": "nodes:64:8",
                "load_s": ours["load_s"],
                "isolated_s": ours["isolated_s"],
                **base,
                "target_s": None,
                "met": None,
                "same_results": same,
            }
        )
        ratio = {
            "wall": base["simulate_s"] / ours["simulate_s"],
            "cpu": base["simulate_cpu_s"] / ours["simulate_cpu_s"],
            "same_results": same,
        }
        print(f"  day 40 themis, {args.baseline} -> current: {ratio['wall']:.1f}x wall, "
              f"{ratio['cpu']:.1f}x CPU, same results: {same}", file=sys.stderr)  # fmt: skip
        if not same:
            print("  RESULTS DIFFER from the baseline", file=sys.stderr)
    if not args.quick:
        rows += case(
            "philly full (82,247 jobs)",
            "philly/philly.csv",
            "nodes:64:8",
            ["fifo", "las", *(["themis"] if args.themis_full else [])],
            600.0,
        )
    if args.themis_full_budget is not None and not args.themis_full:
        rows.append(themis_full_budget(args.themis_full_budget, args.batch_s, args.progress_log))
    table = format_table(
        ["case", "policy", "code", "jobs", "decisions", "load s", "isolated s", "simulate s",
         "cpu s", "target"],
        [
            [
                r["case"], r["policy"], r["code"], str(r["jobs"]), str(r["decisions"]),
                f"{r['load_s']:.1f}", f"{r['isolated_s']:.1f}", f"{r['simulate_s']:.1f}",
                f"{r['simulate_cpu_s']:.1f}",
                "-" if r["target_s"] is None
                else f"<= {r['target_s']:.0f} s: {'met' if r['met'] else 'MISSED'}",
            ]
            for r in rows
        ],
    )  # fmt: skip
    print(table)
    budget = next((r for r in rows if "reached_day" in r), None)
    if budget is not None:
        print(f"themis, all of Philly: {'finished' if budget['finished'] else 'stopped'} at "
              f"day {budget['reached_day']:.1f} of {budget['last_day']:.1f} "
              f"({budget['jobs_arrived']} jobs arrived, {budget['decisions']} decisions, "
              f"{budget['cpu_ms_per_decision']:.2f} ms CPU per decision)")  # fmt: skip
    if ratio is not None:
        print(f"philly day 40 themis, {args.baseline} -> current: {ratio['wall']:.1f}x (wall), "
              f"{ratio['cpu']:.1f}x (CPU), same results: {ratio['same_results']}")  # fmt: skip
    out = args.out or RESULTS / ("sim_speed_quick.json" if args.quick else "sim_speed.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "day40_themis_speedup": ratio,
        "rows": rows,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
