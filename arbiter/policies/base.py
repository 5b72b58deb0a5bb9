"""The policy interface both drivers call: a snapshot in, a decision out (ARCHITECTURE §1-2).

A policy is an object with a ``name``, a default ``round_s`` (None = decide on every arrival,
completion and requested wake-up; a number = time-sliced rounds of that length, Gavel-style) and
one pure method ``decide(snapshot) -> Decision``. Any state a policy carries between calls (a
pending call for bids, for instance) travels in ``Snapshot.policy_state`` /
``Decision.policy_state``, never on the policy object, so one policy object can serve many
simulations.

**Two-phase policies** (``two_phase = True``: Themis) allocate leases to apps through Agents,
with decide and bind as separate cycles. The driver owns the lease book and passes it in
``Snapshot.book`` with what the Agents reported (``rho``, ``demand``); a decision may carry a
:class:`CallForBids`; the driver collects the participants' bids and calls ``decide`` again
with them in ``Snapshot.bids``; that decision's ``outcome`` (granted leases, hidden payments)
is bound by the driver. The live arbiter talks to real Agents over gRPC; the simulator's
:class:`arbiter.sim.agents.SimulatedAgents` answers for truthful simulated Agents. Both call the
same ``decide``.

``Decision.allocation`` names every job that holds GPUs after the call and exactly which GPUs;
a running job left out is preempted. A job runs only while it holds ``gang`` GPUs (gang
semantics); a job holding fewer (YARN-style container hoarding) holds them idle. Exception: a
policy declaring ``elastic = True`` (AFS) may run a job on any non-empty share up to its gang,
at ``perf.rate`` of that share, unless the job's perf model is rated per whole gang
(:func:`rated_per_gang`: its work is "seconds on the requested GPUs", so it has no throughput
curve and a partial share would be a free speed-up); such a job still needs its whole gang.

CPU and memory (Synergy): ``Decision.grants`` may give a job that holds GPUs a total of
``(cpus, mem_gb)``, split over its machines in proportion to its GPUs there (Synergy's rule R2);
a job without an entry gets each machine's CPUs and memory in proportion to its GPUs on it (the
GPU-proportional baseline, :meth:`Cluster.proportional_share`). Per machine, the CPUs and memory
of all holders never exceed :attr:`Machine.cpus` / :attr:`Machine.mem_gb`. A job's measured
sensitivity (throughput against CPU and memory per GPU) is ``JobView.sensitivity``, and the
grant it runs with now ``JobView.grant``; both are None for jobs that do not have them.

:class:`FreePool` is the shared placement rule: a gang goes to the free GPUs that give it the best
measured rate, trying per GPU type a best-fit single machine, then the fewest machines of one
rack, then of the cluster; ties go to the denser placement (fewer machines), then to cluster
order. Gandiva's and Tiresias's own placement rules come with those policies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from arbiter.bids import partitions
from arbiter.cluster import Cluster
from arbiter.placement import placement_of

if TYPE_CHECKING:
    from arbiter.auction import Bid
    from arbiter.rounds import ArbiterState, RoundOutcome

# What a policy carries from one decide to the next: each policy names its own type (Themis's
# ThemisState, Tiresias's TiresiasState, ...), None for a policy without memory.
S = TypeVar("S")

__all__ = [
    "CallForBids",
    "Decision",
    "FreePool",
    "JobView",
    "Policy",
    "PolicyError",
    "Snapshot",
    "admit_and_place",
    "check_grants",
    "machine_usage",
    "rated_per_gang",
]


class PolicyError(ValueError):
    """A policy's decision breaks the rules (over-allocation, unknown GPU, oversized gang)."""


@dataclass(frozen=True, slots=True)
class JobView:
    """What a policy may see of one active (arrived, unfinished) job."""

    job_id: str
    app_id: str
    queue: str
    arrival_s: float
    gang: int
    held: frozenset[str] = frozenset()
    attained_gpu_s: float = 0.0  # GPU-seconds of service received so far (LAS)
    first_start_s: float | None = None
    # Known to simulated Agents (true job state); None in the live arbiter.
    remaining_work: float | None = None
    work: float | None = None
    perf: Any = None  # a PerfModel
    ideal_rate: float | None = None  # rate on the best placement of an empty cluster
    # Synergy: a Sensitivity (arbiter.sim.perf), and the (cpus, mem_gb) the job runs
    # with now (None: not running, or a perf model that ignores CPU and memory).
    sensitivity: Any = None
    grant: tuple[float, float] | None = None
    # GPU-seconds every job of this job's app has run so far, finished jobs included (apps of
    # many jobs: arbiter.sim.apps); None where the driver does not track apps.
    app_attained_gpu_s: float | None = None

    @property
    def running(self) -> bool:
        return len(self.held) >= self.gang


