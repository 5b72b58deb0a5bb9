"""``gandiva``: greedy best placement first, as Themis implemented its Gandiva baseline (Themis
§6 "Baselines", P:392, thesis T:1208; spec qoop-themis.md B.11 "Baselines as Themis implemented
them").

Themis's Gandiva is the "ideal efficiency" baseline: "On any resource availability, all apps
report their placement preferences and we allocate resources in a greedy highest preference
first manner"; Gandiva "introspectively profiles ML job execution to infer placement preferences
and migrates jobs to better meet these placement preferences"; time-slicing and packing are not
modelled. This module also holds the machinery Themis's "on any resource availability"
baselines share (:func:`serve_on_availability`, used by ``optimus`` too).

**Resource availability = leases** (decided here). Every Themis baseline acts "on any resource
availability" and Themis's own resources become available when leases end (an expired lease
starts a round, T:1311; spec qoop-themis.md Part D item 21); its Tiresias baseline, LAS "so that
all jobs obtain equal service over time" (P:394), could equalise service only if running jobs
give GPUs back, so its baselines must run on the same leases. Here a grant is a
lease of ``lease_s`` (default Themis's 10 minutes, :data:`~arbiter.rounds.DEFAULT_LEASE_SECONDS`).
On every call (arrivals, completions, lease ends: ``Decision.wake_at``), jobs whose lease is
live keep their GPUs; the GPUs of expired leases go back to the pool with the free ones, and the
jobs holding them compete again with the waiting ones. ``lease_s=None`` grants until completion
(never preempts, never migrates). Lease ends travel in ``Decision.policy_state``
(:class:`Leases`); a running job without a recorded lease (the first call after a policy switch
in the live arbiter) is up for renewal at once.

**Placement preference** = the job's placement score on an offer: the rate of the GPUs it would
get over its rate on the best placement of an empty cluster (1 = as good as it gets; clamped to
1). The offer is the best placement :class:`~arbiter.policies.base.FreePool` finds in the pool;
a job renewing its lease is offered its own GPUs instead when they are at least as fast (no
needless migration), otherwise it *migrates* to the faster placement (Themis's Gandiva
migration). Jobs are served in decreasing preference, each taking its offer, and the offers are
recomputed after every grant (the pool changed), until no remaining gang fits: work-conserving.
Ties go to arrival, then id (a queue's order): among jobs any free placement suits (every 1-GPU
job scores 1) Gandiva is first come, first served, and a running job renewing its lease keeps
its GPUs against later arrivals. A job whose best offer scores below ``min_score`` (default 0) waits
for a better one.

Live arbiter (``perf`` None): the preference is the 4-level locality model's (single machine 1,
cross-machine 1.1, cross-rack 1.3; thesis T:1103), the default the Themis Agent uses without a
profile, so Gandiva still prefers dense placements there.

Gandiva's own mechanisms (GPU time-slicing, job packing, affinity by gang size; OSDI'18, not a
seed) are not modelled, as in Themis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from arbiter.placement import LocalityModel, Placement, placement_of
from arbiter.policies.base import Decision, FreePool, JobView, Snapshot, ideal_rate
from arbiter.rounds import DEFAULT_LEASE_SECONDS

__all__ = [
    "LOCALITY_PERF",
    "Gandiva",
    "Leases",
    "LocalityPerf",
    "PlacementOffer",
    "PlacementRates",
    "serve_on_availability",
]

_EPS = 1e-9


@dataclass(frozen=True)
class LocalityPerf:
    """rate = 1 / S(G) of the 4-level locality model: the preference of a job without a
    measured profile (the live arbiter's jobs)."""

    model: LocalityModel = field(default_factory=LocalityModel)

    def rate(self, placement: Placement) -> float:
        return 1.0 / self.model.slowdown(placement)


LOCALITY_PERF = LocalityPerf()


@dataclass(frozen=True)
class Leases:
    """``Decision.policy_state`` of the availability baselines: job -> end of its lease."""

    ends: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class PlacementOffer:
    """What a job would get now: ``gpus`` and their placement ``score`` (rate / ideal, <= 1)."""

    gpus: frozenset[str]
    score: float


# key(job, offer) -> a sortable priority (smaller first), or None: the job declines the offer.
KeyFn = Callable[[JobView, PlacementOffer], Any]
# bound(job) -> a priority no offer can beat (the key at score 1), for pruning.
BoundFn = Callable[[JobView], Any]


def _take_exact(pool: FreePool, gpus: frozenset[str]) -> None:
    for g in gpus:
        pool.by_machine[pool.cluster.gpu(g).machine].remove(g)
    pool.size -= len(gpus)


class PlacementRates:
    """Per-call caches: each job's perf (its own, or the locality model) and ideal rate."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self._ideal: dict[tuple[int, int], float] = {}

    def perf(self, job: JobView) -> Any:
        return job.perf if job.perf is not None else LOCALITY_PERF

    def ideal(self, job: JobView) -> float:
        if job.perf is not None and job.ideal_rate and job.ideal_rate > 0:
            return job.ideal_rate
        perf = self.perf(job)
        key = (id(perf), job.gang)
        if key not in self._ideal:
            self._ideal[key] = ideal_rate(self.cluster, job.gang, perf)
        return self._ideal[key]

    def score(self, job: JobView, gpus: frozenset[str]) -> float:
        rate = self.perf(job).rate(placement_of(self.cluster, gpus))
        ideal = self.ideal(job)
        if not (rate > 0 and ideal > 0):
            return 0.0
        return min(1.0, rate / ideal)


def serve_on_availability(
    snapshot: Snapshot[Leases],
    *,
    lease_s: float | None,
    key: KeyFn,
    bound: BoundFn,
    rates: PlacementRates | None = None,
) -> Decision[Leases]:
    """One call of a Themis-style baseline (module docstring): live leases are kept, everyone
    else competes for the pool, served greedily by ``key`` (ties: arrival, id) one grant at a
    time, offers recomputed after each grant. ``bound(job)`` must be <= ``key(job, offer)`` for
    every offer (it is used to stop scanning early)."""
    now, cluster = snapshot.now, snapshot.cluster
    rates = rates or PlacementRates(cluster)
    state = snapshot.policy_state if isinstance(snapshot.policy_state, Leases) else Leases()
    alloc: dict[str, frozenset[str]] = {}
    ends: dict[str, float] = {}
    candidates: list[JobView] = []
    for job in snapshot.jobs:
        end = state.ends.get(job.job_id)
        if job.running and (lease_s is None or (end is not None and end > now + _EPS)):
            alloc[job.job_id] = job.held
            if end is not None:
                ends[job.job_id] = end
        else:
            candidates.append(job)  # waiting, or its lease ended (partial holdings dropped)
    kept = set().union(*alloc.values()) if alloc else set()
    pool = FreePool(cluster, cluster.gpu_ids - kept)
    in_pool = set(cluster.gpu_ids - kept)
    order = sorted(candidates, key=lambda j: (bound(j), j.arrival_s, j.job_id))
    while order and pool.size:
        probes: dict[tuple[int, int], frozenset[str] | None] = {}
        best: tuple[Hashable, float, str] | None = None
        best_job: JobView | None = None
        best_offer: PlacementOffer | None = None
        for job in order:
            if best is not None and (bound(job), job.arrival_s, job.job_id) > best:
                break  # sorted by bound: nobody further on can beat the best
            if job.gang > pool.size:
                continue
            perf = rates.perf(job)
            pk = (id(perf), job.gang)
            if pk not in probes:
                gpus = pool.take(job.gang, perf)
                if gpus is not None:
                    pool.give(gpus)
                probes[pk] = gpus
            gpus = probes[pk]
            score = rates.score(job, gpus) if gpus is not None else 0.0
            if job.running and job.held <= in_pool:  # renewing: keep its GPUs if as good
                own = rates.score(job, job.held)
                if gpus is None or own >= score - _EPS:
                    gpus, score = job.held, own
            if gpus is None or not score > 0:
                continue
            offer = PlacementOffer(gpus, score)
            k = key(job, offer)
            if k is None:
                continue
            full = (k, job.arrival_s, job.job_id)
            if best is None or full < best:
                best, best_job, best_offer = full, job, offer
        if best_job is None or best_offer is None:
            break
        _take_exact(pool, best_offer.gpus)
        in_pool -= best_offer.gpus
        alloc[best_job.job_id] = best_offer.gpus
        if lease_s is not None:
            ends[best_job.job_id] = now + lease_s
        order.remove(best_job)
    if lease_s is None:
        return Decision(alloc)
    wake = min((e for e in ends.values() if e > now), default=None)
    return Decision(alloc, Leases(MappingProxyType(ends)), wake)


@dataclass(frozen=True)
class Gandiva:
    name: str = "gandiva"
    round_s: float | None = None
    lease_s: float | None = DEFAULT_LEASE_SECONDS
    min_score: float = 0.0

    def __post_init__(self) -> None:
        if self.lease_s is not None and not (self.lease_s > 0 and math.isfinite(self.lease_s)):
            raise ValueError(f"lease_s must be positive or None, got {self.lease_s}")

    @property
    def preemptive(self) -> bool:
        """Without leases Gandiva never takes GPUs back (the simulator may then skip calls on a
        full cluster); with leases it re-places jobs when their leases end."""
        return self.lease_s is not None

    def decide(self, snapshot: Snapshot[Leases]) -> Decision[Leases]:
        def key(job: JobView, offer: PlacementOffer) -> float | None:
            return None if offer.score < self.min_score else -offer.score

        return serve_on_availability(
            snapshot, lease_s=self.lease_s, key=key, bound=lambda job: -1.0
        )
