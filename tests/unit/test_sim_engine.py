"""The event-driven simulator, ``arbiter.sim.engine``: cluster shorthands, invariants every
policy must keep on random traces, determinism, rejection of bad decisions, ``isolated_run``."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from dataclasses import dataclass

import pytest
from support.sim import PERF, SPANS, Invariants, random_trace

from arbiter.cluster import Cluster, ClusterSpecError, load_cluster, shorthand_cluster
from arbiter.datasets import data_root
from arbiter.placement import placement_of
from arbiter.policies import make_policy
from arbiter.policies.base import Decision, PolicyError, Snapshot, check_decision, ideal_rate
from arbiter.sim.engine import isolated_rate, isolated_run, simulate
from arbiter.sim.perf import GavelModel, SimJob

# --- cluster shorthands ---------------------------------------------------------------------


def test_gavel_shorthand() -> None:
    for cluster in (shorthand_cluster("gavel:4:4:4"), load_cluster("gavel:4:4:4")):
        assert cluster.num_gpus == 12 and len(cluster.machines) == 12
        assert all(m.num_gpus == 1 for m in cluster.machines)
        assert Counter(g.gpu_type for g in cluster.gpus) == {"v100": 4, "p100": 4, "k80": 4}
        assert len({g.machine for g in cluster.gpus}) == 12
        # One rack per GPU type.
        assert {g.gpu_type: g.rack for g in cluster.gpus} == {
            "v100": "rack-v100", "p100": "rack-p100", "k80": "rack-k80",
        }  # fmt: skip
    lopsided = shorthand_cluster("gavel:3:0:1")
    assert Counter(g.gpu_type for g in lopsided.gpus) == {"v100": 3, "k80": 1}


def test_nodes_shorthand() -> None:
    for cluster in (shorthand_cluster("nodes:16:4"), load_cluster("nodes:16:4")):
        assert cluster.num_gpus == 64 and len(cluster.machines) == 16
        per_machine = Counter(g.machine for g in cluster.gpus)
        assert len(per_machine) == 16 and set(per_machine.values()) == {4}
        assert len(cluster.racks) == 1  # racks of at most 16 machines
    big = shorthand_cluster("nodes:40:2")
    assert big.num_gpus == 80 and len(big.racks) == 3
    assert Counter(m.rack for m in big.machines) == {"rack-00": 16, "rack-01": 16, "rack-02": 8}


@pytest.mark.parametrize(
    "spec",
    [
        "gavel:1:2",
        "gavel:0:0:0",
        "gavel:1:2:3:4",
        "gavel:-1:2:3",
        "nodes:0:4",
        "nodes:4:0",
        "nodes:a:b",
        "nodes:4",
        "gavel:x:1:1",
        "racks:1:1",
    ],
)
def test_bad_shorthands(spec: str) -> None:
    with pytest.raises(ClusterSpecError) as exc:
        shorthand_cluster(spec)
    msg = str(exc.value)
    assert spec in msg and "gavel:V:P:K" in msg and "nodes:N:G" in msg
    if spec.split(":")[0] in ("gavel", "nodes"):  # load_cluster routes these to the shorthand
        with pytest.raises(ClusterSpecError, match="gavel:V:P:K"):
            load_cluster(spec)


# --- random traces, invariants --------------------------------------------------------------


def _run(name: str, jobs, cluster, *, partial=False, conserving=False, **kw):
    inv = Invariants(cluster, jobs, partial=partial, conserving=conserving)
    res = simulate(jobs, cluster, make_policy(name, **kw.pop("knobs", {})), on_decision=inv, **kw)
    inv.check_result(jobs, res)
    return res, inv


@pytest.mark.parametrize("seed", range(20))
def test_fifo_invariants_and_work_conservation(seed: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(seed, 30, (1, 1, 2, 3, 4, 8), SPANS[seed % 3])
    jobs.append(SimJob("huge", 5, 9, 10, PERF))
    res, _ = _run("fifo", jobs, cluster, conserving=True)
    assert res.skipped == ["huge"]
    for r in res.jobs:  # non-preemptive: one uninterrupted run on a whole gang
        assert r.preemptions == 0
        assert r.gpu_time_s == pytest.approx(r.gang * (r.finish_s - r.start_s))


@pytest.mark.parametrize("seed", range(20))
def test_las_invariants_event_mode_conserving(seed: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(100 + seed, 30, (1, 1, 2, 3, 4, 8), SPANS[seed % 3])
    _run("las", jobs, cluster, conserving=True, round_s=0)


@pytest.mark.parametrize("seed", range(12))
def test_las_invariants_round_mode(seed: int) -> None:
    cluster = shorthand_cluster("nodes:3:4")
    jobs = random_trace(200 + seed, 30, (1, 2, 4, 6, 12), SPANS[seed % 3])
    res, inv = _run("las", jobs, cluster, round_s=20.0)
    # Decisions only happen on round ticks (LAS asks for no wake-ups): multiples of 20 s.
    assert res.decisions >= 1 and all(t % 20.0 == 0 for t in inv.times)
    # GPUs are only taken at a tick; they are freed at completions, between ticks too.
    for (_, b0, h0), (t1, b1, h1) in itertools.pairwise(res.timeline):
        assert t1 % 20.0 == 0 or (b1 < b0 and h1 < h0)


@pytest.mark.parametrize("seed", range(20))
def test_yarn_cs_invariants(seed: int) -> None:
    cluster = shorthand_cluster(("nodes:2:4", "nodes:3:3")[seed % 2])
    jobs = random_trace(300 + seed, 30, (1, 2, 3, 4, 5, 8), SPANS[seed % 3])
    res, _ = _run("yarn-cs", jobs, cluster, partial=True)
    for r in res.jobs:  # never preempted; may hold GPUs idle before it starts
        assert r.preemptions == 0
        assert r.busy_gpu_s == pytest.approx(r.gang * (r.finish_s - r.start_s))


@pytest.mark.parametrize("seed", range(12))
def test_themis_invariants(seed: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(400 + seed, 12, (1, 2, 3, 4, 8), span=(50.0, 200.0, 600.0)[seed % 3])
    lease = (40.0, 13.0)[seed % 2]
    knob = (0.8, 0.8, 0.0)[seed % 3]  # f = 0: every app with unmet demand bids

    leases_ok = []

    def lease_check(snap: Snapshot, decision: Decision) -> None:
        for lease_ in decision.policy_state.book.leases:
            assert 0 < lease_.end - lease_.start <= lease + 1e-9
            assert lease_.end > snap.now
        if decision.wake_at is not None:
            assert snap.now < decision.wake_at <= snap.now + lease + 1e-9
        leases_ok.append(True)

    inv = Invariants(cluster, jobs, partial=False, conserving=False)

    def hook(snap: Snapshot, decision: Decision) -> None:
        inv(snap, decision)
        lease_check(snap, decision)

    policy = make_policy("themis", lease_s=lease, fairness_knob=knob)
    res = simulate(jobs, cluster, policy, on_decision=hook)
    inv.check_result(jobs, res)
    assert len(leases_ok) == res.decisions


def test_gavel_heterogeneous_invariants() -> None:
    """FIFO and LAS on gavel:4:4:4 with measured Gavel throughputs (gangs fit in one type)."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    kinds = sorted({eval(k) for k in table["v100"]})  # ('job type', scale factor) pairs
    kinds = [k for k in kinds if k[1] in (1, 2, 4)]
    rng = random.Random(7)
    jobs = []
    for k in range(30):
        job_type, scale = rng.choice(kinds)
        perf = GavelModel.from_table(table, job_type, scale)
        jobs.append(SimJob(f"g{k:02d}", rng.uniform(0, 2000), scale, rng.uniform(1e3, 5e4), perf))
    cluster = shorthand_cluster("gavel:4:4:4")
    for name, kw in (("fifo", {}), ("las", {"round_s": 360.0}), ("yarn-cs", {})):
        res, _ = _run(name, jobs, cluster, partial=name == "yarn-cs", **kw)
        assert not res.skipped


