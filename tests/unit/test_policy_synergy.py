"""Synergy (seed 003, spec ``synergy.md``): the CPU/memory cluster model, sensitivity matrices,
the engine's CPU/memory grants, Synergy-Tune and Synergy-Opt.

Hand-derived numbers are in the docstrings. Unless said otherwise, sensitivities are built by
hand: ``W(cpus, GB)`` per GPU, 1 at the proportional point of Synergy's server (3 CPUs, 62.5 GB
per GPU), and work is seconds at that point on one machine.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.cluster import (
    Cluster,
    ClusterSpecError,
    Machine,
    load_cluster,
    parse_cluster,
    shorthand_cluster,
)
from arbiter.datasets import data_root
from arbiter.placement import placement_of
from arbiter.policies import POLICIES, make_policy
from arbiter.policies.base import (
    Decision,
    JobView,
    PolicyError,
    Snapshot,
    check_decision,
    check_grants,
    ideal_rate,
    machine_usage,
)
from arbiter.policies.synergy import JobRequest, SynergyState, opt_pack, tune_pack
from arbiter.sim.engine import simulate
from arbiter.sim.perf import (
    SYNERGY_MODELS,
    Sensitivity,
    SimJob,
    SlowdownPerf,
    SynergyPerf,
    sim_jobs,
    synergy_perf,
)
from arbiter.sim.run import load_jobs
from arbiter.traces import TraceError, TraceJob, read_trace

SERVER = "nodes:2:8:24:500"  # Synergy's evaluation server (8 GPUs, 24 CPUs, 500 GB), L285


ORDERS = ["fifo", "las", "themis", "srtf"]  # the orderings the paper evaluates (FTF = themis)


def sens(cpus, mem, rows) -> Sensitivity:
    return Sensitivity(tuple(map(float, cpus)), tuple(map(float, mem)), tuple(map(tuple, rows)))


FLAT = Sensitivity.flat(1.0, 20.0)  # insensitive: 1 CPU and 20 GB per GPU are enough


def job(job_id: str, arrival: float, gang: int, work: float, s: Sensitivity) -> SimJob:
    return SimJob(job_id, arrival, gang, work, SynergyPerf(s))


class Hook:
    """on_decision: the shared checks (GPUs and CPU/memory capacity) and R3 for every job."""

    def __init__(self) -> None:
        self.log: list[tuple[Snapshot, Decision]] = []

    def __call__(self, snap: Snapshot, decision: Decision) -> None:
        check_decision(snap, decision)
        views = {j.job_id: j for j in snap.jobs}
        for job_id, gpus in decision.allocation.items():
            s = views[job_id].sensitivity
            if s is None or len(gpus) < views[job_id].gang:
                continue
            prop = snap.cluster.proportional_share(gpus)
            grant = decision.grants.get(job_id, prop)
            n = len(gpus)
            # R3, the no-slowdown rule: never below the GPU-proportional throughput.
            assert s.speed(grant[0] / n, grant[1] / n) >= s.speed(prop[0] / n, prop[1] / n) - 1e-9
        self.log.append((snap, decision))

    def at(self, t: float) -> Decision:
        return next(d for s, d in self.log if s.now == t)


def jcts(res) -> dict[str, float]:
    return {r.job_id: r.jct_s for r in res.jobs}


# --- the cluster model ----------------------------------------------------------------------


def test_proportional_share_arithmetic() -> None:
    """Spec §12 facts 1, 2, 4. A (4 GPU, 16 CPU, 200 GB) server gives a 1-GPU job 4 CPUs and
    50 GB (L69); an (8, 24, 500) server gives a 4-GPU job 12 CPUs and 250 GB (Table 2); a
    (2 GPU, 12 CPU, 300 GB) grant split over two servers is (1, 6, 150) on each (L223)."""
    small = Cluster.from_machines("s", [Machine("m", "r", 1, 4, "gpu", 16, 200 * 1024)])
    assert small.proportional_share(["m/s0/g0"]) == (4.0, 50.0)
    big = shorthand_cluster(SERVER)
    ids = [g.id for g in big.gpus]
    assert big.proportional_share(ids[:4]) == (12.0, 250.0)
    assert big.proportional_share([ids[0], ids[8]]) == (6.0, 125.0)  # 3 + 3, 62.5 + 62.5
    usage = machine_usage(big, {"j": frozenset({ids[0], ids[8]})}, {"j": (12.0, 300.0)})
    assert usage == {"node-000": [1.0, 6.0, 150.0], "node-001": [1.0, 6.0, 150.0]}


def test_cpu_and_memory_defaults_and_declarations() -> None:
    """Undeclared machines get Synergy's default ratios (3 CPUs, 62.5 GB per GPU); declared
    ``vcores`` / ``memory_mb`` win; QOOP's ``vcores`` / ``memory_mb`` stay as declared."""
    plain = shorthand_cluster("nodes:2:8")
    m = plain.machines[0]
    assert (m.cpus, m.mem_gb, m.vcores, m.memory_mb) == (24.0, 500.0, 0, 0)
    assert plain.vcores == 0 and plain.memory_mb == 0  # unchanged for QOOP
    four = shorthand_cluster("nodes:3:8:32:768")
    assert [(x.cpus, x.mem_gb, x.vcores, x.memory_mb) for x in four.machines] == [
        (32.0, 768.0, 32, 768 * 1024)
    ] * 3
    assert load_cluster("nodes:3:8:32:768") == four
    testbed = load_cluster("themis-testbed")  # declares vcores 12 / 24, memory 112 / 224 GB
    nc12 = next(x for x in testbed.machines if x.name.startswith("nc12"))
    assert (nc12.cpus, nc12.mem_gb) == (12.0, 112.0)
    spec = parse_cluster(
        {"name": "y", "racks": [{"name": "r", "machines": [
            {"name": "a", "gpus_per_slot": 4, "vcores": 20},
            {"name": "b", "gpus_per_slot": 2, "memory_mb": 51200},
        ]}]}
    )  # fmt: skip
    assert [(x.cpus, x.mem_gb) for x in spec.machines] == [(20.0, 250.0), (6.0, 50.0)]
    for bad in ("nodes:2:8:24", "nodes:2:8:0:500", "nodes:2:8:24:500:1"):
        with pytest.raises(ClusterSpecError, match="nodes:N:G:C:M"):
            shorthand_cluster(bad)


