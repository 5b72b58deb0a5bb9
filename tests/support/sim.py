"""Random traces and the simulator's invariant checker, shared by the engine's and the policies'
tests: every policy must keep :class:`Invariants` on :func:`random_trace` traces."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from arbiter.cluster import Cluster
from arbiter.policies.base import Decision, Snapshot, check_decision, ideal_rate
from arbiter.sim.engine import SimResult
from arbiter.sim.perf import SimJob, SlowdownPerf

PERF = SlowdownPerf()
SPANS = (60.0, 300.0, 1500.0)  # crowded, busy and sparse arrivals


def random_trace(seed: int, n: int, gangs: tuple[int, ...], span: float = 300.0) -> list[SimJob]:
    """``n`` jobs ``j00``.. (gang from ``gangs``, 5-150 s of work, queue ``qa``/``qb``/``qc``):
    80 % arrive uniformly over ``[0, span]``, the rest at 0."""
    rng = random.Random(seed)
    queues = ("qa", "qb", "qc")
    return [
        SimJob(
            f"j{k:02d}",
            round(rng.uniform(0, span), 1) if rng.random() < 0.8 else 0.0,
            rng.choice(gangs),
            round(rng.uniform(5, 150), 1),
            PERF,
            queue=rng.choice(queues),
        )
        for k in range(n)
    ]


def _integral(timeline: list[tuple[float, int, int]], col: int) -> float:
    return sum((b[0] - a[0]) * a[col] for a, b in itertools.pairwise(timeline))


class Invariants:
    """An ``on_decision`` hook checking each decision, plus checks on the finished result."""

    def __init__(self, cluster: Cluster, jobs: list[SimJob], *, partial: bool, conserving: bool):
        self.cluster = cluster
        self.gang = {j.job_id: j.gang for j in jobs}
        self.partial = partial  # the policy may hold fewer GPUs than the gang (YARN hoarding)
        self.conserving = conserving
        self.calls = 0
        self.times: list[float] = []
        self.last_now = -math.inf

    def __call__(self, snap: Snapshot, decision: Decision) -> None:
        self.calls += 1
        self.times.append(snap.now)
        assert snap.now >= self.last_now  # time never goes back
        self.last_now = snap.now
        check_decision(snap, decision)  # the shared rules
        active = {j.job_id for j in snap.jobs}
        assert [j.arrival_s for j in snap.jobs] == sorted(j.arrival_s for j in snap.jobs)
        for view in snap.jobs:  # what the engine applied last time holds too
            assert len(view.held) <= view.gang
            assert view.arrival_s <= snap.now
            assert view.remaining_work is not None and view.remaining_work > 0
        owner: dict[str, str] = {}
        for job_id, gpus in decision.allocation.items():
            assert job_id in active
            assert gpus <= self.cluster.gpu_ids
            assert len(gpus) <= self.gang[job_id]
            if not self.partial:
                assert not gpus or len(gpus) == self.gang[job_id], (job_id, len(gpus))
            for g in gpus:
                assert g not in owner, f"{g} in {owner[g]} and {job_id}"
                owner[g] = job_id
        if self.conserving:
            free = self.cluster.num_gpus - len(owner)
            waiting = [j for j in snap.jobs if len(decision.allocation.get(j.job_id, ())) < j.gang]
            assert all(j.gang > free for j in waiting), (
                snap.now, free, [(j.job_id, j.gang) for j in waiting],
            )  # fmt: skip

    def check_result(self, jobs: list[SimJob], res: SimResult) -> None:
        assert self.calls == res.decisions > 0
        fits = [j for j in jobs if j.gang <= self.cluster.num_gpus]
        by_id = {r.job_id: r for r in res.jobs}
        assert sorted(by_id) == sorted(j.job_id for j in fits)
        assert sorted(res.skipped) == sorted(j.job_id for j in jobs if j not in fits)
        for j in fits:
            r = by_id[j.job_id]
            assert r.finish_s is not None and r.start_s is not None, j
            ideal = ideal_rate(self.cluster, j.gang, j.perf)
            assert r.arrival_s <= r.start_s < r.finish_s
            assert r.jct_s >= j.work / ideal - 1e-6, (j, r)
            run_time = r.busy_gpu_s / j.gang
            assert r.finish_s - r.start_s >= run_time - 1e-6
            assert r.busy_gpu_s <= r.gpu_time_s + 1e-6
            assert 0 < r.placement_score <= 1 + 1e-9
            # Work done = ∫ rate dt = placement score x running time x ideal rate.
            assert r.placement_score * run_time * ideal == pytest.approx(j.work, rel=1e-6)
        # The timeline accounts for exactly the GPU-seconds the jobs report.
        tl = res.timeline
        assert all(0 <= busy <= held <= self.cluster.num_gpus for _, busy, held in tl)
        assert tl[-1][1:] == (0, 0)
        assert _integral(tl, 1) == pytest.approx(sum(r.busy_gpu_s for r in res.jobs), rel=1e-9)
        assert _integral(tl, 2) == pytest.approx(sum(r.gpu_time_s for r in res.jobs), rel=1e-9)
