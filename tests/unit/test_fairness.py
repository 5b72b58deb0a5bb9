"""Finish-time fairness rho = T_sh / T_id and its estimators (spec qoop-themis.md B.3, B.8, B.9).

Every expected number below is worked out by hand from the Themis thesis/paper (cited as T:/P:
line numbers of the spec's sources) or from the spec's [DERIVED] examples, never from the code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from arbiter.fairness import (
    AppScheduler,
    JobInfo,
    SuccessiveHalving,
    finish_time_fairness,
    phase_time,
    rho_performance_curve,
    rho_single_job,
    rho_successive_halving,
    t_id,
)

# Worked end-to-end example (B.9, T:1139-1155): 16 GPUs, 4 jobs at 80/100/100/120 s per
# iteration, 8/16/36 iterations per phase, budget 10000 GPU-s, 3 other apps, job_demand_max 8.
WORKED = SuccessiveHalving(iters_per_phase=(8, 16, 36), current_jobs=(80, 100, 100, 120))
CLUSTER_GPUS = 16
APP_DEMAND = 16
JOB_DEMAND = 8
N_AVG = 4


def gpus(n: int) -> list[str]:
    """n distinct GPU ids (placement does not matter in the worked example: S = 1)."""
    return [f"m/s0/g{k}" for k in range(n)]


def sh_rho(scheduler: AppScheduler, n: int, *, elapsed: float = 0.0, tid: float = 2500.0) -> float:
    return rho_successive_halving(
        scheduler, gpus(n), elapsed=elapsed, slowdown=1.0, demand_max=JOB_DEMAND, t_id=tid
    )


class PhaseListScheduler:
    """A minimal app scheduler whose phases are given explicitly as JobInfo lists."""

    def __init__(self, phases: Sequence[Sequence[JobInfo]]) -> None:
        self.phases = [list(p) for p in phases]

    def get_num_phases(self) -> int:
        return len(self.phases)

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return list(self.phases[phase])

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        return list(self.phases[0])


class CurveScheduler:
    """Performance-curve app scheduler (T:1131): only get_jobs_remaining may be used."""

    def __init__(self, jobs: Sequence[JobInfo]) -> None:
        self.jobs = list(jobs)
        self.calls: list[list[str]] = []

    def get_num_phases(self) -> int:
        raise AssertionError("the performance-curve estimator must not ask for phases")

    def get_jobs_in_phase(self, phase: int, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        raise AssertionError("the performance-curve estimator must not ask for phases")

    def get_jobs_remaining(self, gpu_alloc: Sequence[str]) -> list[JobInfo]:
        self.calls.append(list(gpu_alloc))
        return list(self.jobs)


# --- Table 1 and Equation 1 -------------------------------------------------------------------


@pytest.mark.parametrize(("n_gpus", "expected"), [(1, 0.5), (2, 0.25)])
def test_table1_single_job(n_gpus: int, expected: float) -> None:
    """Table 1 (T:907): T_id = 400; T_sh 200 on 1 GPU -> rho 1/2, 100 on 2 GPUs -> rho 1/4."""
    rho = rho_single_job(
        elapsed=0,
        iters_left=200,
        iter_time_serial=1.0,
        slowdown=1.0,
        gpus=n_gpus,
        demand_max=2,
        t_id=400,
    )
    assert rho == pytest.approx(expected)
    assert finish_time_fairness(200 / n_gpus, 400) == pytest.approx(expected)


def test_eq1_t_id_sample() -> None:
    """B.3 [DERIVED]: 1000 iters x 4 s, demand 4, R_C = 64 -> T_cluster 1000 s, x N_avg 4 = 4000."""
    assert t_id(1000 * 4, cluster_gpus=64, demand_max=4, n_avg=4) == pytest.approx(4000)


@pytest.mark.parametrize(("slowdown", "expected"), [(1.0, 0.55), (1.1, 0.59), (1.3, 0.67)])
def test_eq1_sample_rho_by_placement(slowdown: float, expected: float) -> None:
    """B.3 / D.14: elapsed 600, 800 iters left, 2 GPUs -> rho 0.55 / 0.59 / 0.67 for S 1/1.1/1.3."""
    rho = rho_single_job(
        elapsed=600,
        iters_left=800,
        iter_time_serial=4.0,
        slowdown=slowdown,
        gpus=2,
        demand_max=4,
        t_id=t_id(4000, 64, 4, 4),
    )
    assert rho == pytest.approx(expected)


def test_eq1_gpus_capped_at_job_demand() -> None:
    """Eq. 1 (P:302-308): iter_time divides by min(|G|, job_demand_max); GPUs past 4 add nothing."""
    kwargs = dict(elapsed=600, iters_left=800, iter_time_serial=4.0, slowdown=1.0, demand_max=4)
    at_4 = rho_single_job(gpus=4, t_id=4000, **kwargs)
    assert at_4 == pytest.approx((600 + 800) / 4000)
    assert rho_single_job(gpus=16, t_id=4000, **kwargs) == pytest.approx(at_4)


def test_eq1_elapsed_time_counts() -> None:
    """Eq. 1: T_sh includes T_current - T_start; a finished job's rho is elapsed / T_id."""
    kwargs = dict(iter_time_serial=4.0, slowdown=1.0, gpus=2, demand_max=4, t_id=4000)
    assert rho_single_job(elapsed=0, iters_left=800, **kwargs) == pytest.approx(0.4)
    assert rho_single_job(elapsed=1000, iters_left=800, **kwargs) == pytest.approx(0.65)
    assert rho_single_job(elapsed=1000, iters_left=0, **kwargs) == pytest.approx(0.25)