# --- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kw", "n"),
    [("fifo", {}, 25), ("las", {"round_s": 30.0}, 25), ("yarn-cs", {}, 25), ("themis", {}, 10)],
)
def test_deterministic(name: str, kw: dict, n: int) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(500, n, (1, 2, 3, 4, 8), span=200.0)

    def finishes(trace):
        res = simulate(trace, cluster, make_policy(name), **kw)
        return {r.job_id: (r.start_s, r.finish_s, r.preemptions) for r in res.jobs}

    first = finishes(jobs)
    assert finishes(jobs) == first
    shuffled = jobs[:]
    random.Random(1).shuffle(shuffled)
    assert finishes(shuffled) == first  # input order does not matter, only (arrival, id)


# --- bad decisions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Scripted:
    """A policy returning ``make(snapshot)`` as its allocation."""

    make: object
    name: str = "scripted"
    round_s: float | None = None

    def decide(self, snapshot: Snapshot) -> Decision:
        return Decision(self.make(snapshot))


def _ids(cluster: Cluster) -> list[str]:
    return [g.id for g in cluster.gpus]


def _two_jobs() -> list[SimJob]:
    return [SimJob("a", 0.0, 2, 10.0, PERF), SimJob("b", 0.0, 2, 10.0, PERF)]


@dataclass(frozen=True)
class ElasticScripted(Scripted):
    elastic: bool = True


