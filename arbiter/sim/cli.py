"""``yarn-arbiter simulate`` and ``yarn-arbiter compare``.

``--app-kind`` groups the trace's jobs into apps (:mod:`arbiter.sim.apps`, Themis's Workload 1
and 2) after they are loaded and sampled; the table then adds ρ and completion time per app.
"""

from __future__ import annotations

import argparse
import math
import sys

from arbiter.cluster import load_cluster
from arbiter.config import parse_knobs
from arbiter.policies import POLICIES
from arbiter.rounds import DEFAULT_FAIRNESS_KNOB, DEFAULT_LEASE_SECONDS
from arbiter.sim.apps import APP_KINDS, group_into_apps
from arbiter.sim.metrics import plot_runs, write_csv, write_json
from arbiter.sim.run import compare, load_jobs
from arbiter.tables import format_table
from arbiter.traces import FORMATS

__all__ = ["add_parsers", "jobs_per_app_arg", "window_arg"]

ALL_POLICIES = (*sorted(POLICIES), "isolated")

_EPILOG = """\
traces: a path, or one under the shared data folder, e.g.
  gavel/max_min_fairness.trace, pollux/workloads/workload-6.csv, philly/philly.csv,
  tiresias/60_job.csv, synergy/static_100job_6_3_1100.0.csv
clusters: a shipped spec (themis-testbed, themis-sim-256, ...), a YAML file,
  gavel:V:P:K (V v100, P p100, K k80, one GPU per server) or nodes:N:G (N machines x G GPUs)
app kinds (--app-kind; ρ per app = app completion time / alone on a 1/N-apps share):
  single              every trace job is its own app (the default)
  hyperparameter      Themis Workload 1: consecutive arrivals grouped into apps of A-B jobs
                      (--jobs-per-app), all submitted at the app's first arrival
  successive-halving  Themis Workload 2: the same apps, jobs cut short as in asynchronous
                      successive halving (halving factor 2: the best job runs its whole work)
"""


def window_arg(text: str) -> tuple[float, float]:
    try:
        start, end = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END in seconds, got {text!r}") from None
    return start, end


