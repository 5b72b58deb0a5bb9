"""Metrics of a simulated run, as the papers report them (Themis §6 metrics,
spec B.11): JCT and its percentiles, queueing delay, finish-time fairness ρ, GPU time,
placement score, makespan and utilization; JSON, CSV and matplotlib figures.

* ρ of a job = its JCT in the run / its JCT in the isolated run (:func:`isolated_run`), the same
  denominator for every policy.
* Apps (Themis's unit of fairness; :mod:`arbiter.sim.apps` groups trace jobs into apps, by
  default each job is its own app): ACT = last finish − first arrival over the app's jobs, and
  ρ_app = ACT / ACT under :func:`~arbiter.sim.engine.isolated_app_run`. An app with a job that
  did not finish has no ACT: it is left out of the app metrics and counted in ``apps`` but not
  in ``apps_finished``, as unfinished jobs are in ``jobs`` / ``finished``. Jobs the simulator
  skipped (gang larger than the cluster) are not part of their app.
* GPU time = GPU-seconds held, running or not (containers hoarded under ``yarn-cs`` count);
  utilization = GPU-seconds *running* / (GPUs × makespan).
* Placement score = time-weighted rate / rate on the best placement of an empty cluster, so
  1 = always ideally placed (Themis's score ≤ 1, read as 1/S).
* Percentiles use the nearest-rank method on the finished jobs.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from arbiter.sim.engine import SimResult

__all__ = [
    "AppResult",
    "app_results",
    "app_rows",
    "attach_isolated",
    "percentile",
    "plot_runs",
    "summarize",
    "write_csv",
    "write_json",
]


def _known(value: float | None) -> float:
    """A time a finished job has (finish, JCT, queueing: it started and finished)."""
    assert value is not None
    return value


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = max(0, math.ceil(q / 100.0 * len(ordered)) - 1)
    return ordered[min(k, len(ordered) - 1)]


def attach_isolated(
    result: SimResult,
    isolated: Mapping[str, float],
    isolated_apps: Mapping[str, float] | None = None,
) -> None:
    """Attach the ρ denominators: per job (:func:`isolated_run`) and, if given, per app
    (:func:`~arbiter.sim.engine.isolated_app_run`)."""
    for job in result.jobs:
        job.isolated_jct_s = isolated.get(job.job_id)
    if isolated_apps is not None:
        result.isolated_act_s = dict(isolated_apps)


@dataclass(frozen=True)
class AppResult:
    """One app of a run: its jobs' first arrival and last finish (None: a job unfinished)."""

    app_id: str
    jobs: int
    arrival_s: float
    finish_s: float | None
    isolated_act_s: float | None = None

    @property
    def act_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def rho(self) -> float | None:
        if self.act_s is None or not self.isolated_act_s:
            return None
        return self.act_s / self.isolated_act_s


def app_results(result: SimResult) -> list[AppResult]:
    """The run's apps, in order of first arrival (then app id)."""
    by_app: dict[str, list] = {}
    for job in result.jobs:
        by_app.setdefault(job.app_id, []).append(job)
    iso = result.isolated_act_s or {}
    out = []
    for app_id, jobs in by_app.items():
        unfinished = any(j.finish_s is None for j in jobs)
        out.append(
            AppResult(
                app_id,
                len(jobs),
                min(j.arrival_s for j in jobs),
                None if unfinished else max(j.finish_s for j in jobs),
                iso.get(app_id),
            )
        )
    return sorted(out, key=lambda a: (a.arrival_s, a.app_id))


def app_rows(result: SimResult) -> list[dict]:
    """One JSON-ready row per app (ACT and ρ_app included)."""
    return [{**asdict(a), "act_s": a.act_s, "rho": a.rho} for a in app_results(result)]