# --- sensitivity matrices and the Synergy perf model ----------------------------------------


def test_sensitivity_interpolation() -> None:
    """ResNet-18's profile (reference code, spec §15): CPU rows 0.37 0.72 1 1.3 1.53 1.75 2.4 2.4
    2.4 at 1 2 3 4 5 6 9 12 24 CPUs, flat in memory from 62.5 GB, 0.1 at 20.83 GB."""
    w = synergy_perf("res18").sensitivity
    assert [w.speed(c, 62.5) for c in (1, 2, 3, 4, 5, 6, 9, 12, 24)] == [
        0.37, 0.72, 1.0, 1.3, 1.53, 1.75, 2.4, 2.4, 2.4,
    ]  # fmt: skip
    assert w.speed(7.5, 500.0) == pytest.approx(1.75 + (2.4 - 1.75) / 2)  # bilinear, flat > 250
    assert w.speed(3, 20.83) == pytest.approx(0.1)
    assert w.speed(3, (20.83 + 62.5) / 2) == pytest.approx(0.55)
    assert w.speed(0.5, 62.5) == pytest.approx(0.37 / 2)  # below the grid: linear to 0
    assert w.speed(48, 62.5) == 2.4  # saturated
    with pytest.raises(ValueError, match="decrease"):
        sens((1, 2), (10,), ((1.0,), (0.5,)))
    with pytest.raises(ValueError, match="increasing"):
        sens((2, 1), (10,), ((1.0,), (1.0,)))


@pytest.mark.parametrize(
    ("model", "best", "capped"),
    [  # spec §15's table; "capped": a 4-GPU job on a 24-CPU, 500-GB server (<= 6, 125 per GPU)
        ("alexnet", (12.0, 125.0), (6.0, 62.5)),
        ("shufflenet", (12.0, 125.0), (6.0, 62.5)),
        ("res18", (9.0, 62.5), (6.0, 62.5)),
        ("m5", (6.0, 187.5), (6.0, 125.0)),
        ("mobilenet", (6.0, 62.5), (6.0, 62.5)),
        ("res50", (4.0, 62.5), (4.0, 62.5)),
        ("deepspeech", (3.0, 62.5), (3.0, 62.5)),
        ("gnmt", (1.0, 20.83), (1.0, 20.83)),
        ("transformer", (1.0, 20.83), (1.0, 20.83)),
    ],
)
def test_best_case_demands_of_the_models(model: str, best, capped) -> None:
    w = synergy_perf(model).sensitivity
    assert w.best_case(floor=1.0) == best
    assert w.best_case(floor=1.0, cap=(24 / 4, 500 / 4)) == capped


def test_best_case_keeps_the_no_slowdown_floor() -> None:
    """W = 0.95 / 1 / 1.04 at 1 / 3 / 6 CPUs. With eps = 0.1 the saturation target is
    0.9 x 1.04 = 0.936, which 1 CPU meets, but 1 CPU is slower than the proportional 3: the
    floor (W_prop = 1) moves the demand to 3 CPUs."""
    w = sens((1, 3, 6), (62.5,), ((0.95,), (1.0,), (1.04,)))
    assert w.best_case(floor=0.0, eps=0.1) == (1.0, 62.5)
    assert w.best_case(floor=1.0, eps=0.1) == (3.0, 62.5)
    assert w.best_case(floor=1.0) == (6.0, 62.5)


