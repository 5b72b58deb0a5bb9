"""Simulated Agents: the app side of Themis in the simulator (Themis §4.1-4.3, Fig. 8).

A two-phase policy (``two_phase = True``: :class:`arbiter.policies.themis.Themis`) never sees a
job's true state; it calls for bids, and the Agents of the apps answer. In the live arbiter the
Agents are the application masters over gRPC and the lease book is the arbiter's journal; in the
simulator :class:`SimulatedAgents` plays both: it owns the lease book, answers each call for bids
at once with the bid a truthful Agent would make from its app's true job state, and is itself a
one-phase policy the engine drives like any other. The policy object and its ``decide`` are the
same in both places.

What a simulated Agent knows and does (decided here; spec B.3-B.5):

* **ρ(G)** = (elapsed + T_rem(G)) / T_id (Eq. 2 with elapsed time, spec B.3): ``T_rem(G)`` is
  the app's remaining time if it held exactly ``G`` from now: its unfinished jobs, longest
  first, list-scheduled onto the GPUs of ``G`` (each job takes the ``gang`` GPUs that free up
  first and runs at its rate on the densest ``gang`` GPUs of ``G``, which prices placement); a
  job whose gang ``G`` cannot hold makes ``T_rem`` infinite (:func:`app_remaining_time`).
* **T_id** = B / min(app demand, R_C / N_avg) (:func:`arbiter.fairness.t_id_share`): the app
  alone on a 1/N_avg share of the cluster, capped at what it can use. B is the app's serial work
  (GPU-seconds at each job's ideal rate, finished jobs included), the app demand the GPUs all
  its jobs need at once, N_avg the time-averaged number of active apps since the app arrived,
  the app included. This equals the paper's T_cluster · N_avg (:func:`arbiter.fairness.t_id`)
  for apps that can use their share, and it is the share the simulator measures ρ against
  (:func:`arbiter.sim.engine.isolated_run`). The paper's product is not used for small apps: it
  makes a 1-GPU job among 30 apps on 64 GPUs 30 times slower than alone, so such a job reports
  ρ ≈ 0.1 while it waits and is never filtered in: measured on Philly days 40-40.5 as
  hyper-parameter apps (f = 0.8), max ρ_app 6.04 with the product against 4.33 with the share
  (LAS: 4.60); the worst app was one 1-GPU job, done 11,823 s after arrival for 1,957 s of work.
* **ρ_old** (the empty row) and the ρ_current it reports: ρ(held) when finite; an app holding
  nothing (or too little to run any job) reports "nothing for one more lease, then the ideal
  allocation", (elapsed + lease + T_rem(ideal)) / T_id, as the live Agent does
  (:class:`arbiter.agent.SchedulerEstimator`), unless the policy's ``rho_old`` is
  ``"infinite"`` (the ablation: ∞ and the auction's lexicographic rule).
* **Its app scheduler** spreads the app's leased GPUs over its jobs: jobs that run keep their
  GPUs; the others, longest remaining first, are placed with
  :class:`~arbiter.policies.base.FreePool`.
* **Releases.** GPUs the app holds that none of its jobs can use (every job placed) are given
  back at once: an app whose last jobs finished early sheds what it no longer needs. Leases too
  small to run any of its jobs, and leftover GPUs of a type none of its jobs runs on, are
  released at once too.

Released GPUs are called for again at once (up to ``rounds_per_call`` calls for bids per engine
call) while some waiting gang fits in what is free; otherwise they would idle for a whole lease.
``Decision.wake_at`` asks the engine to call again when the next lease ends or a reserved
leftover lease starts (lease-time rounding splits a lease in time).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from arbiter.auction import Bid
from arbiter.bids import generate_bid, shape_of
from arbiter.cluster import Cluster
from arbiter.fairness import t_id_share
from arbiter.placement import Placement, placement_of
from arbiter.policies.base import Decision, FreePool, JobView, Snapshot, ideal_rate
from arbiter.rounds import ArbiterState, LeaseSource, expire_leases, free_gpus, holdings_at

__all__ = ["AppRecord", "SimulatedAgents", "app_remaining_time"]


@dataclass(frozen=True)
class AppRecord:
    """What a simulated Agent remembers of its app."""

    arrival_s: float
    serial_work: float  # B: GPU-seconds at each job's ideal rate, all jobs seen so far
    demand_max: int  # GPUs all its jobs seen so far need at once
    jobs: frozenset[str]  # the job ids already counted
    n_integral_at_arrival: float  # ∫ N_apps dt up to the app's arrival


@dataclass(frozen=True)
class AgentsState:
    book: ArbiterState  # the lease book (the live arbiter's journal)
    policy_state: Any = None  # the two-phase policy's own state
    apps: Mapping[str, AppRecord] = field(default_factory=lambda: MappingProxyType({}))
    n_integral: float = 0.0  # ∫ N_apps(t) dt from the first call to ``last_t``
    last_t: float | None = None
    last_n: int = 0


# -- estimates ---------------------------------------------------------------------------------


def _iso_rate(job: JobView, cluster: Cluster) -> float:
    return job.ideal_rate or ideal_rate(cluster, job.gang, job.perf)


def _densest(cluster: Cluster, gpus: Iterable[str], n: int) -> list[str]:
    """``n`` GPUs of ``gpus`` on as few machines as possible (fullest machines first)."""
    by_machine: dict[str, list[str]] = {}
    for g in sorted(gpus, key=cluster.index):
        by_machine.setdefault(cluster.gpu(g).machine, []).append(g)
    out: list[str] = []
    for ms in sorted(by_machine.values(), key=lambda ms: -len(ms)):
        out.extend(ms[: n - len(out)])
        if len(out) >= n:
            break
    return out


_RATES: dict[tuple[int, int, int, frozenset[str]], tuple[Cluster, Any, float]] = {}
_RATES_MAX = 200_000


def _rate_on(cluster: Cluster, job: JobView, gpus: frozenset[str]) -> float:
    """The job's rate on the densest ``gang`` GPUs of ``gpus``, memoised: ρ prices the same
    holdings and candidate sets decision after decision (the entry keeps the cluster and the
    perf model alive, so their ids in the key cannot be reused while it exists)."""
    key = (id(cluster), id(job.perf), job.gang, gpus)
    hit = _RATES.get(key)
    if hit is not None and hit[0] is cluster and hit[1] is job.perf:
        return hit[2]
    if len(_RATES) >= _RATES_MAX:
        _RATES.clear()
    rate = job.perf.rate(placement_of(cluster, _densest(cluster, gpus, job.gang)))
    _RATES[key] = (cluster, job.perf, rate)
    return rate


def app_remaining_time(
    jobs: Sequence[JobView], cluster: Cluster, gpus: frozenset[str] | None, n: int = 0
) -> float:
    """T_rem of an app: its unfinished jobs, longest first, list-scheduled on ``gpus`` (each job
    takes the ``gang`` GPUs that free up first; module docstring). ``gpus=None`` prices ``n``
    GPUs of an ideal placement (each job at its ideal rate). ∞ if a gang does not fit.

    >>> from arbiter.cluster import shorthand_cluster
    >>> c = shorthand_cluster("nodes:1:4")
    >>> jobs = [JobView(f"j{i}", "a", "q", 0.0, 1, remaining_work=w, work=w, ideal_rate=1.0)
    ...         for i, w in enumerate([30.0, 20.0, 10.0])]
    >>> app_remaining_time(jobs, c, None, 2)  # 30 on one GPU, 20 then 10 on the other
    30.0
    >>> app_remaining_time(jobs, c, None, 1)
    60.0
    """
    if gpus is not None and not isinstance(gpus, frozenset):
        gpus = frozenset(gpus)
    size = n if gpus is None else len(gpus)
    times: list[tuple[float, int]] = []
    for j in jobs:
        rem = j.remaining_work or 0.0
        if rem <= 0:
            continue
        if j.gang > size:
            return math.inf
        rate = _iso_rate(j, cluster) if gpus is None else _rate_on(cluster, j, gpus)
        if not rate > 0:
            return math.inf
        times.append((rem / rate, j.gang))
    if not times:
        return 0.0
    times.sort(key=lambda t: -t[0])
    free = [0.0] * size
    for dur, gang in times:
        taken = [heapq.heappop(free) for _ in range(gang)]
        end = max(taken) + dur
        for _ in range(gang):
            heapq.heappush(free, end)
    return max(free)


@dataclass(frozen=True)
class _App:
    """One app as its simulated Agent sees it now."""

    app_id: str
    jobs: tuple[JobView, ...]
    t_id: float
    elapsed: float

    @property
    def demand(self) -> int:
        """GPUs its unfinished jobs need at once."""
        return sum(j.gang for j in self.jobs)

    @property
    def min_gang(self) -> int:
        return min(j.gang for j in self.jobs)

    def rho(self, cluster: Cluster, gpus: frozenset[str]) -> float:
        if not gpus:
            return math.inf
        return (self.elapsed + app_remaining_time(self.jobs, cluster, gpus)) / self.t_id

    def rho_old(self, cluster: Cluster, held: frozenset[str], lease_s: float, rule: str) -> float:
        rho = self.rho(cluster, held)
        if math.isfinite(rho) or rule == "infinite":
            return rho
        ideal = app_remaining_time(self.jobs, cluster, None, min(cluster.num_gpus, self.demand))
        return (self.elapsed + lease_s + ideal) / self.t_id

    def bid(self, cluster: Cluster, offered: frozenset[str], held: frozenset[str], room: int,
            rho_old: float, max_rows: int) -> Bid:  # fmt: skip
        """Its bid for ``offered``; ``rho_old`` is :meth:`rho_old` of ``held``."""
        if len(held) + room < 1:
            return Bid(self.app_id, {frozenset(): rho_old})

        def priced(gpus: frozenset[str], _placement: Placement) -> float:
            return rho_old if gpus == held else self.rho(cluster, gpus)

        return generate_bid(
            self.app_id, cluster, offered - held, priced,
            demand_max=len(held) + room, held=held, max_rows=max_rows,
        )  # fmt: skip

    def assign(self, cluster: Cluster, held: frozenset[str]) -> dict[str, frozenset[str]]:
        """The app scheduler: jobs that run keep their GPUs if still held; the others, longest
        remaining first, are placed on what is left."""
        alloc: dict[str, frozenset[str]] = {}
        used: set[str] = set()
        for j in self.jobs:
            if j.running and j.held <= held:
                alloc[j.job_id] = j.held
                used |= j.held
        if len(alloc) == len(self.jobs) or len(used) == len(held):
            return alloc  # nothing left to place, or nothing left to place it on
        pool = FreePool(cluster, held - used)
        waiting = [j for j in self.jobs if j.job_id not in alloc]
        waiting.sort(key=lambda j: (-(j.remaining_work or 0.0) / _iso_rate(j, cluster), j.job_id))
        for j in waiting:
            if pool.size == 0:
                break
            gpus = pool.take(j.gang, j.perf)
            if gpus is not None:
                alloc[j.job_id] = gpus
        return alloc


# -- the lease book ------------------------------------------------------------------------------


def _runs_on(job: JobView, cluster: Cluster, gpus: Iterable[str]) -> bool:
    one = next(iter(gpus), None)
    return one is not None and job.perf.rate(shape_of(cluster, frozenset((one,)))) > 0


def _release_unusable(book: ArbiterState, cluster: Cluster, now: float,
                      apps: Mapping[str, _App],
                      only: Collection[str] | None = None) -> ArbiterState:  # fmt: skip
    """Agents release leases (live or reserved for later) too small to run any of their jobs,
    and leftover GPUs of a type none of their jobs runs on. ``only``: just these apps (the
    others' leases have not changed since they were last checked, so neither has the verdict)."""
    live_by_app, committed = holdings_at(book, now)
    leftover_apps = {
        lease.app_id for lease in book.leases
        if lease.source is LeaseSource.LEFTOVER and lease.live_at(now)
    }  # fmt: skip
    drop = set()
    for a, gpus in committed.items():
        if only is not None and a not in only:
            continue
        app = apps[a]
        if len(gpus) < app.min_gang:
            drop.add(a)
            continue
        live = live_by_app.get(a, frozenset())
        if a in leftover_apps and live and not any(_runs_on(j, cluster, live) for j in app.jobs):
            drop.add(a)
    if not drop:
        return book
    keep = tuple(lease for lease in book.leases if lease.app_id not in drop or lease.end <= now)
    return replace(book, leases=keep)


def _shed_unused(book: ArbiterState, cluster: Cluster, now: float,
                 apps: Mapping[str, _App],
                 only: Collection[str] | None = None) -> ArbiterState:  # fmt: skip
    """Cut GPUs out of an app's live leases that none of its jobs can use (every job placed).
    ``only``: just these apps (shedding again what was shed, with the same jobs, cuts nothing:
    the app's jobs then take exactly its GPUs)."""
    live, _ = holdings_at(book, now)
    unused: dict[str, frozenset[str]] = {}
    for a, gpus in live.items():
        if only is not None and a not in only:
            continue
        alloc = apps[a].assign(cluster, gpus)
        if len(alloc) == len(apps[a].jobs):
            unused[a] = gpus - frozenset().union(*alloc.values())
    if not any(unused.values()):
        return book
    leases = []
    for lease in book.leases:
        drop = unused.get(lease.app_id, frozenset()) & lease.gpus
        if drop and lease.live_at(now):
            if lease.gpus - drop:
                leases.append(replace(lease, gpus=lease.gpus - drop))
            continue
        leases.append(lease)
    return replace(book, leases=tuple(leases))


def _track_apps(st: AgentsState, snapshot: Snapshot[AgentsState]) -> AgentsState:
    """Advance ∫ N_apps dt to now and record apps (and jobs) seen for the first time."""
    now, cluster = snapshot.now, snapshot.cluster
    integral = st.n_integral
    if st.last_t is not None:
        integral += st.last_n * max(0.0, now - st.last_t)
    by_app: dict[str, list[JobView]] = {}
    for j in snapshot.jobs:
        by_app.setdefault(j.app_id, []).append(j)
    records: dict[str, AppRecord] = {}
    for a, jobs in by_app.items():
        rec = st.apps.get(a) or AppRecord(
            min(j.arrival_s for j in jobs), 0.0, 0, frozenset(), integral
        )
        new = [j for j in jobs if j.job_id not in rec.jobs]
        if new:
            rec = replace(
                rec,
                serial_work=rec.serial_work + sum(
                    j.gang * (j.work or j.remaining_work or 0.0) / _iso_rate(j, cluster)
                    for j in new
                ),
                demand_max=rec.demand_max + sum(j.gang for j in new),
                jobs=rec.jobs | {j.job_id for j in new},
            )  # fmt: skip
        records[a] = rec
    return replace(st, apps=MappingProxyType(records), n_integral=integral, last_t=now,
                   last_n=len(by_app))  # fmt: skip


def _apps(st: AgentsState, snapshot: Snapshot[AgentsState]) -> dict[str, _App]:
    now, cluster = snapshot.now, snapshot.cluster
    by_app: dict[str, list[JobView]] = {}
    for j in snapshot.jobs:
        by_app.setdefault(j.app_id, []).append(j)
    out = {}
    for a, jobs in by_app.items():
        rec = st.apps[a]
        span = now - rec.arrival_s
        n_avg = (st.n_integral - rec.n_integral_at_arrival) / span if span > 0 else st.last_n
        tid = t_id_share(max(rec.serial_work, 1e-9), cluster.num_gpus, max(1, rec.demand_max),
                   max(1.0, n_avg))  # fmt: skip
        out[a] = _App(a, tuple(jobs), tid, max(0.0, span))
    return out


def _only(bids: Mapping[str, Bid], apps: Mapping[str, _App]) -> Mapping[str, Bid]:
    """The kept bid tables of the active apps only (unchanged if no other app has one)."""
    if all(a in apps for a in bids):
        return bids
    return MappingProxyType({a: b for a, b in bids.items() if a in apps})


class _Rho(Mapping[str, float]):
    """Each app's ρ_current for one call, computed when the policy reads it (Themis reads it
    only when GPUs are free and some app has room) and remembered in ``memo`` per (app,
    holding): the apps' jobs do not change within one engine call, so neither does ρ."""

    __slots__ = ("_apps", "_held", "_memo", "_price")

    def __init__(self, apps: Mapping[str, _App], held: Mapping[str, frozenset[str]],
                 price: Callable[[_App, frozenset[str]], float],
                 memo: dict[tuple[str, frozenset[str]], float]) -> None:  # fmt: skip
        self._apps, self._held, self._price, self._memo = apps, held, price, memo

    def __getitem__(self, app_id: str) -> float:
        app, held = self._apps[app_id], self._held[app_id]
        key = (app_id, held)
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = self._price(app, held)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._apps)

    def __len__(self) -> int:
        return len(self._apps)


