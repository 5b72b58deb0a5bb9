"""Each policy on tiny traces whose JCTs are derived by hand (in the comments).

All jobs use ``SlowdownPerf()``: rate 1 on a single machine, so ``work`` is seconds of running on
one machine. (arrival, gang, work) triples name the jobs.
"""

from __future__ import annotations

import json

import pytest

from arbiter.cluster import shorthand_cluster
from arbiter.datasets import data_root
from arbiter.policies import POLICIES, make_policy
from arbiter.policies.base import Decision, Snapshot, check_decision
from arbiter.sim.engine import SimResult, isolated_run, simulate
from arbiter.sim.perf import GavelModel, SimJob, SlowdownPerf

PERF = SlowdownPerf()


def J(job_id: str, arrival: float, gang: int, work: float, queue: str = "default") -> SimJob:
    return SimJob(job_id, arrival, gang, work, PERF, queue=queue)


class Log:
    """on_decision hook recording (now, {job: #GPUs}) and checking every decision."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, dict[str, int]]] = []
        self.decisions: list[tuple[Snapshot, Decision]] = []

    def __call__(self, snap: Snapshot, decision: Decision) -> None:
        check_decision(snap, decision)
        self.entries.append((snap.now, {k: len(v) for k, v in decision.allocation.items()}))
        self.decisions.append((snap, decision))


def run(policy: str, jobs: list[SimJob], cluster: str, **kw) -> tuple[SimResult, Log]:
    log = Log()
    knobs = kw.pop("knobs", {})
    res = simulate(
        jobs, shorthand_cluster(cluster), make_policy(policy, **knobs), on_decision=log, **kw
    )
    return res, log


def jcts(res: SimResult) -> dict[str, float]:
    return {r.job_id: r.jct_s for r in res.jobs}


def starts(res: SimResult) -> dict[str, float]:
    return {r.job_id: r.start_s for r in res.jobs}


def test_policy_registry() -> None:
    assert {"fifo", "las", "yarn-cs", "themis", "tiresias", "afs-l"} <= set(POLICIES)
    assert make_policy("las").round_s == 360.0
    assert make_policy("fifo").round_s is None and make_policy("themis").round_s is None
    assert make_policy("themis", lease_s=5.0).lease_s == 5.0
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("sjf-oracle")
    with pytest.raises(ValueError, match="fifo"):
        make_policy("fifo", lease_s=3)


# --- fifo -----------------------------------------------------------------------------------


def test_fifo_head_of_line() -> None:
    """nodes:1:4, a=(0,4,100) b=(0,2,50) c=(10,2,20).

    t=0: a takes all 4 GPUs, b waits. t=10: c arrives, nothing free. t=100: a done; b and c
    start together. c done at 120, b at 150. JCT a=100, b=150, c=120-10=110.
    """
    res, log = run("fifo", [J("a", 0, 4, 100), J("b", 0, 2, 50), J("c", 10, 2, 20)], "nodes:1:4")
    assert jcts(res) == {"a": 100.0, "b": 150.0, "c": 110.0}
    assert starts(res) == {"a": 0.0, "b": 100.0, "c": 100.0}
    assert log.entries[-2:] == [(100.0, {"b": 2, "c": 2}), (120.0, {"b": 2})]


def test_fifo_backfills_past_a_big_job() -> None:
    """nodes:1:4, a=(0,2,100) b=(0,4,50) c=(10,2,20).

    t=0: a takes 2; b (4) does not fit the 2 free and waits. t=10: c (2) fits and starts in front
    of b (work conservation), done at 30. b starts when a ends at 100, done at 150.
    JCT a=100, b=150, c=20.
    """
    res, _ = run("fifo", [J("a", 0, 2, 100), J("b", 0, 4, 50), J("c", 10, 2, 20)], "nodes:1:4")
    assert jcts(res) == {"a": 100.0, "b": 150.0, "c": 20.0}
    assert starts(res)["b"] == 100.0
    assert all(r.preemptions == 0 for r in res.jobs)
    # 2 GPUs idle in [30, 100): busy 2 of 4, nobody holds them.
    assert (30.0, 2, 2) in res.timeline


def test_strict_fifo_does_not_backfill() -> None:
    """The same trace with backfill=False (Gavel's FIFO): c waits behind b.

    a runs 0-100; b (4 GPUs) starts at 100, done 150; c starts at 150, done 170 (JCT 160).
    """
    jobs = [J("a", 0, 2, 100), J("b", 0, 4, 50), J("c", 10, 2, 20)]
    res, _ = run("fifo", jobs, "nodes:1:4", knobs={"backfill": False})
    assert jcts(res) == {"a": 100.0, "b": 150.0, "c": 160.0}


def test_fifo_spread_gang_pays_the_locality_slowdown() -> None:
    """nodes:2:2, a=(0,1,10) b=(0,3,110) c=(0,1,10).

    a takes one GPU of node-000, b needs 3 and gets node-001 + the other GPU of node-000:
    cross-machine, rate 1/1.1, 110 units take 121 s. c waits for a (done at 10), runs 10-20.
    """
    res, _ = run("fifo", [J("a", 0, 1, 10), J("b", 0, 3, 110), J("c", 0, 1, 10)], "nodes:2:2")
    assert jcts(res) == pytest.approx({"a": 10.0, "b": 121.0, "c": 20.0})
    b = next(r for r in res.jobs if r.job_id == "b")
    assert b.placement_score == pytest.approx(1.0)  # 3 GPUs cannot be on one 2-GPU machine


# --- las ------------------------------------------------------------------------------------


def test_las_time_slices_in_rounds() -> None:
    """nodes:1:4, round 10 s, a=(0,4,30) b=(0,4,30) c=(5,2,10).

    Rank = (attained GPU-s, arrival, id); admit while gangs fit in 4 GPUs.
    t=0:  a 0, b 0 -> a (id).                 a runs [0,10)  -> a 40 GPU-s, 20 work left
    t=10: b 0, c 0 (arrived 5), a 40 -> b fills the cluster; c waits.  b runs [10,20)
    t=20: c 0, a 40, b 40 -> c (2 GPUs); a, b (4) do not fit the other 2: they idle.
          c runs [20,30) and is done at 30 (JCT 25).
    t=30: a 40, b 40 -> a [30,40); t=40: b [40,50); t=50: a [50,60) done (JCT 60);
    t=60: b [60,70) done (JCT 70).
    """
    res, log = run(
        "las", [J("a", 0, 4, 30), J("b", 0, 4, 30), J("c", 5, 2, 10)], "nodes:1:4", round_s=10
    )
    assert jcts(res) == {"a": 60.0, "b": 70.0, "c": 25.0}
    assert [e[1] for e in log.entries] == [
        {"a": 4}, {"b": 4}, {"c": 2}, {"a": 4}, {"b": 4}, {"a": 4}, {"b": 4},
    ]  # fmt: skip
    assert [e[0] for e in log.entries] == [0, 10, 20, 30, 40, 50, 60]
    by_id = {r.job_id: r for r in res.jobs}
    assert (by_id["a"].preemptions, by_id["b"].preemptions, by_id["c"].preemptions) == (2, 2, 0)
    assert by_id["a"].busy_gpu_s == by_id["b"].busy_gpu_s == 120.0  # 30 s x 4 GPUs each
    # FIFO on the same trace: a [0,30), b [30,60) (it holds all 4 GPUs, so c cannot
    # backfill), c [60,70). JCT a=30, b=60, c=65.
    fifo, _ = run("fifo", [J("a", 0, 4, 30), J("b", 0, 4, 30), J("c", 5, 2, 10)], "nodes:1:4")
    assert jcts(fifo) == {"a": 30.0, "b": 60.0, "c": 65.0}


def test_las_round_mode_arrivals_and_frees_wait_for_the_tick() -> None:
    # a=(3,1,10) on an idle cluster: first decision at the tick t=10, done at 20.
    res, _ = run("las", [J("a", 3, 1, 10)], "nodes:1:4", round_s=10)
    assert (starts(res), jcts(res)) == ({"a": 10.0}, {"a": 17.0})
    # a=(0,4,5) b=(1,4,10): a frees the GPUs at 5 but b starts only at the tick t=10.
    res, _ = run("las", [J("a", 0, 4, 5), J("b", 1, 4, 10)], "nodes:1:4", round_s=10)
    assert starts(res) == {"a": 0.0, "b": 10.0}
    assert jcts(res) == {"a": 5.0, "b": 19.0}
    assert (5.0, 0, 0) in res.timeline


def test_las_event_mode_preempts_on_arrival() -> None:
    """round_s=0 (event mode), nodes:1:4, a=(0,4,30) b=(0,4,30) c=(5,2,10).

    t=0: a runs. t=5 (c arrives): a has 20 GPU-s, b 0, c 0 -> b fills the cluster, a is
    preempted with 25 left. t=35 (b done): c 0 < a 20 -> c runs on 2 GPUs, a (4) cannot fit.
    t=45 (c done): a runs its last 25 -> done at 70. JCT a=70, b=35, c=40.
    """
    res, _ = run(
        "las", [J("a", 0, 4, 30), J("b", 0, 4, 30), J("c", 5, 2, 10)], "nodes:1:4", round_s=0
    )
    assert jcts(res) == {"a": 70.0, "b": 35.0, "c": 40.0}
    assert {r.job_id: r.preemptions for r in res.jobs} == {"a": 1, "b": 0, "c": 0}


# --- yarn-cs --------------------------------------------------------------------------------


def test_yarn_cs_container_hoarding() -> None:
    """nodes:1:4, one queue, a=(0,2,100) b=(5,4,50) c=(10,2,20).

    t=0: a gets 2 containers and runs. t=5: b gets the 2 free containers and holds them idle
    (it needs 4). t=10: c arrives, nothing is free (FIFO would have started it). t=100: a done,
    b gets 2 more and runs [100,150). t=150: c runs [150,170).
    JCT a=100, b=145, c=160. b holds 2 idle GPUs for 95 s: 190 + 4 x 50 = 390 GPU-s held, 200 busy.
    """
    trace = [J("a", 0, 2, 100), J("b", 5, 4, 50), J("c", 10, 2, 20)]
    res, log = run("yarn-cs", trace, "nodes:1:4")
    assert jcts(res) == {"a": 100.0, "b": 145.0, "c": 160.0}
    b = next(r for r in res.jobs if r.job_id == "b")
    assert (b.start_s, b.gpu_time_s, b.busy_gpu_s) == (100.0, 390.0, 200.0)
    assert log.entries[1] == (5.0, {"a": 2, "b": 2})  # b hoards while a runs
    assert (5.0, 2, 4) in res.timeline  # 4 GPUs held, 2 busy
    fifo, _ = run("fifo", trace, "nodes:1:4")  # no hoarding: c backfills at 10, done at 30
    assert jcts(fifo) == {"a": 100.0, "b": 145.0, "c": 20.0}


def test_yarn_cs_deadlock_is_broken_by_the_youngest_hoarder() -> None:
    """nodes:1:4, queues qa / qb, a=(0,2,100,qa) b=(1,3,10,qb) c=(2,3,10,qa).

    t=0: a runs on 2. t=1: b takes the 2 free (holds 2 of 3). t=2: nothing free for c.
    t=100: a done, 2 free. Guaranteed 2 per queue; qa uses 0 < qb 2 -> c takes both (2 of 3).
    All 4 GPUs are hoarded and nobody runs: c (youngest) gives 1 to b (oldest), b runs
    [100,110); then c gets 2 more and runs [110,120). JCT a=100, b=109, c=118.
    """
    trace = [J("a", 0, 2, 100, "qa"), J("b", 1, 3, 10, "qb"), J("c", 2, 3, 10, "qa")]
    res, log = run("yarn-cs", trace, "nodes:1:4")
    assert jcts(res) == {"a": 100.0, "b": 109.0, "c": 118.0}
    assert (100.0, {"b": 3, "c": 1}) in log.entries
    c = next(r for r in res.jobs if r.job_id == "c")
    assert c.gpu_time_s == 10.0 + 30.0  # 1 GPU held idle in [100,110), then 3 x 10


def test_yarn_cs_queue_capacity_order() -> None:
    """nodes:1:4, five 1-GPU jobs at t=0: a1 a2 a3 in queue aa, b1 b2 in queue bb.

    Each queue is guaranteed 2 GPUs; a free GPU goes to the queue with the lowest used /
    guaranteed (ties by name): a1 (aa 0 = bb 0), b1 (bb 0 < aa .5), a2 (tie .5), b2 (bb .5 < 1).
    a3 waits although it is ahead of b1 and b2 in arrival order. All runs take 100 s.
    FIFO instead runs a1 a2 a3 b1 and makes b2 wait.
    """
    trace = [J(x, 0, 1, 100, x[0] * 2) for x in ("a1", "a2", "a3", "b1", "b2")]
    res, _ = run("yarn-cs", trace, "nodes:1:4")
    assert jcts(res) == {"a1": 100.0, "a2": 100.0, "a3": 200.0, "b1": 100.0, "b2": 100.0}
    fifo, _ = run("fifo", trace, "nodes:1:4")
    assert jcts(fifo) == {"a1": 100.0, "a2": 100.0, "a3": 100.0, "b1": 100.0, "b2": 200.0}


def test_yarn_cs_elastic_beyond_capacity() -> None:
    # One busy queue may use the whole cluster (no hard limit): 4 jobs of qa on 4 GPUs while qb
    # is idle; qb's job arriving later waits (no preemption) until a GPU frees.
    trace = [J(f"a{k}", 0, 1, 100, "qa") for k in range(4)] + [J("b", 10, 1, 10, "qb")]
    res, _ = run("yarn-cs", trace, "nodes:1:4")
    assert jcts(res) == {"a0": 100.0, "a1": 100.0, "a2": 100.0, "a3": 100.0, "b": 100.0}


# --- themis ---------------------------------------------------------------------------------


def test_themis_single_app_renews_its_lease() -> None:
    """nodes:1:2, lease 10 s, a=(0,2,25): leases [0,10) [10,20) [20,30) on the same GPUs, the
    job is never interrupted and ends at 25."""
    res, log = run("themis", [J("a", 0, 2, 25)], "nodes:1:2", knobs={"lease_s": 10.0})
    assert jcts(res) == {"a": 25.0}
    assert res.jobs[0].preemptions == 0
    assert [t for t, _ in log.entries] == [0.0, 10.0, 20.0]
    assert [d.wake_at for _, d in log.decisions] == [10.0, 20.0, 30.0]


def test_themis_two_apps_alternate_leases() -> None:
    """nodes:1:2, lease 10 s, fairness knob 0.8, a=(0,2,25) b=(0,2,25).

    Only one app fits at a time. With N=2 apps, max(1, ceil(0.2 N)) = 1 app bids per round: the
    one with the highest waiting ρ = (elapsed + lease + remaining / ideal rate) / T_id, where
    T_id = T_cluster x N_avg = (2 x 25 GPU-s / 2 GPUs) x 2 = 50 for both; ties go to the app
    that bid least recently, then to the id.
    t=0:  a 35/50, b 35/50, tie, neither bid -> a wins [0,10).
    t=10: a (10+10+15)/50 = .7, b (10+10+25)/50 = .9 -> b [10,20).
    t=20: a (20+10+15)/50 = .9, b (20+10+15)/50 = .9, tie, a bid longer ago -> a [20,30).
    t=30: a (30+10+5)/50 = .9, b (30+10+15)/50 = 1.1 -> b [30,40).
    t=40: a 1.1, b 1.1, tie -> a; it finishes at 45 (10+10+5). b alone gets [45,55), done at 50.
    JCT a=45, b=50, each preempted twice.
    """
    res, log = run(
        "themis", [J("a", 0, 2, 25), J("b", 0, 2, 25)], "nodes:1:2", knobs={"lease_s": 10.0}
    )
    assert jcts(res) == {"a": 45.0, "b": 50.0}
    assert [(t, list(a)) for t, a in log.entries] == [
        (0.0, ["a"]), (10.0, ["b"]), (20.0, ["a"]), (30.0, ["b"]), (40.0, ["a"]), (45.0, ["b"]),
    ]  # fmt: skip
    assert {r.job_id: r.preemptions for r in res.jobs} == {"a": 2, "b": 2}


def test_themis_three_apps_structure() -> None:
    """nodes:1:4, lease 10 s, a=(0,2,25) b=(0,2,25) c=(0,4,10): the exact order depends on the
    seeded leftover draw, so check structure: leases never exceed 10 s, allocations only change
    at lease boundaries or completions, both 2-GPU apps run side by side at some point, c runs
    only with all 4 GPUs, everything finishes within the bound below."""
    lease = 10.0
    trace = [J("a", 0, 2, 25), J("b", 0, 2, 25), J("c", 0, 4, 10)]
    res, log = run("themis", trace, "nodes:1:4", knobs={"lease_s": lease})
    finish = {r.job_id: r.finish_s for r in res.jobs}
    assert all(f is not None for f in finish.values())
    for snap, d in log.decisions:
        for lease_ in d.policy_state.book.leases:
            assert lease_.end - lease_.start <= lease + 1e-9
        assert d.wake_at is None or d.wake_at <= snap.now + lease + 1e-9
        # A decision happens only at a lease boundary (multiple of 10 here) or a completion.
        assert snap.now % lease == 0 or snap.now in finish.values()
    assert any(a == {"a": 2, "b": 2} for _, a in log.entries)  # split 2 + 2 by lease
    assert all(a.get("c", 4) == 4 for _, a in log.entries)
    # Lower bounds: own work; the cluster does 140 GPU-s of work on 4 GPUs -> makespan >= 35.
    # Upper bound: that plus one lease of delay per app.
    assert all(res_j.jct_s >= j.work for res_j, j in zip(res.jobs, trace, strict=True))
    assert 35.0 <= max(finish.values()) <= 35.0 + 3 * lease
    # c (gang 4) ran for exactly 10 s on 4 GPUs.
    c = next(r for r in res.jobs if r.job_id == "c")
    assert c.busy_gpu_s == 40.0


def test_themis_runs_a_gang_that_only_fits_across_gpu_types() -> None:
    """gavel:2:2:2, one ResNet-50 (batch size 128) x4 job: no GPU type has 4 GPUs, so the gang
    must mix types; the job has no throughput on k80 (0.0 in Gavel's table) but runs on
    2 v100 + 2 p100 at min(v100, p100) unconsolidated steps/s. FIFO, LAS and yarn-cs run it;
    Themis must too (finish at work / that rate; its default 600 s lease outlasts the job)."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    job_type = "ResNet-50 (batch size 128)"
    key = f"('{job_type}', 4)"
    assert table["k80"][key]["null"] == 0.0
    rate = min(table["v100_unconsolidated"][key]["null"], table["p100_unconsolidated"][key]["null"])
    job = SimJob("r50", 0.0, 4, 1000.0, GavelModel.from_table(table, job_type, 4))
    cluster = shorthand_cluster("gavel:2:2:2")
    for name in ("fifo", "las", "yarn-cs", "themis"):
        res = simulate([job], cluster, make_policy(name), max_decisions=1000)
        assert res.jobs[0].finish_s == pytest.approx(1000.0 / rate), name


# --- isolated / rho -------------------------------------------------------------------------


def test_rho_against_isolated() -> None:
    """FIFO trace a=(0,4,100) b=(0,2,50) c=(10,2,20) on nodes:1:4 against the isolated run.

    Isolated (C=4): t in [0,10): N=2, a at min(1, 4/(2*4)) = 1/2, b at min(1, 4/4) = 1.
    At 10: a has 5 done, b 10; c arrives, N=3: a at 4/12 = 1/3, b and c at 4/6 = 2/3.
    c (20 left) and b (40 left): c first, after 30 s (t=40); then a has 15 done, b 30 done.
    N=2: a at 1/2, b at 1: b (20 left) done at t=60, a at 25 done. a alone: 75 left -> t=135.
    Isolated JCTs: a=135, b=60, c=30. FIFO JCTs a=100, b=150, c=110.
    """
    trace = [J("a", 0, 4, 100), J("b", 0, 2, 50), J("c", 10, 2, 20)]
    cluster = shorthand_cluster("nodes:1:4")
    iso = isolated_run(trace, cluster)
    assert iso == pytest.approx({"a": 135.0, "b": 60.0, "c": 30.0})
    res = simulate(trace, cluster, make_policy("fifo"))
    for r in res.jobs:
        r.isolated_jct_s = iso[r.job_id]
    assert {r.job_id: r.rho for r in res.jobs} == pytest.approx(
        {"a": 100 / 135, "b": 150 / 60, "c": 110 / 30}
    )