def test_synergy_perf_rates() -> None:
    cluster = shorthand_cluster("nodes:2:4")
    perf = synergy_perf("res18")
    one = placement_of(cluster, [g.id for g in cluster.gpus][:4])
    spread = placement_of(cluster, [g.id for g in cluster.gpus][2:6])
    assert perf.rate(one) == 1.0  # the reference point (3 CPUs, 62.5 GB per GPU)
    assert perf.rate_with(one, 36.0, 250.0) == 2.4  # 9 CPUs per GPU
    assert perf.rate_with(spread, 36.0, 250.0) == pytest.approx(2.4 / 1.1)  # locality model


def test_sim_jobs_with_synergy_sensitivity() -> None:
    """Line 1 of the shipped trace: job 0, alexnet, 3349 iterations of 0.6 s = 2009.4 s."""
    trace = read_trace(data_root() / "synergy" / "static_100job_6_3_1100.0.csv", "synergy")
    sims = sim_jobs(trace, synergy_sensitivity=True)
    first = sims[0]
    assert (first.model, first.gang, first.work) == ("alexnet", 1, pytest.approx(3349 * 0.6))
    assert first.perf is synergy_perf("alexnet") and first.sensitivity is not None
    assert first.demand == (1, 12.0, 125.0)
    assert {s.model for s in sims} <= set(SYNERGY_MODELS)
    plain = sim_jobs(trace)  # the default is unchanged: 1 s per iteration, no sensitivity
    assert plain[0].work == 3349.0 and plain[0].sensitivity is None and plain[0].demand is None
    bad = [TraceJob("x", 0.0, 1, model="vgg", total_steps=5.0, source="synergy")]
    with pytest.raises(TraceError, match="no Synergy sensitivity"):
        sim_jobs(bad, synergy_sensitivity=True)


# --- the engine's grants --------------------------------------------------------------------


class Scripted:
    name = "scripted"
    round_s = None

    def __init__(self, make) -> None:
        self.make = make

    def decide(self, snapshot: Snapshot) -> Decision:
        alloc, grants = self.make(snapshot)
        return Decision(alloc, grants=grants)


def test_engine_rate_follows_a_grant_change() -> None:
    """One 1-GPU res18 job, work 100 on nodes:1:8 (3 CPUs / GPU). t = 0: proportional (3 CPUs,
    rate 1); at t = 10 (a wake-up) the grant becomes 9 CPUs on the same GPU (rate 2.4): the
    remaining 90 take 37.5 s, done at 47.5. No preemption; placement score stays 1."""
    cluster = shorthand_cluster("nodes:1:8")
    g0 = frozenset({cluster.gpus[0].id})
    views = []

    class Twice:
        name, round_s = "twice", None

        def decide(self, snapshot: Snapshot) -> Decision:
            views.append(snapshot.jobs[0])
            if snapshot.now == 0:
                return Decision({"a": g0}, wake_at=10.0)
            return Decision({"a": g0}, grants={"a": (9.0, 62.5)})

    res = simulate([SimJob("a", 0.0, 1, 100.0, synergy_perf("res18"))], cluster, Twice())
    assert res.jobs[0].finish_s == pytest.approx(47.5)
    assert res.jobs[0].preemptions == 0 and res.jobs[0].placement_score == pytest.approx(1.0)
    assert views[1].grant == (3.0, 62.5) and views[1].sensitivity is not None


def test_engine_rejects_grants_beyond_capacity() -> None:
    cluster = shorthand_cluster("nodes:1:8")
    ids = [g.id for g in cluster.gpus]
    jobs = [job("a", 0.0, 2, 10.0, FLAT), job("b", 0.0, 2, 10.0, FLAT)]

    def over_cpu(s):  # 20 + b's proportional 6 = 26 > 24
        return {"a": frozenset(ids[:2]), "b": frozenset(ids[2:4])}, {"a": (20.0, 10.0)}

    with pytest.raises(PolicyError, match="CPUs granted"):
        simulate(jobs, cluster, Scripted(over_cpu))

    def over_mem(s):
        return {"a": frozenset(ids[:2])}, {"a": (2.0, 501.0)}

    with pytest.raises(PolicyError, match="memory"):
        simulate(jobs, cluster, Scripted(over_mem))

    def no_gpus(s):
        return {"a": frozenset(ids[:2])}, {"b": (1.0, 1.0)}

    with pytest.raises(PolicyError, match="holds no GPUs"):
        simulate(jobs, cluster, Scripted(no_gpus))

    def exactly_full(s):  # 18 + 6 = 24 CPUs, 375 + 125 = 500 GB: allowed
        return {"a": frozenset(ids[:2]), "b": frozenset(ids[2:4])}, {"a": (18.0, 375.0)}

    res = simulate(jobs, cluster, Scripted(exactly_full))
    assert [r.finish_s for r in res.jobs] == [10.0, 10.0]


# --- the toy example (Tables 1-3, Fig. 3) ---------------------------------------------------