@dataclass(frozen=True)
class CallForBids:
    """A two-phase policy's call: ``participants`` are asked to bid for ``gpus`` (leases of
    ``lease_s``) in round ``round``; ``others`` are the apps with room left that do not bid
    (candidates for leftover GPUs)."""

    round: int
    gpus: frozenset[str]
    participants: tuple[str, ...]
    others: tuple[str, ...]
    lease_s: float


@dataclass(frozen=True)
class Snapshot(Generic[S]):
    """What a policy decides on; ``policy_state`` is what its previous decision returned
    (None on the first call)."""

    now: float
    cluster: Cluster
    jobs: tuple[JobView, ...]  # active jobs, in arrival order
    policy_state: S | None = None
    # Two-phase (bidding) policies, module docstring: the driver's lease book (an
    # arbiter.rounds.ArbiterState), each app's reported ρ_current, the GPUs each app can use in
    # all (absent: the sum of its jobs' gangs), the bids answering the pending call, and the
    # GPUs the driver lets out (None: every free GPU; the live arbiter leaves drained ones out).
    book: ArbiterState | None = None
    rho: Mapping[str, float] = field(default_factory=dict)
    demand: Mapping[str, int] = field(default_factory=dict)
    bids: Mapping[str, Bid] = field(default_factory=dict)
    offerable: frozenset[str] | None = None

    @property
    def free(self) -> frozenset[str]:
        held = set().union(*(j.held for j in self.jobs)) if self.jobs else set()
        return self.cluster.gpu_ids - held


@dataclass(frozen=True)
class Decision(Generic[S]):
    """What a policy decided; ``policy_state`` comes back in the next snapshot."""

    allocation: Mapping[str, frozenset[str]] = field(default_factory=dict)
    policy_state: S | None = None
    wake_at: float | None = None  # call me again at this time even if nothing happens
    # job -> (cpus, mem_gb) in total over its machines; absent = GPU-proportional (docstring)
    grants: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # Two-phase policies: a call for bids to send (the next decide gets the bids), or the
    # auction that closed round ``closed_round`` (an arbiter.rounds.RoundOutcome; None when
    # nobody bid) for the driver to bind to its lease book.
    call: CallForBids | None = None
    outcome: RoundOutcome | None = None
    closed_round: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocation", MappingProxyType(dict(self.allocation)))
        object.__setattr__(self, "grants", MappingProxyType(dict(self.grants)))


class Policy(Protocol[S]):
    """``preemptive`` (optional, default True): False promises the policy never takes GPUs
    from a job, so a driver may skip calling it while no GPU is free. ``two_phase`` (optional,
    default False): the policy allocates leases to apps by calling for bids (module docstring);
    the simulator drives it through :class:`arbiter.sim.agents.SimulatedAgents`."""

    @property
    def name(self) -> str: ...

    @property
    def round_s(self) -> float | None: ...

    def decide(self, snapshot: Snapshot[S]) -> Decision[S]: ...


def machine_usage(
    cluster: Cluster,
    allocation: Mapping[str, frozenset[str]],
    grants: Mapping[str, tuple[float, float]],
) -> dict[str, list[float]]:
    """Machine -> [GPUs, CPUs, GB] held under ``allocation`` and ``grants`` (module docstring:
    a grant is split over the job's machines in proportion to its GPUs there)."""
    usage: dict[str, list[float]] = {}
    for job_id, gpus in allocation.items():
        if not gpus:
            continue
        per: dict[str, int] = {}
        for g in gpus:
            m = cluster.gpu(g).machine
            per[m] = per.get(m, 0) + 1
        grant = grants.get(job_id)
        for m, k in per.items():
            row = usage.setdefault(m, [0.0, 0.0, 0.0])
            row[0] += k
            if grant is None:
                mach = cluster.machine(m)
                row[1] += mach.cpus * k / mach.num_gpus
                row[2] += mach.mem_gb * k / mach.num_gpus
            else:
                row[1] += grant[0] * k / len(gpus)
                row[2] += grant[1] * k / len(gpus)
    return usage


def check_grants(
    cluster: Cluster,
    allocation: Mapping[str, frozenset[str]],
    grants: Mapping[str, tuple[float, float]],
) -> None:
    """Raise :class:`PolicyError` unless every grant goes to a job holding GPUs, is finite and
    >= 0, and no machine's CPUs or memory are exceeded (relative tolerance 1e-9)."""
    if not grants:
        return  # GPU-proportional everywhere: never above capacity
    for job_id, grant in grants.items():
        if not allocation.get(job_id):
            raise PolicyError(f"grant for job {job_id!r}, which holds no GPUs")
        if len(grant) != 2 or not all(math.isfinite(x) and x >= 0 for x in grant):
            raise PolicyError(f"job {job_id!r}: grant must be (cpus, mem_gb) >= 0, got {grant}")
    for m, (_, cpus, mem) in machine_usage(cluster, allocation, grants).items():
        mach = cluster.machine(m)
        for what, used, cap in (("CPUs", cpus, mach.cpus), ("GB of memory", mem, mach.mem_gb)):
            if used > cap * (1 + 1e-9) + 1e-9:
                raise PolicyError(f"machine {m}: {used:g} {what} granted, it has {cap:g}")


