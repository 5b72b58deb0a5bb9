"""One call from a trace file to numbers: read, model, simulate, compare (the CLI's core).

``resolve_trace`` accepts a path, or a path relative to the shared data folder (e.g.
``gavel/max_min_fairness.trace``), so users can name the shipped traces. ``detect_format``
recognises each format by extension or header when ``--format`` is left out.

ρ has two denominators, both computed once per comparison and shared by every policy: per job
(:func:`isolated_run`) and per app (:func:`isolated_app_run`, see :func:`app_denominator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arbiter.cluster import Cluster
from arbiter.datasets import data_root
from arbiter.policies import make_policy
from arbiter.sim.engine import SimResult, isolated_app_run, isolated_run, simulate
from arbiter.sim.metrics import attach_isolated, summarize
from arbiter.sim.perf import SimJob, sim_jobs
from arbiter.traces import FORMATS, TraceError, read_trace

__all__ = [
    "Run",
    "app_denominator",
    "compare",
    "detect_format",
    "load_jobs",
    "resolve_trace",
    "run_policy",
]

_HEADERS = {
    "timestamp,duration,num_gpus": "philly",
    "name,time,application": "pollux",
    "job_id,num_gpu,submit_time": "tiresias",
}


def resolve_trace(trace: str | Path) -> Path:
    path = Path(trace)
    if path.is_file():
        return path
    try:
        shared = data_root() / path
    except FileNotFoundError:
        shared = None
    if shared is not None and shared.is_file():
        return shared
    raise TraceError(
        f"trace {str(trace)!r}: no such file (also looked for it under the shared data folder)"
    )


def detect_format(path: Path) -> str:
    if path.suffix == ".trace":
        return "gavel"
    with open(path) as fh:
        head = fh.readline().strip()
    for prefix, fmt in _HEADERS.items():
        if head.startswith(prefix):
            return fmt
    fields = head.split(",")
    if len(fields) == 5 and fields[0].isdigit():
        return "synergy"
    raise TraceError(
        f"cannot tell the format of {path} from its header {head[:60]!r}; "
        f"pass --format ({', '.join(sorted(FORMATS))})"
    )


def load_jobs(
    trace: str | Path,
    fmt: str | None = None,
    *,
    cluster: Cluster | None = None,
    time_window: tuple[float, float] | None = None,
    target_load: float | None = None,
    max_jobs: int | None = None,
    max_gpus: int | None = None,
    max_duration_s: float | None = None,
    min_duration_s: float | None = None,
    seed: int = 0,
    gavel_placement_blind: bool = False,
    synergy_sensitivity: bool = False,
) -> list[SimJob]:
    """SimJobs of a trace file (``synergy_sensitivity``: Synergy jobs get their measured
    CPU/memory sensitivity, :func:`arbiter.sim.perf.sim_jobs`)."""
    path = resolve_trace(trace)
    fmt = fmt or detect_format(path)
    options: dict = {}
    if fmt == "philly":
        options = {
            "time_window": time_window,
            "target_load": target_load,
            "seed": seed,
            "max_gpus": max_gpus,
            "max_duration_s": max_duration_s,
            "min_duration_s": min_duration_s,
        }
        if target_load is not None:
            if cluster is None:
                raise TraceError("target_load needs the cluster")
            options["cluster_gpus"] = cluster.num_gpus
    elif any(x is not None for x in (time_window, target_load, max_duration_s, min_duration_s)):
        raise TraceError(f"window, target load, durations apply to philly traces, not {fmt}")
    jobs = read_trace(path, fmt, **options)
    if max_gpus is not None and fmt != "philly":
        jobs = [j for j in jobs if j.num_gpus <= max_gpus]
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    return sim_jobs(
        jobs,
        gavel_placement_blind=gavel_placement_blind,
        synergy_sensitivity=synergy_sensitivity,
    )


def app_denominator(
    jobs: Sequence[SimJob], cluster: Cluster, isolated: dict[str, float] | None = None
) -> dict[str, float]:
    """App -> ACT under :func:`isolated_app_run`. When every app is a single job that is its
    :func:`isolated_run` JCT, taken from ``isolated`` when given (the cheap per-gang clocks)."""
    per_app: dict[str, int] = {}
    for j in jobs:
        per_app[j.app_id] = per_app.get(j.app_id, 0) + 1
    if all(n == 1 for n in per_app.values()):
        if isolated is None:
            isolated = isolated_run(jobs, cluster)
        return {j.app_id: isolated[j.job_id] for j in jobs if j.job_id in isolated}
    return isolated_app_run(jobs, cluster)


@dataclass
class Run:
    result: SimResult
    summary: dict


def run_policy(
    jobs: Sequence[SimJob],
    cluster: Cluster,
    policy: str,
    *,
    isolated: dict[str, float] | None = None,
    isolated_apps: dict[str, float] | None = None,
    round_s: float | None = None,
    seed: int = 0,
    progress: bool = False,
    **knobs,
) -> Run:
    """Simulate one policy (``isolated`` included) and summarise it with ρ and ρ_app
    (denominators computed here unless given)."""
    if isolated is None:
        isolated = isolated_run(jobs, cluster)
    if isolated_apps is None:
        isolated_apps = app_denominator(jobs, cluster, isolated)
    if policy == "isolated":
        result = _isolated_result(jobs, cluster, isolated)
    else:
        if policy == "themis":
            knobs.setdefault("seed", seed)
        result = simulate(
            jobs, cluster, make_policy(policy, **knobs), round_s=round_s, progress=progress
        )
    attach_isolated(result, isolated, isolated_apps)
    return Run(result, summarize(result))


def _isolated_result(jobs, cluster, isolated) -> SimResult:
    from arbiter.sim.engine import JobResult

    rows = []
    for j in sorted(jobs, key=lambda j: (j.arrival_s, j.app_id, j.job_id)):
        if j.job_id in isolated:
            r = JobResult(j.job_id, j.app_id, j.queue, j.model, j.gang, j.arrival_s)
            r.start_s, r.finish_s = j.arrival_s, j.arrival_s + isolated[j.job_id]
            rows.append(r)
    skipped = [j.job_id for j in jobs if j.job_id not in isolated]
    return SimResult("isolated", cluster.name, cluster.num_gpus, rows, skipped=skipped)


def compare(
    jobs: Sequence[SimJob],
    cluster: Cluster,
    policies: Sequence[str],
    *,
    round_s: float | None = None,
    seed: int = 0,
    progress: bool = False,
    knobs: dict | None = None,
) -> list[Run]:
    """Every policy on the same jobs, one shared isolated denominator (per job and per app)."""
    isolated = isolated_run(jobs, cluster)
    isolated_apps = app_denominator(jobs, cluster, isolated)
    runs = []
    for name in policies:
        kn = dict((knobs or {}).get(name, {}))
        runs.append(
            run_policy(
                jobs, cluster, name, isolated=isolated, isolated_apps=isolated_apps,
                round_s=round_s, seed=seed, progress=progress, **kn,
            )
        )  # fmt: skip
    return runs