def toy_jobs() -> list[SimJob]:
    """Four 4-GPU jobs whose best cases are Table 3's rows (per GPU: ResNet-18 5.75 CPUs and
    100 GB, M5 3 CPUs and 112.5 GB, Transformer 0.25 and 25, GNMT 3 and 12.5). ResNet-18 and
    M5 run 3x faster there, Transformer and GNMT are insensitive; all have 3000 s of work."""
    return [
        job("J1-resnet18", 0.0, 4, 3000.0, sens((3, 5.75), (62.5, 100), ((1, 1), (1, 3)))),
        job("J2-m5", 0.0, 4, 3000.0, sens((3,), (62.5, 112.5), ((1, 3),))),
        job("J3-transformer", 0.0, 4, 3000.0, Sensitivity.flat(0.25, 25.0)),
        job("J4-gnmt", 0.0, 4, 3000.0, Sensitivity.flat(3.0, 12.5)),
    ]


def _by_server(cluster, decision) -> dict[str, dict[str, tuple]]:
    out: dict[str, dict[str, tuple]] = {}
    for job_id, gpus in decision.allocation.items():
        (m,) = {cluster.gpu(g).machine for g in gpus}
        grant = decision.grants.get(job_id, cluster.proportional_share(gpus))
        out.setdefault(m, {})[job_id] = (len(gpus), *grant)
    return out


@pytest.mark.parametrize("name", ["synergy-tune", "synergy-opt"])
def test_toy_example_tables_2_and_3(name: str) -> None:
    """Two (8, 24, 500) servers. Proportional (Table 2): S1 = {J1, J2}, S2 = {J3, J4}, every job
    (4, 12, 250). Tune (Table 3), in order GPU / CPU / memory demand descending: J1 (23 CPUs) on
    S1 (best fit, tie: first); J2 (12, 450) no longer fits S1's 1 CPU -> S2; J4 (12, 50) fits
    S2's last 12 CPUs and 50 GB exactly; J3 (1, 100) S1's last 1 CPU and 100 GB exactly.
    J1 and J2 run 3x faster: JCT 1000 s against 3000; J3, J4 3000 s. Average JCT 3000 vs
    (1000 + 1000 + 3000 + 3000) / 4 = 2000: 1.5x (Fig. 3)."""
    cluster = shorthand_cluster(SERVER)
    base = Hook()
    res_p = simulate(toy_jobs(), cluster, make_policy("fifo"), on_decision=base)
    assert _by_server(cluster, base.log[0][1]) == {
        "node-000": {"J1-resnet18": (4, 12.0, 250.0), "J2-m5": (4, 12.0, 250.0)},
        "node-001": {"J3-transformer": (4, 12.0, 250.0), "J4-gnmt": (4, 12.0, 250.0)},
    }
    hook = Hook()
    res_t = simulate(toy_jobs(), cluster, make_policy(name), on_decision=hook)
    assert _by_server(cluster, hook.log[0][1]) == {
        "node-000": {"J1-resnet18": (4, 23.0, 400.0), "J3-transformer": (4, 1.0, 100.0)},
        "node-001": {"J2-m5": (4, 12.0, 450.0), "J4-gnmt": (4, 12.0, 50.0)},
    }
    usage = machine_usage(cluster, hook.log[0][1].allocation, hook.log[0][1].grants)
    assert usage == {"node-000": [8.0, 24.0, 500.0], "node-001": [8.0, 24.0, 500.0]}
    assert jcts(res_p) == dict.fromkeys(jcts(res_p), 3000.0)
    assert jcts(res_t) == {
        "J1-resnet18": 1000.0, "J2-m5": 1000.0, "J3-transformer": 3000.0, "J4-gnmt": 3000.0,
    }  # fmt: skip
    avg = {k: sum(jcts(r).values()) / 4 for k, r in (("p", res_p), ("t", res_t))}
    assert avg["p"] / avg["t"] == 1.5


# --- Tune's steps 1 and 2 --------------------------------------------------------------------


def test_tune_steps_1_and_2_with_exact_jcts() -> None:
    """One (4 GPU, 12 CPU, 250 GB) server, FIFO, event mode. A and B (1 GPU, work 100) run at
    W = 2 with 9 CPUs and 1 at the proportional 3; C (1 GPU, work 30) needs 1 CPU, 20 GB.

    t=0:  A alone: best case 9 CPUs (rate 2).
    t=10: B arrives. A (kept, priority by arrival) keeps 9; B's 9 do not fit the 3 left ->
          step 1: B at proportional 3 (rate 1). CPUs 12/12.
    t=20: C arrives; its (1, 20) is below proportional but no CPU is left -> step 2: A is
          the only job above proportional and is switched to 3 CPUs; C gets 1. CPUs 7/12.
          A has done 40 (2 x 20).
    t=50: C done (30 at rate 1, JCT 30). A (70 done) is back at 9 CPUs; B at 3.
    t=65: A done (30 left at rate 2 = 15 s; JCT 65). B has done 55; now 9 CPUs, rate 2:
          45 left -> 22.5 s, done at 87.5 (JCT 77.5).
    FIFO with proportional CPUs: A 100, B 100 (10 -> 110), C 30.
    """
    cluster = shorthand_cluster("nodes:1:4:12:250")
    two = sens((3, 9), (62.5,), ((1,), (2,)))
    small = Sensitivity.flat(1.0, 20.0)
    jobs = [job("A", 0, 1, 100, two), job("B", 10, 1, 100, two), job("C", 20, 1, 30, small)]
    hook = Hook()
    res = simulate(jobs, cluster, make_policy("synergy-tune"), on_decision=hook)
    assert jcts(res) == pytest.approx({"A": 65.0, "B": 77.5, "C": 30.0})
    assert dict(hook.at(0.0).grants) == {"A": (9.0, 62.5)}
    assert dict(hook.at(10.0).grants) == {"A": (9.0, 62.5)}  # B proportional: no grant
    assert dict(hook.at(20.0).grants) == {"C": (1.0, 20.0)}  # A switched to proportional
    assert dict(hook.at(50.0).grants) == {"A": (9.0, 62.5)}
    assert dict(hook.at(65.0).grants) == {"B": (9.0, 62.5)}
    assert all(r.preemptions == 0 for r in res.jobs)
    fifo = simulate(jobs, cluster, make_policy("fifo"))
    assert jcts(fifo) == {"A": 100.0, "B": 100.0, "C": 30.0}


