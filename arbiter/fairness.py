"""Finish-time fairness ρ = T_sh / T_id and its estimators (Themis §3.2, §4.1-4.2).

Implements, as pure functions:

* **Equation 1** (one job; P:302-308, T:1084-1105)::

      ρ(G)         = T_sh(G) / T_id
      T_sh(G)      = (T_current - T_start) + iter_left * iter_time(G)
      iter_time(G) = iter_time_serial * S(G) / min(|G|, job_demand_max)
      T_id         = T_cluster * N_avg
      T_cluster    = iter_total * iter_time_serial / min(R_C, job_demand_max)

  ``N_avg`` *multiplies* and counts the app itself (the thesis's "apps in the system"; the
  paper's prose says "other apps ... divided by" while its formula multiplies, and its worked
  example multiplies by 4 = this app + 3 others; spec B.3).
* **Equation 2** (successive halving; P:316-322, T:1113-1127): ``T_sh = elapsed + Σ_phases
  max_j T(G_j)`` and ``T_cluster = B / min(R_C, app_demand_max)``. Eq. 2 omits elapsed time; we
  add it for running apps (spec B.3 [ASSUMPTION]), so finished phases report no remaining work.
* **Performance curve** (Hyperdrive/Vizier; P:326, T:1131): one concurrent phase made of the
  jobs still running, each with the iteration its *maximum* forecast curve stops at; T_sh is set
  by the job that finishes last.

How a phase runs on ``G`` GPUs (our reading of §4.2, which reproduces Table 2 and the worked
example exactly): with at least as many GPUs as jobs, GPUs are split evenly (the remainder going
to the slowest jobs), each job capped at ``job_demand_max``; with fewer GPUs than jobs, jobs are
serialised on single GPUs by longest-processing-time-first packing. The phase ends when its
slowest job ends.

Per-job locality sensitivity ``λ`` (``JobInfo.locality_sensitivity``, Fig. 8) scales the
placement penalty linearly: ``S_job = 1 + λ (S(G) - 1)``; λ = 1 uses S as profiled, λ = 0 ignores
placement.

ρ with no GPUs is ``inf`` (the app makes no progress; T:1013). The auction's handling of that
value is decided in :mod:`arbiter.auction`.

The Agent <-> app-scheduler API of Fig. 8 is :class:`AppScheduler` (``get_num_phases``,
``get_jobs_in_phase``, ``get_jobs_remaining``), with :class:`SuccessiveHalving` as the reference
app scheduler (Hyperband's bracket): future phases' survivors are unknown and are estimated with
the **median** iteration time of the current phase (T:1149), revised once survivors are known.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "AppScheduler",
    "JobInfo",
    "SuccessiveHalving",
    "finish_time_fairness",
    "iter_time",
    "phase_time",
    "rho_performance_curve",
    "rho_single_job",
    "rho_successive_halving",
    "t_id",
    "t_id_share",
]


@dataclass(frozen=True, slots=True)
class JobInfo:
    """Fig. 8's ``JobInfo(itersRemaining, avgTimePerIter, localitySensitivity)``.

    ``avg_time_per_iter`` is the *serial* (1-GPU, best placement) time of one iteration.
    """

    iters_remaining: int
    avg_time_per_iter: float
    locality_sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if self.iters_remaining < 0:
            raise ValueError(f"JobInfo.iters_remaining must be >= 0, got {self.iters_remaining}")
        if not (self.avg_time_per_iter > 0 and math.isfinite(self.avg_time_per_iter)):
            raise ValueError(
                f"JobInfo.avg_time_per_iter must be a positive finite number, "
                f"got {self.avg_time_per_iter}"
            )
        if not (self.locality_sensitivity >= 0 and math.isfinite(self.locality_sensitivity)):
            raise ValueError(
                "JobInfo.locality_sensitivity must be a finite number >= 0, "
                f"got {self.locality_sensitivity}"
            )


@runtime_checkable
class AppScheduler(Protocol):
    """The app-scheduler side of the Agent API (Fig. 8 / Fig. 3.7).

    ``gpu_alloc`` is the list of GPU ids the Agent is pricing. Phases are numbered from 0;
    phases already finished return jobs with no iterations remaining (or no jobs).
    """

    def get_num_phases(self) -> int: ...

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]: ...

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]: ...


def finish_time_fairness(t_sh: float, t_id_: float) -> float:
    """ρ = T_sh / T_id (T:913). ``T_id`` must be positive and finite."""
    if not (t_id_ > 0 and math.isfinite(t_id_)):
        raise ValueError(f"T_id must be a positive finite number, got {t_id_}")
    if math.isnan(t_sh) or t_sh < 0:
        raise ValueError(f"T_sh must be >= 0, got {t_sh}")
    return t_sh / t_id_


def _check_t_id_args(serial_work: float, cluster_gpus: int, demand_max: int,
                     n_avg: float) -> None:  # fmt: skip
    if cluster_gpus < 1 or demand_max < 1:
        raise ValueError(f"cluster_gpus and demand_max must be >= 1 ({cluster_gpus}, {demand_max})")
    if not (n_avg >= 1 and math.isfinite(n_avg)):
        raise ValueError(f"N_avg counts the app itself and must be >= 1, got {n_avg}")
    if not (serial_work > 0 and math.isfinite(serial_work)):
        raise ValueError(f"serial work must be positive and finite, got {serial_work}")


def t_id(serial_work: float, cluster_gpus: int, demand_max: int, n_avg: float) -> float:
    """T_id = T_cluster * N_avg with T_cluster = serial_work / min(R_C, demand_max).

    ``serial_work`` is iter_total * iter_time_serial (Eq. 1) or the budget B (Eq. 2), in
    GPU-seconds; ``n_avg`` counts the app itself, so it is >= 1.
    """
    _check_t_id_args(serial_work, cluster_gpus, demand_max, n_avg)
    return serial_work / min(cluster_gpus, demand_max) * n_avg


def t_id_share(serial_work: float, cluster_gpus: int, demand_max: int, n_avg: float) -> float:
    """T_id as the app's time alone on a 1/N_avg share of the cluster, its share capped at what
    it can use: serial_work / min(demand_max, R_C / N_avg).

    Equal to :func:`t_id` (serial_work·N_avg / R_C) for an app that can use the whole cluster
    (demand_max >= R_C), smaller for the others: the paper's product T_cluster · N_avg slows an
    app N_avg-fold even when its 1/N_avg share covers its demand; it makes a 1-GPU job on 64
    GPUs among 30 apps 30 times slower than alone, although its share (2.1 GPUs) runs it at full
    speed. This is the share the simulator measures ρ against
    (:func:`arbiter.sim.engine.isolated_run`), so the simulated Agent bids with it.

    >>> t_id_share(100.0, 64, 1, 30.0), t_id(100.0, 64, 1, 30.0)
    (100.0, 3000.0)
    >>> t_id_share(100.0, 64, 64, 4.0) == t_id(100.0, 64, 64, 4.0)
    True
    """
    _check_t_id_args(serial_work, cluster_gpus, demand_max, n_avg)
    return serial_work / min(demand_max, cluster_gpus / n_avg)


def iter_time(iter_time_serial: float, slowdown: float, gpus: int, demand_max: int) -> float:
    """iter_time(G) = iter_time_serial * S(G) / min(|G|, job_demand_max); inf with no GPUs."""
    if gpus <= 0:
        return math.inf
    return iter_time_serial * slowdown / min(gpus, demand_max)


def rho_single_job(
    *,
    elapsed: float,
    iters_left: int,
    iter_time_serial: float,
    slowdown: float,
    gpus: int,
    demand_max: int,
    t_id: float,
) -> float:
    """Equation 1: ρ of a single-job app if it holds ``gpus`` GPUs with slowdown S until done."""
    if iters_left == 0:
        return finish_time_fairness(elapsed, t_id)
    t_sh = elapsed + iters_left * iter_time(iter_time_serial, slowdown, gpus, demand_max)
    return finish_time_fairness(t_sh, t_id)


def _job_slowdown(job: JobInfo, slowdown: float) -> float:
    return 1.0 + job.locality_sensitivity * (slowdown - 1.0)


def phase_time(jobs: Sequence[JobInfo], gpus: int, slowdown: float, demand_max: int) -> float:
    """Time for the jobs of one phase to all finish on ``gpus`` GPUs (see module docstring)."""
    work = [
        (j.iters_remaining * j.avg_time_per_iter * _job_slowdown(j, slowdown), j)
        for j in jobs
        if j.iters_remaining > 0
    ]
    if not work:
        return 0.0
    if gpus <= 0:
        return math.inf
    work.sort(key=lambda wj: wj[0], reverse=True)  # slowest first
    if gpus >= len(work):
        base, extra = divmod(gpus, len(work))
        return max(
            w / min(base + (1 if k < extra else 0), demand_max) for k, (w, _) in enumerate(work)
        )
    # Fewer GPUs than jobs: LPT packing of whole jobs onto single GPUs.
    loads = [0.0] * gpus
    heapq.heapify(loads)
    for w, _ in work:
        heapq.heapreplace(loads, loads[0] + w)
    return max(loads)


def rho_successive_halving(
    scheduler: AppScheduler,
    gpu_alloc: Sequence[str],
    *,
    elapsed: float,
    slowdown: float,
    demand_max: int,
    t_id: float,
) -> float:
    """Equation 2 with elapsed time: ρ = (elapsed + Σ_phases max_j T(G_j)) / T_id."""
    t_sh = elapsed + sum(
        phase_time(scheduler.get_jobs_in_phase(p, gpu_alloc), len(gpu_alloc), slowdown, demand_max)
        for p in range(scheduler.get_num_phases())
    )
    return finish_time_fairness(t_sh, t_id)


def rho_performance_curve(
    scheduler: AppScheduler,
    gpu_alloc: Sequence[str],
    *,
    elapsed: float,
    slowdown: float,
    demand_max: int,
    t_id: float,
) -> float:
    """Performance-curve variant: the remaining jobs run as one phase; the last one sets T_sh."""
    jobs = scheduler.get_jobs_remaining(gpu_alloc)
    t_sh = elapsed + phase_time(jobs, len(gpu_alloc), slowdown, demand_max)
    return finish_time_fairness(t_sh, t_id)


@dataclass(frozen=True)
class SuccessiveHalving:
    """Reference app scheduler: one successive-halving bracket (Hyperband; T:1113-1127).

    ``iters_per_phase[p]`` iterations per job in phase ``p``; phase ``p`` runs
    ``len(current_jobs) / 2**(p - current_phase)`` jobs. ``current_jobs`` are the serial
    per-iteration times of the jobs in ``current_phase`` and ``done_in_current`` their
    completed iterations in it. Later phases use the median of ``current_jobs`` (T:1149).
    """

    iters_per_phase: tuple[int, ...]
    current_jobs: tuple[float, ...]
    current_phase: int = 0
    done_in_current: tuple[int, ...] = field(default=())
    locality_sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if not self.current_jobs:
            raise ValueError("SuccessiveHalving.current_jobs must not be empty")
        if not 0 <= self.current_phase < len(self.iters_per_phase):
            raise ValueError(
                f"SuccessiveHalving.current_phase {self.current_phase} outside "
                f"0..{len(self.iters_per_phase) - 1}"
            )
        if self.done_in_current and len(self.done_in_current) != len(self.current_jobs):
            raise ValueError("SuccessiveHalving.done_in_current must match current_jobs")

    def get_num_phases(self) -> int:
        return len(self.iters_per_phase)

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        if phase < self.current_phase:
            return []
        iters = self.iters_per_phase[phase]
        lam = self.locality_sensitivity
        if phase == self.current_phase:
            done = self.done_in_current or (0,) * len(self.current_jobs)
            return [
                JobInfo(max(0, iters - d), t, lam)
                for t, d in zip(self.current_jobs, done, strict=True)
            ]
        n = max(1, len(self.current_jobs) >> (phase - self.current_phase))
        median = statistics.median(self.current_jobs)
        return [JobInfo(iters, median, lam) for _ in range(n)]

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return self.get_jobs_in_phase(self.current_phase, gpu_alloc)

    @property
    def budget(self) -> float:
        """B: serial GPU-seconds of the whole bracket at the current estimates."""
        gpu_alloc: list[str] = []
        total = 0.0
        for p in range(self.current_phase, self.get_num_phases()):
            jobs = self.get_jobs_in_phase(p, gpu_alloc)
            total += sum(self.iters_per_phase[p] * j.avg_time_per_iter for j in jobs)
        return total