def summarize(result: SimResult) -> dict:
    """Per-run numbers (JSON-ready). Call :func:`attach_isolated` first for ρ (and ρ_app)."""
    done = [j for j in result.jobs if j.finish_s is not None]
    jcts = [_known(j.jct_s) for j in done]
    rhos = [j.rho for j in done if j.rho is not None]
    start = min((j.arrival_s for j in result.jobs), default=0.0)
    end = max((_known(j.finish_s) for j in done), default=start)
    makespan = end - start
    busy = sum(j.busy_gpu_s for j in result.jobs)
    running_time = [j.busy_gpu_s / j.gang for j in done]
    score_w = sum(j.placement_score * t for j, t in zip(done, running_time, strict=True))
    apps = app_results(result)
    acts = [a.act_s for a in apps if a.act_s is not None]
    app_rhos = [a.rho for a in apps if a.rho is not None]
    return {
        "policy": result.policy,
        "cluster": result.cluster,
        "num_gpus": result.num_gpus,
        "jobs": len(result.jobs),
        "finished": len(done),
        "skipped": len(result.skipped),
        "avg_jct_s": sum(jcts) / len(jcts) if jcts else math.nan,
        "median_jct_s": percentile(jcts, 50),
        "p95_jct_s": percentile(jcts, 95),
        "p99_jct_s": percentile(jcts, 99),
        "avg_queueing_s": (
            sum(_known(j.queueing_s) for j in done) / len(done) if done else math.nan
        ),
        "avg_rho": sum(rhos) / len(rhos) if rhos else math.nan,
        "median_rho": percentile(rhos, 50),
        "p99_rho": percentile(rhos, 99),
        "max_rho": max(rhos) if rhos else math.nan,
        "frac_rho_le_1": sum(r <= 1.0 + 1e-9 for r in rhos) / len(rhos) if rhos else math.nan,
        "apps": len(apps),
        "apps_finished": len(acts),
        "avg_act_s": sum(acts) / len(acts) if acts else math.nan,
        "avg_rho_app": sum(app_rhos) / len(app_rhos) if app_rhos else math.nan,
        "max_rho_app": max(app_rhos) if app_rhos else math.nan,
        "makespan_s": makespan,
        "gpu_time_s": sum(j.gpu_time_s for j in result.jobs),
        "busy_gpu_time_s": busy,
        "utilization": busy / (result.num_gpus * makespan) if makespan > 0 else math.nan,
        "placement_score": score_w / sum(running_time) if sum(running_time) > 0 else math.nan,
        "preemptions": sum(j.preemptions for j in result.jobs),
        "decisions": result.decisions,
        "wall_s": result.wall_s,
    }


_COLUMNS = [
    "job_id", "app_id", "queue", "model", "gang", "arrival_s", "start_s", "finish_s", "jct_s",
    "queueing_s", "isolated_jct_s", "rho", "gpu_time_s", "busy_gpu_s", "placement_score",
    "preemptions",
]  # fmt: skip


def job_rows(result: SimResult) -> list[dict]:
    return [{c: getattr(j, c) for c in _COLUMNS} for j in result.jobs]


def write_csv(path: str | Path, result: SimResult) -> Path:
    """One row per job."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=_COLUMNS)
        writer.writeheader()
        writer.writerows(job_rows(result))
    return path


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write_json(path: str | Path, doc: Mapping) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(dict(doc)), indent=2, sort_keys=False) + "\n")
    return path


def _cdf(ax, values: Sequence[float], label: str) -> None:
    xs = sorted(values)
    if xs:
        ax.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", label=label)


def plot_runs(results: Sequence[SimResult], outdir: str | Path, title: str = "") -> list[Path]:
    """ρ CDF, JCT CDF and utilization over time, one line per run (the papers' figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    figures = [
        ("rho_cdf.png", "finish-time fairness ρ = JCT / isolated JCT", lambda r: [
            j.rho for j in r.jobs if j.rho is not None]),
        ("jct_cdf.png", "job completion time (hours)", lambda r: [
            j.jct_s / 3600 for j in r.jobs if j.jct_s is not None]),
    ]  # fmt: skip
    for name, xlabel, values in figures:
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in results:
            _cdf(ax, values(r), r.policy)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of jobs")
        if name == "rho_cdf.png":
            ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
            ax.set_xscale("log")
        ax.set_title(title or results[0].cluster if results else "")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(outdir / name, dpi=120)
        plt.close(fig)
        written.append(outdir / name)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r in results:
        if r.timeline:
            ts = [t / 3600 for t, _, _ in r.timeline]
            ax.step(ts, [b / r.num_gpus for _, b, _ in r.timeline], where="post", label=r.policy)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPUs running / GPUs")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(outdir / "utilization.png", dpi=120)
    plt.close(fig)
    written.append(outdir / "utilization.png")
    return written