def test_step2_switches_a_split_peer_on_every_server() -> None:
    """Two (8, 24, 500) servers; per-GPU proportional share (3, 62.5). Running jobs keep GPUs:
    Q (6 GPUs on server 1) wants (1, 76.5) per GPU: (6, 459) in all; P (4 GPUs, 2 on each
    server) wants (6, 20): (12, 40) per server; R (4 GPUs on server 0) wants (3, 100):
    (12, 400). New X (2 GPUs) is insensitive at the proportional (3, 62.5).
    Packing order (GPUs, CPUs, memory, descending): Q, P, R fit at their best cases
    (server 0: 12 + 12 = 24 CPUs, 40 + 400 = 440 GB; server 1: 6 + 12 = 18, 459 + 40 = 499).
    X needs (6, 125) on server 0, the only one with free GPUs: 0 CPUs are left. Step 2 switches
    above-proportional peers there, fewest servers first: R -> (12, 250): still 0 CPUs; then P
    -> (6, 125) on *both* servers: server 0 fits X (6 + 12 + 6 = 24 CPUs, 125 + 250 + 125 =
    500 GB), but on server 1 P's memory rises from 20 to 62.5 per GPU: 125 + 459 = 584 > 500 GB,
    so Q (above proportional in memory) is switched too: (18, 375). Everyone ends at
    proportional, both servers exactly full."""
    cluster = shorthand_cluster(SERVER)
    n0 = [g.id for g in cluster.gpus if g.machine == "node-000"]
    n1 = [g.id for g in cluster.gpus if g.machine == "node-001"]
    reqs = [
        JobRequest("Q", 6, sens((1,), (62.5, 76.5), ((1, 2),)), frozenset(n1[2:]), (0,)),
        JobRequest(
            "P", 4, sens((3, 6), (20, 62.5), ((1, 1), (2, 2))), frozenset(n0[:2] + n1[:2]), (1,)
        ),
        JobRequest("R", 4, sens((3,), (62.5, 100), ((1, 2),)), frozenset(n0[2:6]), (2,)),
        JobRequest("X", 2, Sensitivity.flat(3.0, 62.5), None, (3,)),
    ]
    # Without X, the three keep their best cases.
    alone = tune_pack(cluster, reqs[:3])
    assert dict(alone.grants) == {"Q": (6.0, 459.0), "P": (24.0, 80.0), "R": (12.0, 400.0)}
    got = tune_pack(cluster, reqs)
    assert got.allocation["X"] == frozenset(n0[6:])
    assert dict(got.grants) == {}  # everyone at proportional: Tune's worst case (L245)
    assert dict(got.speeds) == {"Q": 1.0, "P": 1.0, "R": 1.0, "X": 1.0}
    assert machine_usage(cluster, got.allocation, got.grants) == {
        "node-000": [8.0, 24.0, 500.0], "node-001": [8.0, 24.0, 500.0],
    }  # fmt: skip


# --- layered under the ordering policy ------------------------------------------------------


def test_knobs() -> None:
    assert make_policy("synergy-tune").round_s is None  # fifo's event mode
    assert make_policy("synergy-tune", order="las").round_s == 360.0
    assert make_policy("synergy-opt", order="fifo", round_s=300.0).round_s == 300.0
    assert make_policy("synergy-tune").preemptive is False  # as fifo
    assert make_policy("synergy-tune", order="las").preemptive is True
    tuned = make_policy("synergy-tune", order="fifo", order_knobs={"backfill": False})
    assert tuned.base.backfill is False
    for bad in ({"order": "synergy-opt"}, {"order": "sjf"}, {"eps": 1.0}, {"nope": 1}):
        with pytest.raises(ValueError):
            make_policy("synergy-tune", **bad)
    assert {"synergy-tune", "synergy-opt"} <= set(POLICIES)