def test_eq1_no_gpus_is_infinite() -> None:
    """T:1013: an app with no GPUs makes no progress, so its rho is unbounded."""
    rho = rho_single_job(
        elapsed=10, iters_left=5, iter_time_serial=1.0, slowdown=1.0, gpus=0, demand_max=2, t_id=40
    )
    assert rho == math.inf


# --- N_avg -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_avg", [0, 0.5, 0.999, -1, math.nan, math.inf])
def test_n_avg_counts_the_app_itself(n_avg: float) -> None:
    """B.3: N_avg counts the app itself (this app + 3 others = 4 in T:1145), so it is >= 1."""
    with pytest.raises(ValueError):
        t_id(10000, 16, 16, n_avg)


def test_n_avg_multiplies() -> None:
    """B.3 / T:1101: T_id = T_cluster x N_avg; doubling N_avg doubles T_id and halves rho."""
    assert t_id(10000, 16, 16, 1) == pytest.approx(625)
    assert t_id(10000, 16, 16, 4) == pytest.approx(2500)
    assert t_id(10000, 16, 16, 8) == pytest.approx(5000)
    assert sh_rho(WORKED, 2, tid=t_id(10000, 16, 16, 8)) == pytest.approx(1.0)


def test_t_id_caps_at_cluster_size() -> None:
    """Eq. 1/2: T_cluster = work / min(R_C, demand_max); a demand above R_C is capped at R_C."""
    assert t_id(6400, cluster_gpus=64, demand_max=128, n_avg=1) == pytest.approx(100)
    assert t_id(6400, cluster_gpus=64, demand_max=32, n_avg=1) == pytest.approx(200)


# --- Worked example (B.9) ------------------------------------------------------------------


def test_worked_example_budget_and_t_id() -> None:
    """B.9 (T:1145): phases 4/2/1 jobs x 8/16/36 iters at median 100 s -> B = 10000; T_id = 2500."""
    assert WORKED.get_num_phases() == 3
    assert WORKED.budget == pytest.approx(10000)
    assert t_id(WORKED.budget, CLUSTER_GPUS, APP_DEMAND, N_AVG) == pytest.approx(2500)


def test_worked_example_phase_times_on_two_gpus() -> None:
    """B.9 (T:1147-1149): with 2 GPUs the phases take 1600 / 1600 / 1800 s."""
    alloc = gpus(2)
    phases = [WORKED.get_jobs_in_phase(p, alloc) for p in range(3)]
    assert [len(p) for p in phases] == [4, 2, 1]
    assert [j.avg_time_per_iter for j in phases[1] + phases[2]] == [100, 100, 100]  # the median
    times = [phase_time(p, 2, slowdown=1.0, demand_max=JOB_DEMAND) for p in phases]
    assert times == pytest.approx([1600, 1600, 1800])