@dataclass(frozen=True)
class Linear:
    """Rate = number of GPUs: a throughput curve (unlike SlowdownPerf, rated per whole gang)."""

    def rate(self, placement) -> float:
        return float(placement.num_gpus)


def test_elastic_policy_runs_partial_gangs_only_with_a_throughput_curve() -> None:
    """Under an ``elastic`` policy a job runs on a partial gang at ``perf.rate`` of its share,
    unless its perf model is rated per whole gang: then it hoards the share idle until it holds
    its gang. nodes:1:2; ``a`` (linear curve) and ``b`` (SlowdownPerf), gangs of 2, work 10.
    One GPU each until ``a`` is done: a at rate 1 ends at 10; b waits, then runs 10 s on both."""
    cluster = shorthand_cluster("nodes:1:2")
    g = _ids(cluster)
    jobs = [SimJob("a", 0.0, 2, 10.0, Linear()), SimJob("b", 0.0, 2, 10.0, PERF)]

    def one_each(s: Snapshot):
        ids = {j.job_id for j in s.jobs}
        return {"a": frozenset(g[:1]), "b": frozenset(g[1:])} if "a" in ids else {"b": frozenset(g)}

    res = {r.job_id: r for r in simulate(jobs, cluster, ElasticScripted(one_each)).jobs}
    assert (res["a"].start_s, res["a"].finish_s, res["a"].busy_gpu_s) == (0.0, 10.0, 10.0)
    assert (res["b"].start_s, res["b"].finish_s) == (10.0, 20.0)
    assert (res["b"].busy_gpu_s, res["b"].gpu_time_s) == (20.0, 30.0)  # 10 GPU-s hoarded
    # Not elastic: neither runs on one GPU, so nothing would ever happen.
    with pytest.raises(PolicyError, match="nothing scheduled"):
        simulate(jobs, cluster, Scripted(lambda s: {"a": frozenset(g[:1]), "b": frozenset(g[1:])}))


def test_double_allocation_rejected() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    g = _ids(cluster)

    def same_gpu(s: Snapshot):
        return {"a": frozenset(g[:2]), "b": frozenset(g[1:3])}

    with pytest.raises(PolicyError, match="both"):
        simulate(_two_jobs(), cluster, Scripted(same_gpu))

    # A job keeping its GPUs while another is handed one of them later.
    def steal(s: Snapshot):
        if s.now == 0:
            return {"a": frozenset(g[:2])}
        return {"a": frozenset(g[:2]), "b": frozenset(g[1:3])}

    jobs = [SimJob("a", 0.0, 2, 10.0, PERF), SimJob("b", 1.0, 2, 10.0, PERF)]
    with pytest.raises(PolicyError, match="both"):
        simulate(jobs, cluster, Scripted(steal))


def test_oversized_gang_rejected() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    with pytest.raises(PolicyError, match="gang is 2"):
        simulate(_two_jobs(), cluster, Scripted(lambda s: {"a": frozenset(_ids(cluster)[:3])}))


def test_unknown_gpu_rejected() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    alloc = {"a": frozenset({_ids(cluster)[0], "node-999/s0/g0"})}
    with pytest.raises(PolicyError, match="unknown GPU"):
        simulate(_two_jobs(), cluster, Scripted(lambda s: alloc))