def _trace(seed: int, n: int, gangs: tuple[int, ...], flat: bool = False) -> list[SimJob]:
    rng = random.Random(seed)
    models = sorted(SYNERGY_MODELS)
    out = []
    for k in range(n):
        s = FLAT if flat else synergy_perf(rng.choice(models)).sensitivity
        arrival = round(rng.uniform(0, 400), 1) if rng.random() < 0.7 else 0.0
        out.append(job(f"j{k:02d}", arrival, rng.choice(gangs), round(rng.uniform(20, 300)), s))
    return out


@pytest.mark.parametrize("order", ORDERS)
def test_insensitive_jobs_reproduce_the_ordering_policy(order: str) -> None:
    """With every job insensitive (W = 1 everywhere) Synergy changes no rate, and on one
    machine placement cannot matter either: JCTs equal the ordering policy's alone."""
    cluster = shorthand_cluster("nodes:1:8")
    jobs = _trace(11, 14, (1, 2, 4), flat=True)
    knobs = {"lease_s": 60.0} if order == "themis" else {}
    base = simulate(
        jobs, cluster, make_policy(order, **knobs), round_s=30.0 if order == "las" else None
    )
    hook = Hook()
    tuned = simulate(
        jobs, cluster, make_policy("synergy-tune", order=order, order_knobs=knobs),
        round_s=30.0 if order == "las" else None, on_decision=hook,
    )  # fmt: skip
    assert jcts(tuned) == pytest.approx(jcts(base))
    assert all(isinstance(d.policy_state, SynergyState) for _, d in hook.log)


INVARIANT_CASES = [
    *(("synergy-tune", o, k) for o, k in itertools.product(ORDERS, range(3))),
    # Opt solves one MILP per round: fewer, smaller traces keep it to a few seconds.
    *(("synergy-opt", o, k) for o, k in itertools.product(ORDERS, range(1))),
]


@pytest.mark.parametrize(("name", "order", "seed"), INVARIANT_CASES)
def test_invariants_on_random_traces(name: str, order: str, seed: int) -> None:
    """Random Synergy-model traces on (8, 24, 500) servers: every decision passes the shared
    checks (GPUs, CPU and memory per machine) and R3; every job finishes, never faster than
    its best W allows; each call runs the same jobs on as many GPUs as the ordering policy's
    own (virtual) decision. Opt additionally never falls back to Tune on these small rounds."""
    cluster = shorthand_cluster("nodes:2:8:24:500")
    opt = name == "synergy-opt"
    jobs = _trace(40 + seed, 10 if opt else 18, (1, 1, 2, 4, 8))
    hook = Hook()
    knobs = {"lease_s": 120.0} if order == "themis" else {}
    policy = make_policy(name, order=order, order_knobs=knobs, round_s=60.0)
    res = simulate(jobs, cluster, policy, on_decision=hook, max_decisions=5000)
    by_id = {j.job_id: j for j in jobs}
    for r in res.jobs:
        j = by_id[r.job_id]
        assert r.finish_s is not None
        top = max(j.sensitivity.speed(c, m) for c, m in j.sensitivity.candidates())
        assert r.jct_s >= j.work / top - 1e-6
    for _, d in hook.log:
        virtual = d.policy_state.virtual
        assert {k: len(v) for k, v in d.allocation.items()} == {
            k: len(v) for k, v in virtual.items()
        }
    last = hook.log[-1][1].policy_state
    if opt:
        assert last.opt_rounds > 0 and last.opt_fallbacks == 0
    else:
        assert last.opt_rounds == 0


def test_static_trace_tune_shortens_the_makespan() -> None:
    """The shipped 100-job trace on its 4 x (8, 24, 500) cluster (static_trace.ini), FIFO,
    5-minute rounds: Synergy-Tune finishes sooner than GPU-proportional FIFO, with a lower
    average JCT, and never slows a job down (R3, checked at every decision)."""
    jobs = load_jobs("synergy/static_100job_6_3_1100.0.csv", synergy_sensitivity=True)
    assert jobs[0].perf is synergy_perf("alexnet") and jobs[0].work == pytest.approx(3349 * 0.6)
    cluster = shorthand_cluster("nodes:4:8:24:500")
    fifo = simulate(jobs, cluster, make_policy("fifo"), round_s=300.0)
    hook = Hook()
    tune = simulate(jobs, cluster, make_policy("synergy-tune"), round_s=300.0, on_decision=hook)
    span = {k: max(r.finish_s for r in res.jobs) for k, res in (("p", fifo), ("t", tune))}
    assert span["t"] < span["p"]
    assert sum(jcts(tune).values()) < sum(jcts(fifo).values())
    assert len(hook.log) == tune.decisions


# --- Opt vs Tune: property tests ------------------------------------------------------------


