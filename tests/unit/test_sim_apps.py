"""Apps in the simulator (``arbiter.sim.apps``): Themis's Workload 1 / 2 grouping, the per-app
isolated denominator, ρ per app, LAS over apps, and ``--app-kind`` on the command line."""

from __future__ import annotations

import doctest
import json
import math
from collections import Counter

import pytest

import arbiter.sim.apps as apps_module
from arbiter.cluster import shorthand_cluster
from arbiter.policies import make_policy
from arbiter.policies.base import JobView, Snapshot
from arbiter.sim.apps import asha_fractions, group_into_apps
from arbiter.sim.engine import JobResult, SimResult, isolated_app_run, isolated_run, simulate
from arbiter.sim.metrics import app_results, attach_isolated, summarize
from arbiter.sim.perf import SimJob, SlowdownPerf
from arbiter.sim.run import compare, load_jobs
from yarn_arbiter.cli import main

PERF = SlowdownPerf()
DAY_30 = 30 * 86400.0
WINDOW = f"{DAY_30:.0f}:{DAY_30 + 4 * 3600:.0f}"
PHILLY = ["--trace", "philly/philly.csv", "--cluster", "nodes:4:4", "--window", WINDOW,
          "--max-duration", "20000"]  # fmt: skip


@pytest.fixture(scope="module")
def philly() -> list[SimJob]:
    """Four hours of the shipped Philly trace (day 30): 47 jobs of 1-8 GPUs."""
    jobs = load_jobs("philly/philly.csv", time_window=(DAY_30, DAY_30 + 4 * 3600))
    assert len(jobs) > 30
    return jobs


def _apps(jobs: list[SimJob]) -> dict[str, list[SimJob]]:
    out: dict[str, list[SimJob]] = {}
    for j in jobs:
        out.setdefault(j.app_id, []).append(j)
    return out


# --- grouping -------------------------------------------------------------------------------


def test_doctests() -> None:
    assert doctest.testmod(apps_module).failed == 0


def test_single_is_the_trace_unchanged(philly) -> None:
    assert group_into_apps(philly, "single") == philly
    assert all(j.app_id == j.job_id for j in group_into_apps(philly, "single"))


@pytest.mark.parametrize(("low", "high"), [(1, 15), (2, 5), (4, 4)])
def test_hyperparameter_groups(philly, low: int, high: int) -> None:
    grouped = group_into_apps(philly, "hyperparameter", (low, high), seed=3)
    order = sorted(philly, key=lambda j: (j.arrival_s, j.job_id))
    # Every job kept once, same id, work, gang and perf; consecutive arrival order.
    assert [j.job_id for j in grouped] == [j.job_id for j in order]
    for new, old in zip(grouped, order, strict=True):
        for field in ("work", "gang", "perf", "model"):
            assert getattr(new, field) == getattr(old, field)
    apps = _apps(grouped)
    ids = list(apps)
    assert ids == sorted(ids)  # zero-padded: string order is arrival order
    sizes = [len(apps[a]) for a in ids]
    assert all(low <= k <= high for k in sizes[:-1]) and 1 <= sizes[-1] <= high
    start = 0
    for a in ids:
        members = order[start : start + len(apps[a])]
        start += len(apps[a])
        assert {j.arrival_s for j in apps[a]} == {members[0].arrival_s}  # the first arrival
    assert grouped == group_into_apps(philly, "hyperparameter", (low, high), seed=3)


def test_seed_changes_the_grouping(philly) -> None:
    sizes = {
        seed: [len(v) for v in _apps(group_into_apps(philly, "hyperparameter", seed=seed)).values()]
        for seed in range(4)
    }
    assert len({tuple(s) for s in sizes.values()}) > 1