def test_worked_example_rho_is_two() -> None:
    """B.9 / D.15 (T:1149): T_sh = 5000 with 2 GPUs, T_id = 2500 -> rho = 2."""
    tid = t_id(WORKED.budget, CLUSTER_GPUS, APP_DEMAND, N_AVG)
    assert sh_rho(WORKED, 2, tid=tid) == pytest.approx(2.0)


def test_worked_example_revised_survivors() -> None:
    """B.9 (T:1151): survivors of 120 s and 100 s -> T_sh(2) = 120 x 16, T_sh(3) = 120 x 36 / 2.

    T:1151 prints "120 x 16 = 3200", but its own footnote 5 says the two jobs run on one GPU
    each with the 120 s job finishing last, i.e. 120 x 16 = 1920; 3200 is an arithmetic slip
    (carried into the spec's [DERIVED] rho 2.784). Correct: 1600 + 1920 + 2160 = 5680 -> 2.272.
    """
    survivors = [JobInfo(16, 120.0), JobInfo(16, 100.0)]
    winner = [JobInfo(36, 120.0)]
    assert phase_time(survivors, 2, 1.0, JOB_DEMAND) == pytest.approx(120 * 16)
    assert phase_time(winner, 2, 1.0, JOB_DEMAND) == pytest.approx(2160)
    first = WORKED.get_jobs_in_phase(0, gpus(2))
    revised = PhaseListScheduler([first, survivors, winner])
    assert isinstance(revised, AppScheduler)
    assert sh_rho(revised, 2) == pytest.approx((1600 + 1920 + 2160) / 2500)


# --- Table 2 (B.9) ------------------------------------------------------------------------------

ALL_100 = SuccessiveHalving(iters_per_phase=(8, 16, 36), current_jobs=(100, 100, 100, 100))


@pytest.mark.parametrize(
    ("n_gpus", "expected"), [(1, 4.0), (2, 2.0), (4, 1.0), (8, 0.5), (16, 0.34)]
)
def test_table2_bids(n_gpus: int, expected: float) -> None:
    """Table 2 / D.16 (P:354-356): 1/2/4/8/16 GPUs -> rho 4 / 2 / 1 / 0.5 [DERIVED] / 0.34."""
    assert ALL_100.budget == pytest.approx(10000)
    assert sh_rho(ALL_100, n_gpus) == pytest.approx(expected)


def test_table2_not_linear_past_job_demand() -> None:
    """T:1151: job_demand_max = 8 means rho(16) = 850/2500 is not rho(8)/2 = 625/2500."""
    rho8, rho16 = sh_rho(ALL_100, 8), sh_rho(ALL_100, 16)
    assert rho16 != pytest.approx(rho8 / 2)
    assert rho16 == pytest.approx(850 / 2500)


# --- Elapsed time, finished phases, zero GPUs ---------------------------------------------------


def test_successive_halving_adds_elapsed_time() -> None:
    """B.3 [ASSUMPTION]: Eq. 2 omits elapsed time; for a running app T_sh = elapsed + remaining."""
    assert sh_rho(ALL_100, 2, elapsed=500) == pytest.approx((500 + 5000) / 2500)


def test_finished_phases_contribute_nothing() -> None:
    """B.3 [ASSUMPTION]: finished phases report no work; only the current and later phases count."""
    in_phase_1 = SuccessiveHalving(
        iters_per_phase=(8, 16, 36), current_jobs=(100, 100), current_phase=1
    )
    assert in_phase_1.get_jobs_in_phase(0, gpus(2)) == []
    # phase 2 (index 1): two 100 s jobs, one GPU each, 16 iters = 1600; last phase 3600 / 2.
    assert sh_rho(in_phase_1, 2, elapsed=1600) == pytest.approx((1600 + 1600 + 1800) / 2500)
    half_done = SuccessiveHalving(
        iters_per_phase=(8, 16, 36),
        current_jobs=(100, 100),
        current_phase=1,
        done_in_current=(8, 8),
    )
    assert sh_rho(half_done, 2) == pytest.approx((800 + 1800) / 2500)
    assert phase_time([JobInfo(0, 100.0), JobInfo(0, 5.0)], 2, 1.0, 8) == 0