@st.composite
def instances(draw):
    ratio = draw(st.sampled_from([(2.0, 31.25), (3.0, 62.5), (4.0, 62.5), (6.0, 125.0)]))
    sizes = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3))
    machines = [
        Machine(f"m{i}", "r", 1, g, "gpu", int(g * ratio[0]), int(g * ratio[1] * 1024))
        for i, g in enumerate(sizes)
    ]
    cluster = Cluster.from_machines("h", machines)
    gpus = [g.id for g in cluster.gpus]
    draw(st.randoms(use_true_random=False)).shuffle(gpus)
    reqs, used = [], 0
    for k in range(draw(st.integers(1, 6))):
        gang = draw(st.integers(1, max(1, min(4, len(gpus) - used))))
        if used + gang > len(gpus):
            break
        cpus = sorted(draw(st.sets(st.sampled_from([0.5, 1, 2, 3, 4, 6, 9]), min_size=1)))
        mem = sorted(draw(st.sets(st.sampled_from([15.0, 31.25, 62.5, 125.0]), min_size=1)))
        steps = draw(
            st.lists(
                st.integers(0, 60), min_size=len(cpus) * len(mem), max_size=len(cpus) * len(mem)
            )
        )
        grid = [[0] * len(mem) for _ in cpus]  # cumulative, so non-decreasing in both axes
        for i in range(len(cpus)):
            for m in range(len(mem)):
                below = max(grid[i - 1][m] if i else 0, grid[i][m - 1] if m else 0)
                grid[i][m] = below + steps[i * len(mem) + m]
        s = sens(cpus, mem, [[1 + v / 100 for v in row] for row in grid])
        if draw(st.integers(0, 4)) == 0:
            s = None  # no profile: proportional
        fixed = frozenset(gpus[used : used + gang]) if draw(st.booleans()) else None
        reqs.append(JobRequest(f"j{k}", gang, s, fixed, (k,)))
        used += gang
    return cluster, reqs


def _check_packing(cluster: Cluster, reqs, packing) -> None:
    """All GPUs distinct, gangs exact, kept jobs unmoved, capacity respected, R3 held."""
    seen: set[str] = set()
    for r in reqs:
        gpus = packing.allocation[r.job_id]
        assert len(gpus) == r.gang and not gpus & seen
        seen |= gpus
        if r.fixed is not None:
            assert gpus == r.fixed
        if r.sensitivity is not None:
            prop = cluster.proportional_share(gpus)
            floor = r.sensitivity.speed(prop[0] / r.gang, prop[1] / r.gang)
            assert packing.speeds[r.job_id] >= floor - 1e-9
    check_grants(cluster, packing.allocation, packing.grants)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_tune_and_opt_respect_capacity_and_opt_beats_tune(instance) -> None:
    cluster, reqs = instance
    tuned = tune_pack(cluster, reqs)
    _check_packing(cluster, reqs, tuned)
    best = opt_pack(cluster, reqs, time_limit_s=20.0)
    assert best is not None and best.optimal
    _check_packing(cluster, reqs, best)
    assert best.objective >= tuned.objective - 1e-9
    # Tune's worst case is everyone at proportional (L245): Σ W >= Σ W_prop.
    m = cluster.machines[0]
    ratio = (m.cpus / m.num_gpus, m.mem_gb / m.num_gpus)
    prop = sum(1.0 if r.sensitivity is None else r.sensitivity.speed(*ratio) for r in reqs)
    assert tuned.objective >= prop - 1e-9


def test_opt_strictly_beats_tune_on_a_small_instance() -> None:
    """One (2 GPU, 6 CPU, 125 GB) server, two 1-GPU jobs, memory flat from 62.5 GB.
    A: W 1 / 1.5 / 1.6 at 3 / 5 / 6 CPUs (best 6). B: W 1 / 1 / 2 at 1 / 3 / 4 CPUs (best 4).
    Tune: A first (6 CPUs demanded > 4) takes 6; B's 4 do not fit the 0 left; step 1: B's
    demand is above proportional, so 3 -> still 0 left; step 2 switches A to 3: Σ W = 1 + 1.
    Opt over A in {3, 5, 6} x B in {1, 4} (B's 3 is dominated by 1) with 6 CPUs: A 5 + B 1 =
    1.5 + 1 = 2.5 (A 6 + B 1 and A 3 + B 4 need 7)."""
    cluster = shorthand_cluster("nodes:1:2:6:125")
    a = sens((3, 5, 6), (62.5,), ((1,), (1.5,), (1.6,)))
    b = sens((1, 3, 4), (62.5,), ((1,), (1,), (2,)))
    reqs = [JobRequest("A", 1, a, None, (0,)), JobRequest("B", 1, b, None, (1,))]
    tuned, best = tune_pack(cluster, reqs), opt_pack(cluster, reqs)
    assert dict(tuned.speeds) == {"A": 1.0, "B": 1.0} and dict(tuned.grants) == {}
    assert best is not None and best.optimal
    assert dict(best.speeds) == {"A": 1.5, "B": 1.0}
    assert dict(best.grants) == {"A": (5.0, 62.5), "B": (1.0, 62.5)}
    assert best.objective == 2.5


# --- decide() on arbitrary snapshots: gang and capacity, CPU and memory included -------------