def test_successive_halving_work_fractions(philly) -> None:
    grouped = group_into_apps(philly, "successive-halving", (3, 9), seed=1)
    same_apps = group_into_apps(philly, "hyperparameter", (3, 9), seed=1)
    assert [(j.job_id, j.app_id, j.arrival_s) for j in grouped] == [
        (j.job_id, j.app_id, j.arrival_s) for j in same_apps
    ]
    work = {j.job_id: j.work for j in philly}
    for members in _apps(grouped).values():
        k = len(members)
        rungs = math.ceil(math.log2(k)) if k > 1 else 0
        fractions = sorted((j.work / work[j.job_id] for j in members), reverse=True)
        assert fractions == pytest.approx(asha_fractions(k))
        assert fractions[0] == 1.0 and fractions[1:].count(1.0) == 0  # the best keeps all
        # Half the jobs stop after the first rung; ceil(k / 2^i) survive rung i.
        assert sum(f == pytest.approx(2.0**-rungs) for f in fractions) >= k // 2
        for i in range(rungs + 1):
            assert sum(f >= 2.0 ** (i - rungs) - 1e-12 for f in fractions) == math.ceil(k / 2**i)


def test_asha_fractions_per_rung() -> None:
    assert asha_fractions(8) == [1.0, 0.5, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125]
    for k in range(1, 40):
        got = Counter(asha_fractions(k))
        rungs = math.ceil(math.log2(k)) if k > 1 else 0
        assert got[1.0] == 1 and sum(got.values()) == k
        assert got[2.0**-rungs] == (k // 2 if k > 1 else 1)


@pytest.mark.parametrize(
    ("kind", "jobs_per_app", "message"),
    [
        ("hyperparameter", (0, 3), "1 <= A <= B"),
        ("hyperparameter", (5, 2), "1 <= A <= B"),
        ("successive-halving", (1.5, 3), "1 <= A <= B"),
        ("hyperparameter", (3,), "pair"),
        ("hyperband", (1, 15), "unknown app kind 'hyperband'"),
    ],
)
def test_bad_grouping_input(philly, kind, jobs_per_app, message) -> None:
    with pytest.raises(ValueError, match=message):
        group_into_apps(philly, kind, jobs_per_app)


# --- the isolated denominator over apps ----------------------------------------------------


def test_isolated_app_run_equals_isolated_run_for_single_job_apps(philly) -> None:
    for spec in ("nodes:4:4", "nodes:1:8", "gavel:2:2:2"):
        cluster = shorthand_cluster(spec)
        per_job, per_app = isolated_run(philly, cluster), isolated_app_run(philly, cluster)
        assert set(per_app) == set(per_job)
        for job_id, jct in per_job.items():
            assert per_app[job_id] == pytest.approx(jct, rel=1e-9), (spec, job_id)


def test_an_app_alone_takes_the_sum_of_its_one_gpu_jobs() -> None:
    jobs = [
        SimJob("a", 0.0, 1, 100.0, PERF, app_id="A"),
        SimJob("b", 0.0, 1, 300.0, PERF, app_id="A"),
    ]
    assert isolated_app_run(jobs, shorthand_cluster("nodes:1:1")) == {"A": pytest.approx(400.0)}


def test_two_apps_on_two_gpus_get_one_gpu_each() -> None:
    # A: two 1-GPU jobs share A's 1 GPU (1/2 each); B's job has a whole GPU and ends at 100.
    # By then A's jobs did 50 each; alone, A has both GPUs: 50 more each, ends at 150.
    # (Per job, three jobs on 2 GPUs would all end at 150 - 150 - 150.)
    jobs = [SimJob("a1", 0.0, 1, 100.0, PERF, app_id="A"),
            SimJob("a2", 0.0, 1, 100.0, PERF, app_id="A"),
            SimJob("b1", 0.0, 1, 100.0, PERF, app_id="B")]  # fmt: skip
    got = isolated_app_run(jobs, shorthand_cluster("nodes:1:2"))
    assert got == {"A": pytest.approx(150.0), "B": pytest.approx(100.0)}


def test_isolated_app_share_is_water_filled_over_gangs() -> None:
    # Alone on 4 GPUs: the 1-GPU job gets 1 GPU (capped at its gang), the 4-GPU job the other 3
    # and runs at 3/4: both hold work 75 -> the 1-GPU job ends at 75, the gang then runs at full
    # speed: 75 - 56.25 = 18.75 left -> ends at 93.75. Arrival of the app: 10.
    jobs = [SimJob("small", 10.0, 1, 75.0, PERF, app_id="A"),
            SimJob("big", 10.0, 4, 75.0, PERF, app_id="A")]  # fmt: skip
    assert isolated_app_run(jobs, shorthand_cluster("nodes:1:4")) == {"A": pytest.approx(93.75)}


def test_isolated_app_run_leaves_out_apps_the_cluster_cannot_run() -> None:
    jobs = [SimJob("a", 0.0, 8, 10.0, PERF, app_id="A"),
            SimJob("b", 0.0, 1, 10.0, PERF, app_id="B"),
            SimJob("c", 5.0, 1, 10.0, PERF, app_id="B")]  # fmt: skip
    # B's jobs: b alone for 5 s (5 done), then both at full speed (one GPU each of 2).
    assert isolated_app_run(jobs, shorthand_cluster("nodes:1:2")) == {"B": pytest.approx(15.0)}


# --- metrics --------------------------------------------------------------------------------


def test_summary_has_app_keys(philly) -> None:
    cluster = shorthand_cluster("nodes:4:4")
    grouped = group_into_apps(philly, "hyperparameter", (2, 6), seed=0)
    runs = {r.result.policy: r for r in compare(grouped, cluster, ["fifo", "las", "isolated"])}
    n_apps = len({j.app_id for j in grouped})
    for run in runs.values():
        s = run.summary
        assert s["apps"] == s["apps_finished"] == n_apps
        assert s["max_rho_app"] >= s["avg_rho_app"] > 0.1
        assert s["avg_act_s"] > 0
        rhos = [a.rho for a in app_results(run.result)]
        assert len(rhos) == n_apps and min(rhos) > 0.1
        assert max(rhos) == s["max_rho_app"]
        for key in ("avg_jct_s", "max_rho", "avg_rho", "makespan_s", "gpu_time_s"):
            assert key in s  # the per-job keys stay
    # LAS time-slices apps against each other; FIFO runs each app as it comes.
    assert runs["las"].summary["max_rho_app"] > 1.0
    # Single-job apps: the app numbers are the job numbers.
    single = compare(philly, cluster, ["las", "isolated"])
    for run in single:
        s = run.summary
        assert s["apps"] == s["jobs"]
        assert s["max_rho_app"] == pytest.approx(s["max_rho"])
        assert s["avg_rho_app"] == pytest.approx(s["avg_rho"])
        assert s["avg_act_s"] == pytest.approx(s["avg_jct_s"])
    assert single[1].summary["max_rho_app"] == pytest.approx(1.0)


def test_unfinished_apps_are_counted_but_left_out() -> None:
    rows = [JobResult("a1", "A", "q", "m", 1, 0.0, 0.0, 50.0),
            JobResult("a2", "A", "q", "m", 1, 0.0, 0.0, 80.0),
            JobResult("b1", "B", "q", "m", 1, 10.0, 10.0, None)]  # fmt: skip
    result = SimResult("x", "c", 1, rows)
    attach_isolated(result, {"a1": 50.0, "a2": 80.0, "b1": 20.0}, {"A": 40.0, "B": 20.0})
    s = summarize(result)
    assert (s["apps"], s["apps_finished"]) == (2, 1)
    assert s["avg_act_s"] == 80.0 and s["max_rho_app"] == s["avg_rho_app"] == 2.0


# --- LAS over apps --------------------------------------------------------------------------


def _view(job_id: str, app_id: str, attained: float, app_attained: float | None) -> JobView:
    return JobView(job_id, app_id, "q", 0.0, 1, attained_gpu_s=attained, perf=PERF,
                   app_attained_gpu_s=app_attained)  # fmt: skip


def test_las_ranks_by_the_apps_service() -> None:
    cluster = shorthand_cluster("nodes:1:1")
    las = make_policy("las")
    # App A's three jobs have 10 GPU-s each (30 in all); app B's one job has 20.
    per_app = (_view("a1", "A", 10.0, 30.0), _view("a2", "A", 10.0, 30.0),
               _view("a3", "A", 10.0, 30.0), _view("b1", "B", 20.0, 20.0))  # fmt: skip
    assert set(las.decide(Snapshot(0.0, cluster, per_app)).allocation) == {"b1"}
    per_job = tuple(_view(v.job_id, v.app_id, v.attained_gpu_s, None) for v in per_app)
    assert set(las.decide(Snapshot(0.0, cluster, per_job)).allocation) == {"a1"}


def test_las_in_the_simulator_shares_between_apps() -> None:
    """1 GPU, 10 s rounds: app A's three 10 s jobs against app B's one 30 s job. Per app, A and
    B take turns (A: 0-10, 20-30, 40-50; B: 10-20, 30-40, 50-60); per job, A's jobs would all
    run first (B waiting until 30)."""
    jobs = [SimJob(f"a{i}", 0.0, 1, 10.0, PERF, app_id="A") for i in (1, 2, 3)]
    jobs.append(SimJob("b1", 0.0, 1, 30.0, PERF, app_id="B"))
    seen = []

    def check(snap: Snapshot, _decision) -> None:
        for v in snap.jobs:
            seen.append((snap.now, v.job_id, v.app_attained_gpu_s))

    res = simulate(jobs, shorthand_cluster("nodes:1:1"), make_policy("las"), round_s=10.0,
                   on_decision=check)  # fmt: skip
    finish = {r.job_id: r.finish_s for r in res.jobs}
    assert finish == pytest.approx({"a1": 10.0, "a2": 30.0, "a3": 50.0, "b1": 60.0})
    assert next(r for r in res.jobs if r.job_id == "b1").start_s == 10.0
    # At t = 20: a1 finished with 10 GPU-s (still A's), b1 has run 10.
    at_20 = {job: app for t, job, app in seen if t == 20.0}
    assert at_20 == {"a2": 10.0, "a3": 10.0, "b1": 10.0}


# --- command line ---------------------------------------------------------------------------


def test_compare_with_hyperparameter_apps(tmp_path, capsys) -> None:
    out = tmp_path / "c.json"
    code = main(["compare", *PHILLY, "--app-kind", "hyperparameter", "--jobs-per-app", "2-6",
                 "--policies", "fifo,las", "--no-progress", "--json", str(out)])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    header = captured.out.splitlines()[0]
    assert "max ρ (app)" in header and "avg ρ (app)" in header and "avg ACT s" in header
    assert "hyperparameter apps" in captured.err
    runs = json.loads(out.read_text())["runs"]
    assert [r["policy"] for r in runs] == ["fifo", "las"]
    for r in runs:
        for key in ("max_rho_app", "avg_rho_app", "avg_act_s", "apps", "max_rho", "avg_jct_s"):
            assert key in r, key
        assert 1 < r["apps"] < r["jobs"]


def test_simulate_successive_halving_writes_per_app_rows(tmp_path, capsys) -> None:
    out = tmp_path / "s.json"
    assert main(["simulate", *PHILLY, "--app-kind", "successive-halving", "--policy", "las",
                 "--no-progress", "--json", str(out)]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert len(doc["per_app"]) == doc["apps"] and len(doc["per_job"]) == doc["jobs"]
    assert max(a["rho"] for a in doc["per_app"]) == pytest.approx(doc["max_rho_app"])
    capsys.readouterr()
    assert main(["simulate", *PHILLY, "--policy", "las", "--no-progress"]) == 0
    assert "ρ (app)" not in capsys.readouterr().out  # single: the table as before


@pytest.mark.parametrize(
    ("value", "message"), [("5-2", "1 <= A <= B"), ("0-3", "1 <= A <= B"), ("a-b", "A-B")]
)
def test_bad_jobs_per_app_exits_2(value: str, message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", *PHILLY, "--app-kind", "hyperparameter", "--jobs-per-app", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--jobs-per-app" in err and message in err


def test_help_explains_the_app_kinds(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for kind in ("single", "hyperparameter", "successive-halving", "Workload 1", "Workload 2"):
        assert kind in text