def check_decision(snapshot: Snapshot, decision: Decision) -> None:
    """Raise :class:`PolicyError` unless every GPU is known and held once, no gang is
    exceeded or given to an unknown job, and CPU/memory grants fit (:func:`check_grants`)."""
    jobs = {j.job_id: j for j in snapshot.jobs}
    seen: dict[str, str] = {}
    for job_id, gpus in decision.allocation.items():
        job = jobs.get(job_id)
        if job is None:
            raise PolicyError(f"allocation names job {job_id!r}, which is not active")
        if len(gpus) > job.gang:
            raise PolicyError(f"job {job_id!r} given {len(gpus)} GPUs, its gang is {job.gang}")
        unknown = snapshot.cluster.unknown(gpus)
        if unknown:
            raise PolicyError(f"job {job_id!r} given GPUs not in the cluster: {unknown[:3]}")
        for g in gpus:
            if g in seen:
                raise PolicyError(f"GPU {g} given to both {seen[g]!r} and {job_id!r}")
            seen[g] = job_id
    check_grants(snapshot.cluster, decision.allocation, decision.grants)


class FreePool:
    """Free GPUs grouped by machine, for placing gangs within one decision (module docstring).

    Mutable on purpose, but local to one ``decide`` call.
    """

    def __init__(self, cluster: Cluster, free: Iterable[str]) -> None:
        self.cluster = cluster
        self._order = cluster._index  # read-only look-up table
        self.by_machine: dict[str, list[str]] = {}
        for g in sorted(free, key=cluster.index):
            self.by_machine.setdefault(cluster.gpu(g).machine, []).append(g)
        self._machines = cluster._machine  # read-only look-up table
        self.size = sum(len(v) for v in self.by_machine.values())

    def give(self, gpus: Iterable[str]) -> None:
        for g in gpus:
            lst = self.by_machine.setdefault(self.cluster.gpu(g).machine, [])
            lst.append(g)
            lst.sort(key=self._order.__getitem__)
            self.size += 1

    def take_any(self, n: int, perf: Any = None) -> frozenset[str]:
        """Up to ``n`` free GPUs in cluster order, placement-blind (YARN containers), skipping
        machines whose GPU type gives ``perf`` no throughput."""
        out: list[str] = []
        for m in sorted(
            self.by_machine,
            key=lambda m: self._order[self.by_machine[m][0]] if self.by_machine[m] else math.inf,
        ):
            if len(out) >= n:
                break
            if not self.by_machine[m]:
                continue
            if (
                perf is not None
                and not perf.rate(placement_of(self.cluster, self.by_machine[m][:1])) > 0
            ):
                continue
            take = self.by_machine[m][: n - len(out)]
            self.by_machine[m] = self.by_machine[m][len(take) :]
            out.extend(take)
        self.size -= len(out)
        return frozenset(out)

    def _candidates(self, n: int) -> list[list[str]]:
        """Candidate machine lists (each totalling >= n free GPUs), best first per group."""
        groups: dict[str, list[str]] = {}
        for m, gpus in self.by_machine.items():
            if gpus:
                groups.setdefault(self._machines[m].gpu_type, []).append(m)
        out: list[list[str]] = []
        for machines in groups.values():
            if sum(len(self.by_machine[m]) for m in machines) >= n:
                out.append(self._fit(machines, n))
        if not out and self.size >= n:
            out.append(self._fit([m for ms in groups.values() for m in ms], n))
        return out

    def _fit(self, machines: list[str], n: int) -> list[str]:
        free = self.by_machine
        single = [m for m in machines if len(free[m]) >= n]
        if single:
            return [min(single, key=lambda m: len(free[m]))]  # best fit
        racks: dict[str, list[str]] = {}
        for m in machines:
            racks.setdefault(self._machines[m].rack, []).append(m)
        fitting = [ms for ms in racks.values() if sum(len(free[m]) for m in ms) >= n]
        pool = min(fitting, key=lambda ms: sum(len(free[m]) for m in ms)) if fitting else machines
        chosen, got = [], 0
        for m in sorted(pool, key=lambda m: -len(free[m])):
            chosen.append(m)
            got += len(free[m])
            if got >= n:
                break
        return chosen

    def take(self, n: int, perf: Any = None) -> frozenset[str] | None:
        """Take ``n`` free GPUs for one gang, or None if fewer are free."""
        if n <= 0:
            return frozenset()
        if n > self.size:
            return None
        candidates = self._candidates(n)
        if not candidates:
            return None
        best, best_key = None, None
        for machines in candidates:
            gpus, need = [], n
            for m in machines:
                take = self.by_machine[m][:need]
                gpus.extend(take)
                need -= len(take)
            rate = perf.rate(placement_of(self.cluster, gpus)) if perf is not None else 1.0
            if not rate > 0:
                continue  # the job cannot run on these GPUs (e.g. no throughput on the type)
            key = (-rate, len(machines))
            if best_key is None or key < best_key:
                best, best_key = gpus, key
        if best is None:
            return None
        chosen = set(best)
        for m in {self.cluster.gpu(g).machine for g in best}:
            self.by_machine[m] = [g for g in self.by_machine[m] if g not in chosen]
        self.size -= n
        return frozenset(best)