@dataclass(frozen=True)
class SimulatedAgents:
    """A two-phase ``policy`` (Themis) with a truthful simulated Agent per app and the lease
    book, as one policy the simulator engine drives (module docstring)."""

    policy: Any
    rounds_per_call: int = 4

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def round_s(self) -> float | None:
        return self.policy.round_s

    @property
    def batch_s(self) -> float:
        return float(getattr(self.policy, "batch_s", 0.0))

    def decide(self, snapshot: Snapshot[AgentsState]) -> Decision[AgentsState]:
        now, cluster = snapshot.now, snapshot.cluster
        policy = self.policy
        st: AgentsState = snapshot.policy_state or AgentsState(ArbiterState(cluster.gpu_ids))
        st = _track_apps(st, snapshot)
        apps = _apps(st, snapshot)
        book, _ = expire_leases(st.book, now)
        book = replace(book, leases=tuple(x for x in book.leases if x.app_id in apps),
                       last_bids=_only(book.last_bids, apps))  # fmt: skip
        book = _shed_unused(_release_unusable(book, cluster, now, apps), cluster, now, apps)
        inner = st.policy_state
        forget = getattr(policy, "forget", None)
        if forget is not None:  # an app that is gone is forgotten, as its record is
            inner = forget(inner, apps)
        rule, lease_s = policy.rho_old, policy.lease_s
        demand = {a: app.demand for a, app in apps.items()}
        memo: dict[tuple[str, frozenset[str]], float] = {}

        def price(app: _App, held: frozenset[str]) -> float:
            return app.rho_old(cluster, held, lease_s, rule)

        for _ in range(self.rounds_per_call):
            live, committed = holdings_at(book, now)
            held = {a: live.get(a, frozenset()) for a in apps}
            rho = _Rho(apps, held, price, memo)
            call = policy.decide(replace(snapshot, policy_state=inner, book=book, rho=rho,
                                         demand=demand, bids={}))  # fmt: skip
            inner = call.policy_state
            if call.call is None:
                break
            offered = call.call.gpus
            bids = {
                a: apps[a].bid(cluster, offered, held[a],
                               max(0, demand[a] - len(committed.get(a, ()))), rho[a],
                               policy.max_rows)
                for a in call.call.participants
            }  # fmt: skip
            done = policy.decide(replace(snapshot, policy_state=inner, book=book, rho=rho,
                                         demand=demand, bids=bids))  # fmt: skip
            inner = done.policy_state
            if done.outcome is not None:
                last = dict(book.last_bids)
                last.update(bids)
                book = replace(book, leases=book.leases + done.outcome.granted,
                               round=max(book.round, done.outcome.round),
                               last_bids=MappingProxyType(last))  # fmt: skip
                # Only the apps granted something can have something to release or shed.
                got = {lease.app_id for lease in done.outcome.granted}
                book = _release_unusable(book, cluster, now, apps, got)
                book = _shed_unused(book, cluster, now, apps, got)
            if free_gpus(book, now) == offered:
                break  # nothing stuck: another call now would change nothing
        final, _ = holdings_at(book, now)
        alloc: dict[str, frozenset[str]] = {}
        for a, app in apps.items():
            alloc.update(app.assign(cluster, final.get(a, frozenset())))
        wake = min(
            (t for lease in book.leases for t in (lease.start, lease.end) if t > now),
            default=None,
        )
        return Decision(alloc, replace(st, book=book, policy_state=inner), wake)