def test_successive_halving_no_gpus_is_infinite() -> None:
    """T:1013: with no GPUs the remaining phases never finish, so rho is unbounded."""
    assert sh_rho(WORKED, 0) == math.inf


def test_estimates_unknown_survivors_with_median() -> None:
    """T:1149: later phases use the median per-iteration time of the current jobs."""
    sh = SuccessiveHalving(iters_per_phase=(1, 1), current_jobs=(10, 30, 50, 1000))
    later = sh.get_jobs_in_phase(1, gpus(2))
    assert [j.avg_time_per_iter for j in later] == [40, 40]


# --- Locality sensitivity ------------------------------------------------------------------


@pytest.mark.parametrize(("sensitivity", "expected"), [(0.0, 100.0), (0.5, 115.0), (1.0, 130.0)])
def test_locality_sensitivity_scales_slowdown(sensitivity: float, expected: float) -> None:
    """Fig. 8 localitySensitivity: S_job = 1 + lambda (S - 1); 0 ignores placement, 1 uses S."""
    job = JobInfo(iters_remaining=100, avg_time_per_iter=1.0, locality_sensitivity=sensitivity)
    assert phase_time([job], 1, slowdown=1.3, demand_max=1) == pytest.approx(expected)


# --- Performance-curve variant -------------------------------------------------------------


def test_protocol_is_runtime_checkable() -> None:
    """B.8 (Fig. 8): an object with the three API methods is an AppScheduler; others are not."""
    assert isinstance(CurveScheduler([]), AppScheduler)
    assert isinstance(WORKED, AppScheduler)
    assert not isinstance(object(), AppScheduler)


def test_performance_curve_last_job_sets_t_sh() -> None:
    """T:1131 / P:326: getJobsRemaining only; T_sh is set by the job that finishes last."""
    sched = CurveScheduler(
        [JobInfo(100, 2.0), JobInfo(50, 1.0), JobInfo(300, 1.0)]  # 200 s, 50 s, 300 s serial
    )
    alloc = gpus(3)
    rho = rho_performance_curve(sched, alloc, elapsed=0, slowdown=1.0, demand_max=1, t_id=600)
    assert rho == pytest.approx(300 / 600)
    assert sched.calls == [alloc]
    with_elapsed = rho_performance_curve(
        sched, alloc, elapsed=300, slowdown=1.0, demand_max=1, t_id=600
    )
    assert with_elapsed == pytest.approx(1.0)


def test_performance_curve_serialises_when_short_of_gpus() -> None:
    """B.9 rule: with fewer GPUs than jobs, jobs share GPUs; 3 x 100 s jobs on 1 GPU take 300 s."""
    sched = CurveScheduler([JobInfo(100, 1.0)] * 3)
    rho = rho_performance_curve(sched, gpus(1), elapsed=0, slowdown=1.0, demand_max=4, t_id=100)
    assert rho == pytest.approx(3.0)


# --- Bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iters", "avg", "sensitivity"),
    [
        (-1, 1.0, 1.0),
        (10, 0.0, 1.0),
        (10, -2.0, 1.0),
        (10, math.nan, 1.0),
        (10, math.inf, 1.0),
        (10, 1.0, -0.5),
        (10, 1.0, math.nan),
    ],
)
def test_jobinfo_rejects_bad_values(iters: int, avg: float, sensitivity: float) -> None:
    """B.8 JobInfo: iterations >= 0, a positive finite time per iteration, sensitivity >= 0."""
    with pytest.raises(ValueError):
        JobInfo(iters, avg, sensitivity)


@pytest.mark.parametrize("bad_t_id", [0, -1, math.nan, math.inf])
def test_finish_time_fairness_rejects_bad_t_id(bad_t_id: float) -> None:
    """rho = T_sh / T_id (T:913) is only defined for a positive, finite T_id."""
    with pytest.raises(ValueError):
        finish_time_fairness(100, bad_t_id)


def test_finish_time_fairness_rejects_bad_t_sh() -> None:
    """T_sh is a duration: NaN or negative values are errors, not rho values."""
    with pytest.raises(ValueError):
        finish_time_fairness(math.nan, 100)
    with pytest.raises(ValueError):
        finish_time_fairness(-1, 100)