def test_inactive_job_rejected() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    g = _ids(cluster)
    # "late" arrives at t=100: naming it at t=0 names a job that is not active yet.
    jobs = [SimJob("a", 0.0, 2, 10.0, PERF), SimJob("late", 100.0, 2, 10.0, PERF)]
    with pytest.raises(PolicyError, match="not active"):
        simulate(jobs, cluster, Scripted(lambda s: {"late": frozenset(g[:2])}))
    # ... and a finished job.
    done = {"a": frozenset(g[:2])}
    with pytest.raises(PolicyError, match="not active"):
        simulate(jobs, cluster, Scripted(lambda s: done))
    with pytest.raises(PolicyError, match="ghost"):
        simulate(jobs, cluster, Scripted(lambda s: {"ghost": frozenset(g[:1])}))


def test_check_decision_catches_the_same_mistakes() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    g = _ids(cluster)
    from arbiter.policies.base import JobView

    snap = Snapshot(0.0, cluster, (JobView("a", "a", "q", 0.0, 2), JobView("b", "b", "q", 0.0, 2)))
    check_decision(snap, Decision({"a": frozenset(g[:2]), "b": frozenset(g[2:])}))
    for bad in (
        {"a": frozenset(g[:2]), "b": frozenset(g[1:3])},
        {"a": frozenset(g[:3])},
        {"a": frozenset({"nope"})},
        {"c": frozenset(g[:1])},
    ):
        with pytest.raises(PolicyError):
            check_decision(snap, Decision(bad))


def test_stuck_policy_is_an_error_not_a_hang() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    with pytest.raises(PolicyError, match="nothing scheduled"):
        simulate(_two_jobs(), cluster, Scripted(lambda s: {}))
    # In round mode the ticks go on forever: max_decisions stops it.
    with pytest.raises(PolicyError, match="exceeded 50 decisions"):
        simulate(_two_jobs(), cluster, Scripted(lambda s: {}, round_s=10.0), max_decisions=50)


def test_bad_arguments() -> None:
    cluster = shorthand_cluster("nodes:1:4")
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="round_s"):
            simulate(_two_jobs(), cluster, make_policy("fifo"), round_s=bad)
    dup = [SimJob("a", 0.0, 1, 1.0, PERF), SimJob("a", 1.0, 1, 1.0, PERF)]
    with pytest.raises(ValueError, match="unique"):
        simulate(dup, cluster, make_policy("fifo"))


def test_oversized_jobs_are_skipped() -> None:
    cluster = shorthand_cluster("nodes:2:2")
    jobs = [
        SimJob("ok", 0.0, 4, 10.0, PERF),
        SimJob("too-big", 1.0, 5, 10.0, PERF),
        SimJob("later", 2.0, 1, 10.0, PERF),
    ]
    for name in ("fifo", "las", "yarn-cs", "themis"):
        res = simulate(jobs, cluster, make_policy(name), round_s=10.0 if name == "las" else None)
        assert res.skipped == ["too-big"], name
        assert [r.job_id for r in res.jobs] == ["ok", "later"]
        assert all(r.finish_s is not None for r in res.jobs)
    assert set(isolated_run(jobs, cluster)) == {"ok", "later"}


def test_empty_trace() -> None:
    res = simulate([], shorthand_cluster("nodes:1:1"), make_policy("fifo"))
    assert (res.jobs, res.decisions, res.skipped) == ([], 0, [])


# --- isolated_run ---------------------------------------------------------------------------


def test_isolated_two_one_gpu_jobs_share_one_gpu() -> None:
    # Each runs at 1/2 speed: 100 units of work take 200 s.
    jobs = [SimJob("a", 0.0, 1, 100.0, PERF), SimJob("b", 0.0, 1, 100.0, PERF)]
    assert isolated_run(jobs, shorthand_cluster("nodes:1:1")) == {"a": 200.0, "b": 200.0}


def test_isolated_gang_two_and_one_on_two_gpus() -> None:
    # N=2 on C=2: the 2-GPU job runs at min(1, 2/(2*2)) = 1/2, the 1-GPU job at min(1, 2/2) = 1.
    # b done at 100; a has done 50 by then, the other 50 alone at full speed: done at 150.
    jobs = [SimJob("a", 0.0, 2, 100.0, PERF), SimJob("b", 0.0, 1, 100.0, PERF)]
    assert isolated_run(jobs, shorthand_cluster("nodes:1:2")) == {"a": 150.0, "b": 100.0}