@st.composite
def synergy_snapshots(draw):
    """A cluster of 1-3 machines (1-8 GPUs, 1-6 CPUs and 20-125 GB per GPU, each machine its
    own ratio), 1-8 jobs with a shipped model's sensitivity or none, arbitrary disjoint
    holdings (whole, partial or none), attained service, remaining work and arrivals."""
    machines = []
    for i in range(draw(st.integers(1, 3))):
        g = draw(st.sampled_from([1, 2, 4, 8]))
        cpus = g * draw(st.sampled_from([1, 2, 3, 4, 6]))
        mem_gb = g * draw(st.sampled_from([20.0, 31.25, 62.5, 125.0]))
        machines.append(Machine(f"m{i}", f"r{i % 2}", 1, g, "gpu", cpus, int(mem_gb * 1024)))
    cluster = Cluster.from_machines("h", machines)
    free = [g.id for g in cluster.gpus]
    draw(st.randoms(use_true_random=False)).shuffle(free)
    models = sorted(SYNERGY_MODELS)
    jobs = []
    for k in range(draw(st.integers(1, 8))):
        gang = draw(st.integers(1, min(8, cluster.num_gpus)))
        model = draw(st.one_of(st.none(), st.sampled_from(models)))
        n_held = draw(st.sampled_from([0, gang, draw(st.integers(0, gang))]))
        n_held = min(n_held, len(free))
        held, free = frozenset(free[:n_held]), free[n_held:]
        work = draw(st.floats(10.0, 5000.0))
        perf = SlowdownPerf() if model is None else synergy_perf(model)
        jobs.append(
            JobView(
                f"j{k}", f"a{k}", "default", float(k), gang, held=held,
                attained_gpu_s=draw(st.floats(0.0, 1e4)),
                first_start_s=float(k) if held else None,
                remaining_work=draw(st.floats(1.0, work)), work=work, perf=perf,
                ideal_rate=ideal_rate(cluster, gang, perf),
                sensitivity=None if model is None else perf.sensitivity,
            )
        )  # fmt: skip
    return Snapshot(draw(st.floats(0.0, 1e4)), cluster, tuple(jobs))


def _check_synergy_decision(snap: Snapshot, d: Decision) -> None:
    check_decision(snap, d)  # GPUs known and held once, no gang exceeded, grants fit
    views = {j.job_id: j for j in snap.jobs}
    for job_id, gpus in d.allocation.items():
        assert len(gpus) == views[job_id].gang  # gangs, never partial
    assert set(d.grants) <= {j for j, g in d.allocation.items() if g}
    for m, (n_gpus, cpus, mem) in machine_usage(snap.cluster, d.allocation, d.grants).items():
        mach = snap.cluster.machine(m)
        assert n_gpus <= mach.num_gpus
        assert cpus <= mach.cpus * (1 + 1e-9) + 1e-9
        assert mem <= mach.mem_gb * (1 + 1e-9) + 1e-9
    for job_id, gpus in d.allocation.items():
        s = views[job_id].sensitivity
        if s is None:
            assert job_id not in d.grants or d.grants[job_id] == pytest.approx(
                snap.cluster.proportional_share(gpus)
            )
            continue
        n, prop = len(gpus), snap.cluster.proportional_share(gpus)
        grant = d.grants.get(job_id, prop)
        assert s.speed(grant[0] / n, grant[1] / n) >= s.speed(prop[0] / n, prop[1] / n) - 1e-9
    # Synergy changes placement and CPU/memory only: the ordering policy's job set and counts.
    virtual = d.policy_state.virtual
    assert {k: len(v) for k, v in d.allocation.items()} == {k: len(v) for k, v in virtual.items()}


@settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    snap=synergy_snapshots(),
    opt=st.booleans(),
    order=st.sampled_from(ORDERS),
    dt=st.floats(1.0, 5000.0),
)
def test_decide_never_violates_gang_or_capacity(snap, opt, order, dt) -> None:
    """SynergyTune and SynergyOpt ``decide`` on arbitrary snapshots, twice (the second call
    later, with the first allocation applied and the state carried): every decision holds
    gangs whole, no GPU twice, and no machine's CPUs or memory oversubscribed; R3 holds."""
    knobs = {"lease_s": 60.0} if order == "themis" else {}
    name = "synergy-opt" if opt else "synergy-tune"
    policy = make_policy(
        name, order=order, order_knobs=knobs, **({"time_limit_s": 5.0} if opt else {})
    )
    d = policy.decide(snap)
    _check_synergy_decision(snap, d)
    jobs = tuple(
        replace(
            j,
            held=d.allocation.get(j.job_id, frozenset()),
            grant=d.grants.get(j.job_id) if d.allocation.get(j.job_id) else None,
            attained_gpu_s=j.attained_gpu_s + dt * len(d.allocation.get(j.job_id, ())),
        )
        for j in snap.jobs
    )
    snap2 = Snapshot(snap.now + dt, snap.cluster, jobs, d.policy_state)
    _check_synergy_decision(snap2, policy.decide(snap2))
