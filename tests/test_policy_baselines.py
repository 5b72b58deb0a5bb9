"""``srtf`` (and SRSF), ``gandiva`` and ``optimus``: hand-derived traces with exact JCTs, the
Tiresias Fig 3.7 toy for SRSF, invariants on random traces, and a property test per policy
that a decision never breaks gang or capacity constraints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_engine import _run, _trace

from arbiter.cluster import shorthand_cluster
from arbiter.policies import make_policy
from arbiter.policies.base import JobView, Snapshot, check_decision, ideal_rate
from arbiter.sim.engine import simulate
from arbiter.sim.perf import SimJob, SlowdownPerf

PERF = SlowdownPerf()  # 1 on one machine, 1/1.1 across machines (the 4-level locality model)


def J(job_id: str, arrival: float, gang: int, work: float) -> SimJob:
    return SimJob(job_id, arrival, gang, work, PERF)


def jcts(policy: str, jobs: list[SimJob], cluster: str, **knobs) -> dict[str, float]:
    res = simulate(jobs, shorthand_cluster(cluster), make_policy(policy, **knobs))
    return {r.job_id: round(r.jct_s, 6) for r in res.jobs}


# --- srtf / srsf ----------------------------------------------------------------------------


def test_srsf_on_the_tiresias_toy() -> None:
    """Fig 3.7: one 2-GPU machine; J1 = (2 GPUs, 2), J2 = (1, 8), J3 = (2, 6) at t = 0.
    Remaining services 4, 8, 12: J1 [0,2); J2 (8) before J3 (12), J3 does not fit beside J2
    and waits: J2 [2,10), J3 [10,16). Average 28/3."""
    toy = [J("J1", 0, 2, 2), J("J2", 0, 1, 8), J("J3", 0, 2, 6)]
    got = jcts("srtf", toy, "nodes:1:2", service=True)
    assert got == {"J1": 2.0, "J2": 10.0, "J3": 16.0}
    assert sum(got.values()) / 3 == pytest.approx(28 / 3)


def test_srtf_ranks_by_time_not_service() -> None:
    """The same toy by remaining *time* (2, 8, 6): J1 [0,2), J3 [2,8), J2 [8,16): 26/3."""
    toy = [J("J1", 0, 2, 2), J("J2", 0, 1, 8), J("J3", 0, 2, 6)]
    assert jcts("srtf", toy, "nodes:1:2") == {"J1": 2.0, "J2": 16.0, "J3": 8.0}


def test_srtf_preempts_a_longer_job() -> None:
    """nodes:1:1, a = (0, 1, 100), b = (10, 1, 5): at t = 10 a has 90 left, b 5: b preempts,
    runs [10, 15); a resumes and ends at 105."""
    assert jcts("srtf", [J("a", 0, 1, 100), J("b", 10, 1, 5)], "nodes:1:1") == {
        "a": 105.0, "b": 5.0,
    }  # fmt: skip


def test_srtf_live_without_progress_goes_last() -> None:
    cluster = shorthand_cluster("nodes:1:2")
    jobs = (
        JobView("quiet", "quiet", "q", 0.0, 2),
        JobView("told", "told", "q", 5.0, 2, remaining_work=30.0, ideal_rate=1.0),
    )
    d = make_policy("srtf").decide(Snapshot(10.0, cluster, jobs))
    assert set(d.allocation) == {"told"}


# --- gandiva and optimus: the free GPUs are split across machines at t = 10 ---------------


def _split_free() -> list[SimJob]:
    """nodes:2:2. a, b, c, d (1 GPU each, arriving one by one) fill node-000 then node-001
    (best fit); a and c both end at 10, so one GPU is free on each machine."""
    return [J("a", 0, 1, 10), J("b", 0.5, 1, 100), J("c", 1, 1, 9), J("d", 1.5, 1, 100)]


def test_gandiva_serves_the_best_placement_first() -> None:
    """At t = 10 y (gang 2, arrived 5) could only run spread (score 1/1.1), z (1 GPU, arrived
    6) fits perfectly (score 1): Gandiva serves z [10, 20); y then gets the two free GPUs,
    spread, at 20 and needs 20 x 1.1 = 22 s: ends 42. FIFO does the opposite: y at 10 (ends
    32), z after it [32, 42)."""
    jobs = [*_split_free(), J("y", 5, 2, 20), J("z", 6, 1, 10)]
    got = jcts("gandiva", jobs, "nodes:2:2")
    assert (got["z"], got["y"]) == (14.0, 37.0)
    fifo = jcts("fifo", jobs, "nodes:2:2")
    assert (fifo["y"], fifo["z"]) == (27.0, 36.0)


def test_optimus_serves_the_shortest_offered_time_first() -> None:
    """nodes:1:2: a (10 s) and b (100 s) start at 0; u (50 s, arrived 5) and v (10 s, arrived
    6) wait. At 10 one GPU frees: Optimus serves v (10 s) before u: v [10,20) JCT 14, u
    [20,70) JCT 65. Gandiva (both score 1) goes by arrival: u [10,60) JCT 55, v [60,70) 64."""
    jobs = [J("a", 0, 1, 10), J("b", 0, 1, 100), J("u", 5, 1, 50), J("v", 6, 1, 10)]
    got = jcts("optimus", jobs, "nodes:1:2")
    assert (got["v"], got["u"]) == (14.0, 65.0)
    gan = jcts("gandiva", jobs, "nodes:1:2")
    assert (gan["u"], gan["v"]) == (55.0, 64.0)


def test_optimus_prices_the_offered_placement() -> None:
    """The split pool of :func:`_split_free`: y (gang 2, 12 s) could only run spread, 13.2 s;
    z (1 GPU, 13 s) 13 s on one GPU: z is served first (srtf would pick y, 12 < 13)."""
    jobs = [*_split_free(), J("y", 5, 2, 12), J("z", 6, 1, 13)]
    got = jcts("optimus", jobs, "nodes:2:2")
    assert got["z"] == 17.0  # runs [10, 23)
    assert got["y"] == pytest.approx(23 + 13.2 - 5)  # then spread over the two free GPUs


# --- invariants and properties ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("name", ["srtf", "gandiva", "optimus"])
def test_invariants_on_random_traces(name: str, seed: int) -> None:
    cluster = shorthand_cluster(("nodes:2:4", "nodes:3:2")[seed % 2])
    jobs = _trace(700 + seed, 25, (1, 1, 2, 3, 4), (60.0, 300.0, 1500.0)[seed % 3])
    res, _ = _run(name, jobs, cluster, conserving=name == "srtf")
    if name != "srtf":  # non-preemptive: one uninterrupted run each
        assert all(r.preemptions == 0 for r in res.jobs)


@st.composite
def snapshots(draw):
    cluster = shorthand_cluster(draw(st.sampled_from(("nodes:2:4", "nodes:3:2", "nodes:1:8"))))
    free = sorted(cluster.gpu_ids, key=cluster.index)
    jobs = []
    for k in range(draw(st.integers(1, 8))):
        gang = draw(st.integers(1, min(5, cluster.num_gpus)))
        running = draw(st.booleans()) and len(free) >= gang
        held = frozenset(free[:gang]) if running else frozenset()
        free = free[gang:] if running else free
        known = draw(st.booleans())
        jobs.append(
            JobView(
                f"j{k}", f"j{k}", "q", float(k), gang, held=held,
                attained_gpu_s=draw(st.floats(0, 1e4)),
                remaining_work=draw(st.floats(1, 1e4)) if known else None,
                perf=PERF if known else None,
                ideal_rate=ideal_rate(cluster, gang, PERF) if known else None,
            )
        )  # fmt: skip
    return Snapshot(draw(st.floats(0, 1e5)), cluster, tuple(jobs))


@pytest.mark.parametrize("name", ["srtf", "gandiva", "optimus"])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(snap=snapshots())
def test_decisions_keep_gang_and_capacity(name: str, snap: Snapshot) -> None:
    policy = make_policy(name)
    d = policy.decide(snap)
    check_decision(snap, d)
    gang = {j.job_id: j.gang for j in snap.jobs}
    assert all(len(g) == gang[j] for j, g in d.allocation.items() if g)  # whole gangs only
    if not getattr(policy, "preemptive", True):  # gandiva, optimus: nobody loses GPUs
        assert all(d.allocation.get(j.job_id) == j.held for j in snap.jobs if j.held)