def test_isolated_staggered_arrivals() -> None:
    # a alone for 50 s (50 done), then both at 1/2: a needs 50 more -> 100 s -> ends at 150;
    # b has done 50 by 150, then alone -> ends at 200. JCT a = 150, b = 200 - 50 = 150.
    jobs = [SimJob("a", 0.0, 1, 100.0, PERF), SimJob("b", 50.0, 1, 100.0, PERF)]
    assert isolated_run(jobs, shorthand_cluster("nodes:1:1")) == {"a": 150.0, "b": 150.0}


def test_isolated_three_jobs_on_two_gpus() -> None:
    # N=3 one-GPU jobs on C=2: each at 2/3 speed -> 100 / (2/3) = 150 s.
    jobs = [SimJob(x, 0.0, 1, 100.0, PERF) for x in "abc"]
    got = isolated_run(jobs, shorthand_cluster("nodes:1:2"))
    assert got == pytest.approx({"a": 150.0, "b": 150.0, "c": 150.0})


def test_isolated_spread_gang_uses_the_ideal_rate() -> None:
    # A 4-GPU gang on nodes:2:2 must span 2 machines: rate 1/1.1, alone -> 110 s.
    jobs = [SimJob("a", 0.0, 4, 100.0, PERF)]
    assert isolated_run(jobs, shorthand_cluster("nodes:2:2"))["a"] == pytest.approx(110.0)


def test_isolated_rate_weights_gpu_types() -> None:
    """On gavel:4:4:2 a 1-GPU job's iso rate = (4 v100 + 4 p100 + 2 k80 readings) / 10."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    job_type = "ResNet-18 (batch size 64)"
    key = f"('{job_type}', 1)"
    v, p, k = (table[w][key]["null"] for w in ("v100", "p100", "k80"))
    cluster = shorthand_cluster("gavel:4:4:2")
    job = SimJob("g", 0.0, 1, 1000.0, GavelModel.from_table(table, job_type, 1))
    assert isolated_rate(cluster, job) == pytest.approx((4 * v + 4 * p + 2 * k) / 10)
    # A 4-GPU gang does not fit the 2 k80s: only v100 and p100 (unconsolidated) count.
    key4 = f"('{job_type}', 4)"
    v4, p4 = (table[w][key4]["null"] for w in ("v100_unconsolidated", "p100_unconsolidated"))
    job4 = SimJob("g4", 0.0, 4, 1000.0, GavelModel.from_table(table, job_type, 4))
    assert isolated_rate(cluster, job4) == pytest.approx((4 * v4 + 4 * p4) / 8)
    assert isolated_run([job4], cluster)["g4"] == pytest.approx(1000.0 / ((4 * v4 + 4 * p4) / 8))


def test_isolated_type_without_throughput_is_left_out() -> None:
    """ResNet-50 (bs 128) x2 has 0 steps/s on k80: only v100 and p100 enter the mean."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    job_type = "ResNet-50 (batch size 128)"
    key = f"('{job_type}', 2)"
    assert table["k80"][key]["null"] == 0.0
    v, p = (table[w][key]["null"] for w in ("v100_unconsolidated", "p100_unconsolidated"))
    job = SimJob("g", 0.0, 2, 1000.0, GavelModel.from_table(table, job_type, 2))
    assert isolated_rate(shorthand_cluster("gavel:4:4:4"), job) == pytest.approx((v + p) / 2)