def jobs_per_app_arg(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        pair = (int(low), int(high if sep else low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B (whole numbers), got {text!r}") from None
    if not 1 <= pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError(f"expected A-B with 1 <= A <= B, got {text!r}")
    return pair


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="trace file (see below)")
    p.add_argument(
        "--format", choices=sorted(FORMATS), help="trace format (default: from the file)"
    )
    p.add_argument("--cluster", required=True, help="cluster spec or shorthand (see below)")
    p.add_argument("--seed", type=int, default=0, help="seed for sampling and policies")
    p.add_argument(
        "--round-s",
        type=float,
        help="scheduling round length in seconds (default: the policy's own; 0 = on events)",
    )
    p.add_argument(
        "--lease-s",
        type=float,
        default=DEFAULT_LEASE_SECONDS,
        help=f"themis lease length (default {DEFAULT_LEASE_SECONDS:.0f})",
    )
    p.add_argument(
        "--fairness-knob",
        type=float,
        default=DEFAULT_FAIRNESS_KNOB,
        help=f"themis f: the (1 - f) worst-off apps bid (default {DEFAULT_FAIRNESS_KNOB})",
    )
    p.add_argument("--window", type=window_arg, help="philly: keep arrivals in START:END seconds")
    p.add_argument(
        "--target-load",
        type=float,
        help="philly: sample jobs to this GPU-time / (window x cluster GPUs)",
    )
    p.add_argument("--max-jobs", type=int, help="keep only the first N jobs")
    p.add_argument(
        "--app-kind",
        choices=APP_KINDS,
        default="single",
        help="group jobs into apps: single, hyperparameter (Workload 1) or successive-halving "
        "(Workload 2); see below (default single)",
    )
    p.add_argument(
        "--jobs-per-app",
        type=jobs_per_app_arg,
        default=(1, 15),
        metavar="A-B",
        help="jobs per app, uniform in A-B, for the grouped app kinds (default 1-15)",
    )
    p.add_argument("--max-gpus", type=int, help="drop jobs asking for more GPUs than this")
    p.add_argument(
        "--max-duration", type=float, help="philly: drop jobs longer than this many seconds"
    )
    p.add_argument(
        "--min-duration", type=float, help="philly: drop jobs shorter than this many seconds"
    )
    p.add_argument(
        "--gavel-placement-blind",
        action="store_true",
        help="gavel: consolidated throughput wherever a gang runs (as Gavel's simulator)",
    )
    p.add_argument(
        "--policy-knobs",
        help="knobs per policy: 'afs-l:elastic=false;tiresias:queues=3,promote_knob=8' (names "
        "as in each policy's docstring)",
    )
    p.add_argument(
        "--cpu-mem-sensitivity",
        action="store_true",
        help="synergy: jobs get measured CPU/memory sensitivities, so synergy-tune/-opt have "
        "something to tune (without it every job runs at its GPU-proportional share)",
    )
    p.add_argument(
        "--strict-fifo", action="store_true", help="fifo: no backfilling past a blocked head"
    )
    p.add_argument("--json", help="write the summary (and per-job rows) as JSON here")
    p.add_argument("--csv", help="write per-job rows as CSV here (compare: one file per policy)")
    p.add_argument("--plot", help="write ρ CDF, JCT CDF and utilization PNGs into this folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parsers(sub) -> None:
    sim = sub.add_parser(
        "simulate",
        help="replay a trace under one policy and report JCT, ρ, GPU time, utilization",
        description="Replay a public GPU-cluster trace through the same policy code the "
        "arbiter runs, and report JCT (avg/median/p95/p99), finish-time fairness ρ against an "
        "isolated run, GPU time, placement score, makespan and utilization.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(sim)
    sim.add_argument("--policy", required=True, choices=ALL_POLICIES, help="scheduling policy")
    sim.set_defaults(func=_cmd_simulate)
    cmp = sub.add_parser(
        "compare",
        help="replay one trace under several policies and print one table",
        description="Replay one trace under each policy (same jobs, same isolated "
        "denominator for ρ) and print one table of the headline metrics.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(cmp)
    cmp.add_argument(
        "--policies",
        default="fifo,las,themis",
        help=f"comma-separated, from {', '.join(ALL_POLICIES)} (default fifo,las,themis)",
    )
    cmp.set_defaults(func=_cmd_compare)


def _fmt(value, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _table(summaries: list[dict], apps: bool = False) -> str:
    """The headline metrics, one row per policy; ``apps``: ρ and ACT per app too."""
    headers = [
        "policy", "jobs", "avg JCT s", "p99 JCT s", "avg ρ", "max ρ", "GPU time h",
        "util", "placement", "makespan s", "wall s",
    ]  # fmt: skip
    rows = [
        [
            s["policy"], f"{s['finished']}/{s['jobs']}", _fmt(s["avg_jct_s"]),
            _fmt(s["p99_jct_s"]), _fmt(s["avg_rho"], 2), _fmt(s["max_rho"], 2),
            _fmt(s["gpu_time_s"] / 3600, 1), _fmt(s["utilization"], 3),
            _fmt(s["placement_score"], 3), _fmt(s["makespan_s"]), _fmt(s["wall_s"], 2),
        ]
        for s in summaries
    ]  # fmt: skip
    if apps:
        headers[6:6] = ["max ρ (app)", "avg ρ (app)", "avg ACT s"]
        for row, s in zip(rows, summaries, strict=True):
            row[6:6] = [_fmt(s["max_rho_app"], 2), _fmt(s["avg_rho_app"], 2),
                        _fmt(s["avg_act_s"])]  # fmt: skip
    return format_table(headers, rows)


def _run(args, policies: list[str]) -> int:
    unknown = [p for p in policies if p not in ALL_POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown} (known: {', '.join(ALL_POLICIES)})")
    cluster = load_cluster(args.cluster)
    jobs = load_jobs(
        args.trace, args.format, cluster=cluster, time_window=args.window,
        target_load=args.target_load, max_jobs=args.max_jobs, max_gpus=args.max_gpus,
        max_duration_s=args.max_duration, min_duration_s=args.min_duration, seed=args.seed,
        gavel_placement_blind=args.gavel_placement_blind,
        synergy_sensitivity=args.cpu_mem_sensitivity,
    )  # fmt: skip
    if not jobs:
        raise ValueError("the trace (after window/sampling) has no jobs")
    jobs = group_into_apps(jobs, args.app_kind, args.jobs_per_app, seed=args.seed)
    grouped = args.app_kind != "single"
    apps = f" in {len({j.app_id for j in jobs})} {args.app_kind} apps" if grouped else ""
    print(
        f"{len(jobs)} jobs{apps} on {cluster.name} ({cluster.num_gpus} GPUs); "
        f"policies: {', '.join(policies)}",
        file=sys.stderr,
    )
    knobs = {
        "themis": {"lease_s": args.lease_s, "fairness_knob": args.fairness_knob},
        "fifo": {"backfill": not args.strict_fifo},
    }
    for item in filter(None, (x.strip() for x in (args.policy_knobs or "").split(";"))):
        name, sep, text = item.partition(":")
        if not sep or name not in ALL_POLICIES:
            raise ValueError(f"--policy-knobs: {item!r} is not POLICY:name=value,...")
        knobs.setdefault(name, {}).update(parse_knobs(text))
    runs = compare(
        jobs, cluster, policies, round_s=args.round_s, seed=args.seed,
        progress=not args.no_progress and sys.stderr.isatty(), knobs=knobs,
    )  # fmt: skip
    summaries = [r.summary for r in runs]
    skipped = max(s["skipped"] for s in summaries)
    if skipped:
        print(f"warning: {skipped} jobs need more GPUs than the cluster has; skipped",
              file=sys.stderr)  # fmt: skip
    print(_table(summaries, apps=grouped))
    if args.json:
        from arbiter.sim.metrics import app_rows, job_rows

        doc = summaries[0] if len(runs) == 1 else {"runs": summaries}
        if len(runs) == 1:
            doc = {**doc, "per_job": job_rows(runs[0].result)}
            if grouped:
                doc["per_app"] = app_rows(runs[0].result)
        print(f"wrote {write_json(args.json, doc)}", file=sys.stderr)
    if args.csv:
        for r in runs:
            path = args.csv if len(runs) == 1 else _suffixed(args.csv, r.result.policy)
            print(f"wrote {write_csv(path, r.result)}", file=sys.stderr)
    if args.plot:
        for path in plot_runs([r.result for r in runs], args.plot, title=cluster.name):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _suffixed(path: str, policy: str) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{policy}.{ext}" if dot else f"{path}-{policy}"


def _cmd_simulate(args) -> int:
    return _run(args, [args.policy])


def _cmd_compare(args) -> int:
    return _run(args, [p.strip() for p in args.policies.split(",") if p.strip()])