def rated_per_gang(perf: Any) -> bool:
    """True if ``perf`` rates a job only on its whole gang (no throughput curve over GPU
    counts: Philly/Tiresias/Synergy durations, Gavel readings), so an elastic policy must not
    run it on fewer GPUs (module docstring). None (the live arbiter) is not: CoDDL assumes
    linear scaling until measured."""
    return bool(getattr(perf, "rated_per_gang", False))


def ideal_rate(cluster: Cluster, gang: int, perf: Any) -> float:
    """The job's best rate on an empty cluster (placement score 1); NaN if nothing can run it.

    Per GPU type, every split of the gang over machines (integer partitions with parts no
    bigger than a machine, for gangs up to 16 GPUs; the even packings of k per machine beyond)
    is realised on the largest machines and rated: measured profiles sometimes favour spreading
    (Pollux's cifar10 runs faster on 3+1+1 than on 4+1). A gang no single type can hold is
    rated on the pool's placement across types.
    """
    by_type: dict[str, list[list[str]]] = {}
    per_machine: dict[str, list[str]] = {}
    for g in cluster.gpus:
        per_machine.setdefault(g.machine, []).append(g.id)
    for m in cluster.machines:
        if per_machine.get(m.name):
            by_type.setdefault(m.gpu_type, []).append(per_machine[m.name])
    best = -math.inf
    for machines in by_type.values():
        machines = sorted(machines, key=len, reverse=True)
        if sum(len(ms) for ms in machines) < gang:
            continue
        widest = len(machines[0])
        splits = (
            partitions(gang, widest)
            if gang <= 16
            else [
                (k,) * (gang // k) + ((gang % k,) if gang % k else ()) for k in range(1, widest + 1)
            ]
        )
        for parts in splits:
            if len(parts) > len(machines) or any(
                p > len(ms) for p, ms in zip(parts, machines, strict=False)
            ):
                continue
            ids = [g for p, ms in zip(parts, machines, strict=False) for g in ms[:p]]
            best = max(best, perf.rate(placement_of(cluster, ids)))
    if best == -math.inf:
        gpus = FreePool(cluster, cluster.gpu_ids).take(gang, perf)
        if gpus is None:
            return math.nan
        best = perf.rate(placement_of(cluster, gpus))
    return best if best > 0 else math.nan


def admit_and_place(snapshot: Snapshot, ranked: Iterable[JobView]) -> dict[str, frozenset[str]]:
    """The preemptive priority rule LAS, SRTF and SRSF share: jobs in ``ranked`` order are
    admitted while their gangs fit in the cluster (a gang that does not fit is skipped, so
    smaller ones behind it can run); admitted jobs that already run keep their GPUs (no
    needless migration), the other admitted jobs are placed with :class:`FreePool`, then the
    rest backfill what is still free; running jobs not placed are preempted. An admitted job the
    free GPUs cannot run (a type without throughput for it) gives way to the next in rank."""
    ranked = list(ranked)
    budget = snapshot.cluster.num_gpus
    admitted = []
    for job in ranked:
        if job.gang <= budget:
            admitted.append(job)
            budget -= job.gang
        if budget == 0:
            break
    alloc = {j.job_id: j.held for j in admitted if j.running}
    kept = set().union(*alloc.values()) if alloc else set()
    pool = FreePool(snapshot.cluster, snapshot.cluster.gpu_ids - kept)
    admitted_ids = {j.job_id for j in admitted}
    backfill = [j for j in ranked if j.job_id not in admitted_ids]
    for job in [j for j in admitted if not j.running] + backfill:
        if pool.size == 0:
            break
        if (gpus := pool.take(job.gang, job.perf)) is not None:
            alloc[job.job_id] = gpus
    return alloc