@pytest.mark.parametrize("seed", range(5))
def test_isolated_run_against_a_brute_force_processor_sharing(seed: int) -> None:
    """Same JCTs as a naive fixed-step simulation of egalitarian processor sharing."""
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(600 + seed, 12, (1, 2, 3, 4, 8), span=200.0)
    got = isolated_run(jobs, cluster)
    c = cluster.num_gpus
    remaining = {j.job_id: j.work / isolated_rate(cluster, j) for j in jobs}  # seconds alone
    want: dict[str, float] = {}
    t = 0.0
    while len(want) < len(jobs):
        active = [j for j in jobs if j.arrival_s <= t and j.job_id not in want]
        if not active:
            t = min(j.arrival_s for j in jobs if j.job_id not in want)
            continue
        speeds = {j.job_id: min(1.0, c / (len(active) * j.gang)) for j in active}
        # Advance to the next arrival or completion exactly.
        nxt = min([j.arrival_s for j in jobs if j.arrival_s > t] + [math.inf])
        dt = min([remaining[a] / s for a, s in speeds.items()] + [nxt - t])
        for a, s in speeds.items():
            remaining[a] -= s * dt
        t += dt
        for j in active:
            if remaining[j.job_id] <= 1e-9:
                want[j.job_id] = t - j.arrival_s
    assert got == pytest.approx(want, rel=1e-9, abs=1e-6)
    # Every job's isolated JCT is at least its time alone on the ideal placement.
    for j in jobs:
        assert got[j.job_id] >= j.work / isolated_rate(cluster, j) - 1e-9


def test_isolated_rate_on_a_homogeneous_cluster_is_the_ideal_rate() -> None:
    cluster = shorthand_cluster("nodes:2:4")
    for gang in range(1, 9):
        job = SimJob("j", 0.0, gang, 1.0, PERF)
        want = 1.0 if gang <= 4 else 1 / 1.1
        assert isolated_rate(cluster, job) == pytest.approx(want)
        assert ideal_rate(cluster, gang, PERF) == pytest.approx(want)


def test_placement_of_spread_gang_in_the_engine() -> None:
    """A 3-GPU job on nodes:2:2 must span machines: 1/1.1 rate, 110 s for 100 units."""
    cluster = shorthand_cluster("nodes:2:2")
    seen = []

    def hook(snap: Snapshot, decision: Decision) -> None:
        for gpus in decision.allocation.values():
            seen.append(placement_of(cluster, gpus).per_machine)

    res = simulate(
        [SimJob("a", 0.0, 3, 100.0, PERF)], cluster, make_policy("fifo"), on_decision=hook
    )
    assert seen == [(2, 1)]
    assert res.jobs[0].finish_s == pytest.approx(110.0)
    assert res.jobs[0].placement_score == pytest.approx(1.0)  # the best a 3-gang can get


@pytest.mark.parametrize("name", ["fifo", "las", "yarn-cs", "themis"])
def test_job_no_gpu_type_can_run_is_skipped(name: str) -> None:
    """gavel:0:0:2 (two k80s) with ResNet-50 (batch size 128) x2, which has no throughput on a
    k80 (0.0 in Gavel's table), and a ResNet-18 x1 that runs there. The first can never run:
    like a gang larger than the cluster it belongs in ``skipped``; the other must finish. (The
    same happens with the real max_min_fairness.trace on gavel:0:0:12.) ``max_decisions``
    only bounds the run: LAS's ticks would otherwise go on forever."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    assert table["k80"]["('ResNet-50 (batch size 128)', 2)"]["null"] == 0.0
    jobs = [
        SimJob("r50", 0.0, 2, 100.0, GavelModel.from_table(table, "ResNet-50 (batch size 128)", 2)),
        SimJob("r18", 1.0, 1, 100.0, GavelModel.from_table(table, "ResNet-18 (batch size 64)", 1)),
    ]
    res = simulate(jobs, shorthand_cluster("gavel:0:0:2"), make_policy(name), max_decisions=2000)
    assert res.skipped == ["r50"]
    assert [(r.job_id, r.finish_s is not None) for r in res.jobs] == [("r18", True)]


def test_isolated_run_skips_a_job_no_gpu_type_can_run() -> None:
    """The isolated run leaves out the jobs ``simulate`` cannot run, as it does gangs larger
    than the cluster (ResNet-50 (batch size 128) x2 has no throughput on k80)."""
    table = json.loads((data_root() / "gavel" / "simulation_throughputs.json").read_text())
    jobs = [
        SimJob("r50", 0.0, 2, 100.0, GavelModel.from_table(table, "ResNet-50 (batch size 128)", 2)),
        SimJob("r18", 1.0, 1, 100.0, GavelModel.from_table(table, "ResNet-18 (batch size 64)", 1)),
    ]
    rate = table["k80"]["('ResNet-18 (batch size 64)', 1)"]["null"]
    got = isolated_run(jobs, shorthand_cluster("gavel:0:0:2"))
    assert got == pytest.approx({"r18": 100.0 / rate})
