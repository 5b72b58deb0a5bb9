"""Event-driven, trace-driven simulator: the shell around a policy's ``decide``.

Events are job arrivals, job completions, round ticks and wake-ups a policy asks for (lease
ends). Between events every running job progresses at its placement's rate
(:mod:`arbiter.sim.perf`). The policy is called

* in *event* mode (``round_s`` None): at every time with an arrival, a completion or a wake-up;
* in *round* mode: at every multiple of ``round_s`` while jobs are active, and at wake-ups. An
  arrival waits for the next round and GPUs freed mid-round idle until it (Gavel's rounds).

**Batch window** (opt-in, event mode only; ``batch_s``, a policy's own ``batch_s`` such as
Themis's, overridden by :func:`simulate`'s): the first event that asks for a decision (an
arrival, a completion, a wake-up) opens a window of ``batch_s`` seconds, and every event within
it is decided together by one call at its end, as the live arbiter offers the GPUs freed
within its batch window together (:func:`arbiter.rounds.offer_due`). Completions, arrivals and
progress stay exact in time; what waits is the decision: an arrival waits up to ``batch_s`` for
its first GPUs, GPUs freed by a completion idle until the window closes, and a job whose lease
ended keeps running on its GPUs until then (a lease overruns by at most ``batch_s``).
Consecutive decisions are at least ``batch_s`` apart, so a replay makes at most
``span / batch_s`` of them. ``batch_s = 0`` (the default) is the exact event mode, decision
for decision. Why: a whole-Philly Themis replay makes a decision at nearly every lease end
(README "Speed").

The engine applies each decision and checks it as it goes (every GPU in the cluster and held
once, no gang exceeded, only active jobs): a violation raises :class:`PolicyError`. A decision
giving a job more than its gang is an error. Jobs run only with their whole gang, except under
a policy declaring ``elastic = True`` (AFS): there a job runs on any non-empty share up
to its gang at ``perf.rate`` of that share (partial gangs), and busy and attained GPU-seconds
count the GPUs it holds. A job whose perf model is rated per whole gang
(:func:`~arbiter.policies.base.rated_per_gang`: Philly, Tiresias, Synergy and Gavel jobs have
no throughput curve) still needs its whole gang under an elastic policy, so no trace gets a
free speed-up from a share its data never measured. Ties are broken by arrival time, then app
id (the jobs of an app that arrive together stay together; for single-job apps the app id is
the job id), then job id, and policies get a seed, so a run is deterministic.

CPU and memory (Synergy): a job whose perf model has ``rate_with`` (a
:class:`~arbiter.sim.perf.ResourcePerfModel`) runs at ``rate_with(placement, cpus, mem_gb)``
with its grant from ``Decision.grants``, or its GPU-proportional share of its machines when the
decision gives none; a new grant alone (same GPUs) changes its rate from the decision on. The
engine checks grants like GPUs: only to jobs holding GPUs, and per machine never more CPUs or
memory than it has (:func:`~arbiter.policies.base.check_grants`). Other perf models ignore
grants, so every existing number is unchanged. ``placement_score`` stays a placement measure:
it uses the rate at the reference allocation (``rate``), not the grant.

:func:`isolated_run` is the ``isolated`` policy, the denominator of ρ: each job alone on a 1/N(t)
share of the cluster, N(t) the jobs active at t in that same run, i.e. egalitarian processor
sharing in which a job of gang g runs at ``iso_rate · min(1, C / (N(t)·g))``. ``iso_rate`` is the
job's rate on 1/N of *every* GPU type: the mean of its best single-type rates weighted by how
many GPUs of each type there are (types its gang does not fit on are left out). This makes ρ
of every policy share one denominator that does not depend on the policy.

:func:`isolated_app_run` is the same over *apps* (Themis measures ρ per app; apps come from
:mod:`arbiter.sim.apps`): every active app gets 1/N_apps(t) of the cluster's GPUs, water-filled
max-min over its active jobs with each job capped at its gang, and a job of gang g holding x
GPUs runs at ``iso_rate · min(1, x / g)``. As in :func:`isolated_run`, a share an app cannot use
(its jobs' gangs sum to less) idles rather than going to other apps, so a single-job app gets
exactly its :func:`isolated_run` JCT.

Apps in a run: a job's view carries ``app_attained_gpu_s``, the GPU-seconds every job of its app
has run so far (finished jobs included), for policies that rank apps (``las``).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from arbiter.cluster import Cluster
from arbiter.placement import placement_of
from arbiter.policies.base import (
    Decision,
    JobView,
    Policy,
    PolicyError,
    Snapshot,
    check_grants,
    ideal_rate,
    rated_per_gang,
)
from arbiter.sim.perf import SimJob

__all__ = [
    "JobResult",
    "SimResult",
    "isolated_app_run",
    "isolated_rate",
    "isolated_run",
    "simulate",
]

_DONE = 1e-9  # relative remaining work treated as finished (float rounding)


@dataclass
class JobResult:
    job_id: str
    app_id: str
    queue: str
    model: str
    gang: int
    arrival_s: float
    start_s: float | None = None
    finish_s: float | None = None
    gpu_time_s: float = 0.0  # GPU-seconds held (running or hoarding)
    busy_gpu_s: float = 0.0  # GPU-seconds running
    placement_score: float = 1.0  # time-weighted rate / ideal rate (1 = ideal placement)
    preemptions: int = 0
    isolated_jct_s: float | None = None

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def queueing_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.arrival_s

    @property
    def rho(self) -> float | None:
        if self.jct_s is None or not self.isolated_jct_s:
            return None
        return self.jct_s / self.isolated_jct_s


@dataclass
class SimResult:
    policy: str
    cluster: str
    num_gpus: int
    jobs: list[JobResult]
    timeline: list[tuple[float, int, int]] = field(default_factory=list)  # (t, busy, held)
    decisions: int = 0
    wall_s: float = 0.0
    skipped: list[str] = field(default_factory=list)  # gang > cluster, or no type runs it
    isolated_act_s: dict[str, float] | None = None  # app -> ACT under isolated_app_run


class _Run:
    __slots__ = (
        "_cached",
        "attained",
        "aux",
        "grant",
        "held",
        "ideal",
        "job",
        "place_rate",
        "rate",
        "remaining",
        "res",
        "run_s",
        "score_w",
        "since",
        "version",
    )  # fmt: skip

    def __init__(self, job: SimJob, res: JobResult, ideal: float) -> None:
        self.job, self.res, self.ideal = job, res, ideal
        self.remaining = job.work
        self.held: frozenset[str] = frozenset()
        self.aux = hasattr(job.perf, "rate_with")  # the rate depends on CPU and memory
        self.grant: tuple[float, float] | None = None  # (cpus, mem_gb) it runs with
        self.rate = 0.0
        self.place_rate = 0.0  # rate at the reference allocation (placement score)
        self.since = job.arrival_s
        self.attained = 0.0
        self.version = 0
        self.run_s = 0.0
        self.score_w = 0.0  # ∫ rate/ideal dt over running time
        self._cached: tuple[tuple[int, float | None], JobView] | None = None

    def settle(self, t: float) -> None:
        dt = t - self.since
        if dt > 0:
            self.res.gpu_time_s += len(self.held) * dt
            if self.rate > 0:
                self.remaining -= self.rate * dt
                self.res.busy_gpu_s += len(self.held) * dt
                self.attained += len(self.held) * dt
                self.run_s += dt
                self.score_w += self.place_rate / self.ideal * dt
        self.since = t

    def attained_at(self, t: float) -> float:
        """GPU-seconds run so far, the current stretch included."""
        return self.attained + (len(self.held) * (t - self.since) if self.rate > 0 else 0.0)

    def view(self, t: float, app_attained: float | None = None) -> JobView:
        running = self.rate > 0
        key = (self.version, app_attained)
        if not running and self._cached is not None and self._cached[0] == key:
            return self._cached[1]  # a job that does not run does not change between decisions
        dt = t - self.since
        view = JobView(
            job_id=self.job.job_id,
            app_id=self.job.app_id,
            queue=self.job.queue,
            arrival_s=self.job.arrival_s,
            gang=self.job.gang,
            held=self.held,
            attained_gpu_s=self.attained_at(t),
            first_start_s=self.res.start_s,
            remaining_work=max(0.0, self.remaining - (self.rate * dt if running else 0.0)),
            work=self.job.work,
            perf=self.job.perf,
            ideal_rate=self.ideal,
            sensitivity=self.job.sensitivity,
            grant=self.grant if running else None,
            app_attained_gpu_s=app_attained,
        )
        if not running:
            self._cached = (key, view)
        return view


def _ideal_rates(cluster: Cluster, jobs: Sequence[SimJob]) -> dict[tuple[int, int], float]:
    out: dict[tuple[int, int], float] = {}
    for j in jobs:
        key = (id(j.perf), j.gang)
        if key not in out:
            out[key] = ideal_rate(cluster, j.gang, j.perf)
    return out


def simulate(
    jobs: Sequence[SimJob],
    cluster: Cluster,
    policy: Policy[Any],
    *,
    round_s: float | None = None,
    batch_s: float | None = None,
    progress: bool = False,
    on_decision: Callable[[Snapshot[Any], Decision[Any]], None] | None = None,
    max_decisions: int | None = None,
) -> SimResult:
    """Replay ``jobs`` on ``cluster`` under ``policy`` (module docstring).

    ``round_s`` overrides the policy's own round length (0 = event mode); ``batch_s`` the
    policy's own batch window (0 = exact event mode; module docstring). ``on_decision`` sees
    every snapshot and decision (tests use it to check invariants). ``max_decisions`` guards
    against a policy that never lets jobs finish.
    """
    started = time.perf_counter()
    if getattr(policy, "two_phase", False):  # Themis: simulated Agents answer its calls
        from arbiter.sim.agents import SimulatedAgents

        policy = SimulatedAgents(policy)
    rnd = policy.round_s if round_s is None else (round_s or None)
    if rnd is not None and not (rnd > 0 and math.isfinite(rnd)):
        raise ValueError(f"round_s must be positive, got {rnd}")
    batch = float(getattr(policy, "batch_s", 0.0) or 0.0) if batch_s is None else batch_s
    if not (batch >= 0 and math.isfinite(batch)):
        raise ValueError(f"batch_s must be >= 0 and finite, got {batch}")
    if batch and rnd is not None:
        raise ValueError("batch_s applies to event mode; this run has rounds of "
                         f"{rnd} s")  # fmt: skip
    order = sorted(jobs, key=lambda j: (j.arrival_s, j.app_id, j.job_id))
    if len({j.job_id for j in order}) != len(order):
        raise ValueError("job ids must be unique")
    fits = [j for j in order if j.gang <= cluster.num_gpus]
    ideal = _ideal_rates(cluster, fits)
    # Skipped: gangs bigger than the cluster, and jobs no GPU type can run (zero throughput).
    runnable = {j.job_id for j in fits if ideal[(id(j.perf), j.gang)] > 0}
    skipped = [j.job_id for j in order if j.job_id not in runnable]
    order = [j for j in order if j.job_id in runnable]
    results = [JobResult(j.job_id, j.app_id, j.queue, j.model, j.gang, j.arrival_s) for j in order]
    out = SimResult(policy.name, cluster.name, cluster.num_gpus, results, skipped=skipped)

    active: dict[str, _Run] = {}  # insertion order = arrival order
    app_done: dict[str, float] = {}  # app -> GPU-seconds its finished jobs ran
    owner: dict[str, str] = {}
    heap: list[tuple[float, int, str, str, int]] = []  # (t, seq, kind, job_id, version)
    seq = 0
    nxt = 0  # next arrival index
    state: Any = None
    busy = held_total = 0
    finished = 0
    next_tick = None if rnd is None else 0.0
    due: float | None = None  # batched: when the events since the window opened are decided
    due_woken = False  # batched: a wake-up is among them
    bar = _progress(len(order), policy.name) if progress else None
    preemptive = getattr(policy, "preemptive", True)
    elastic = getattr(policy, "elastic", False)

    def schedule_completion(run: _Run, t: float) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(
            heap, (t + max(0.0, run.remaining) / run.rate, seq, "done", run.job.job_id, run.version)
        )

    t = 0.0
    while nxt < len(order) or active:
        candidates: list[float] = []
        if nxt < len(order):
            candidates.append(order[nxt].arrival_s)
        if heap:
            candidates.append(heap[0][0])
        if rnd is not None and active:
            assert next_tick is not None  # a number whenever rounds are on
            candidates.append(next_tick)
        if due is not None:
            candidates.append(due)
        if not candidates:
            raise PolicyError(
                f"policy {policy.name!r} left {len(active)} jobs with nothing scheduled "
                f"to happen at t={t:.0f} s (no running job, no wake-up)"
            )
        t = max(t, min(candidates))
        if rnd is not None and (next_tick is None or next_tick < t):
            next_tick = math.ceil(t / rnd - 1e-12) * rnd
        decide = woken = False
        while nxt < len(order) and order[nxt].arrival_s <= t:
            job = order[nxt]
            active[job.job_id] = _Run(job, results[nxt], ideal[(id(job.perf), job.gang)])
            nxt += 1
            decide = decide or rnd is None
        while heap and heap[0][0] <= t:
            _, _, kind, job_id, version = heapq.heappop(heap)
            if kind == "wake":
                decide = woken = True
                continue
            run = active.get(job_id)
            if run is None or run.version != version:
                continue
            run.settle(t)
            run.remaining = 0.0
            run.res.finish_s = t
            run.res.placement_score = run.score_w / max(run.run_s, 1e-12)
            app_done[run.job.app_id] = app_done.get(run.job.app_id, 0.0) + run.attained
            for g in run.held:
                del owner[g]
            busy -= len(run.held)
            held_total -= len(run.held)
            del active[job_id]
            finished += 1
            if bar:
                bar.update(1)
            decide = decide or rnd is None
        if rnd is not None and next_tick is not None and t >= next_tick:
            decide = True
            next_tick = t + rnd
        if batch:  # every event within the window is decided together, at its end
            woken = due_woken = due_woken or woken
            if decide and due is None:
                due = t + batch
            decide = due is not None and t >= due
            if decide:
                due, due_woken = None, False
        if decide and not preemptive and len(owner) == cluster.num_gpus and not woken:
            decide = False  # a non-preemptive policy can change nothing on a full cluster
        if decide and active:
            snap: Snapshot[Any] = Snapshot(t, cluster, _views(active, app_done, t), state)
            decision = policy.decide(snap)
            out.decisions += 1
            if max_decisions is not None and out.decisions > max_decisions:
                raise PolicyError(f"policy {policy.name!r} exceeded {max_decisions} decisions")
            if on_decision:
                on_decision(snap, decision)
            state = decision.policy_state
            busy, held_total, changed = _apply(
                decision, active, owner, cluster, t, busy, held_total, policy.name, elastic
            )
            for run in changed:
                if run.rate > 0:
                    schedule_completion(run, t)
            if decision.wake_at is not None and decision.wake_at > t:
                seq += 1
                heapq.heappush(heap, (decision.wake_at, seq, "wake", "", 0))
        if not out.timeline or out.timeline[-1][1:] != (busy, held_total):
            out.timeline.append((t, busy, held_total))
    if bar:
        bar.close()
    out.wall_s = time.perf_counter() - started
    return out


def _views(active: dict[str, _Run], app_done: dict[str, float], t: float) -> tuple[JobView, ...]:
    """Views of the active jobs, each with its app's attained service (finished jobs too)."""
    app_total: dict[str, float] = {}
    for run in active.values():
        app = run.job.app_id
        app_total[app] = app_total.get(app, app_done.get(app, 0.0)) + run.attained_at(t)
    return tuple(r.view(t, app_total[r.job.app_id]) for r in active.values())


def _grant(
    decision: Decision[Any], cluster: Cluster, run: _Run, gpus
) -> tuple[float, float] | None:
    """The (cpus, mem_gb) a resource-aware job runs with on ``gpus`` (module docstring)."""
    if not run.aux or len(gpus) < run.job.gang:
        return None
    grant = decision.grants.get(run.job.job_id)
    if grant is None:
        return cluster.proportional_share(gpus)
    # tuple() normalises a grant a policy gave as a list; Decision.grants declares it a pair
    return cast("tuple[float, float]", tuple(grant))


def _apply(decision, active, owner, cluster, t, busy, held_total, name, elastic=False):
    alloc = decision.allocation
    changed = []
    for job_id, gpus in alloc.items():
        run = active.get(job_id)
        if run is None:
            raise PolicyError(f"policy {name!r} gave GPUs to {job_id!r}, which is not active")
        if len(gpus) > run.job.gang:
            raise PolicyError(
                f"policy {name!r} gave {job_id!r} {len(gpus)} GPUs, its gang is {run.job.gang}"
            )
        if gpus != run.held or (run.aux and _grant(decision, cluster, run, gpus) != run.grant):
            changed.append(run)
    for run in active.values():
        if run.held and run.job.job_id not in alloc:
            changed.append(run)
    for run in changed:
        run.settle(t)
        for g in run.held:
            del owner[g]
        held_total -= len(run.held)
        if run.rate > 0:
            busy -= len(run.held)
    for run in changed:
        new = alloc.get(run.job.job_id, frozenset())
        for g in new:
            if g in owner:
                raise PolicyError(
                    f"policy {name!r} gave GPU {g} to both {owner[g]!r} and {run.job.job_id!r}"
                )
            if g not in cluster:
                raise PolicyError(f"policy {name!r} gave unknown GPU {g!r} to {run.job.job_id!r}")
            owner[g] = run.job.job_id
        was_running = run.rate > 0
        run.held = new
        run.version += 1
        held_total += len(new)
        partial_ok = elastic and not rated_per_gang(run.job.perf)  # module docstring
        if new and (partial_ok or len(new) >= run.job.gang):
            placement = placement_of(cluster, new)
            run.place_rate = run.job.perf.rate(placement)
            run.grant = _grant(decision, cluster, run, new)
            run.rate = run.job.perf.rate_with(placement, *run.grant) if run.aux else run.place_rate
            if not run.rate > 0:
                raise PolicyError(f"job {run.job.job_id!r} has rate {run.rate} on its GPUs")
            busy += len(new)
            if run.res.start_s is None:
                run.res.start_s = t
        else:
            run.rate = run.place_rate = 0.0
            run.grant = None
            if was_running:
                run.res.preemptions += 1
    if decision.grants:
        try:
            check_grants(cluster, alloc, decision.grants)
        except PolicyError as exc:
            raise PolicyError(f"policy {name!r}: {exc}") from None
    return busy, held_total, changed


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="job", leave=False, mininterval=0.5)


def isolated_rate(cluster: Cluster, job: SimJob) -> float:
    """The job's rate on a 1/N share of every GPU type (module docstring); NaN if no type
    can run it."""
    by_type: dict[str, list[str]] = {}
    for g in cluster.gpus:
        by_type.setdefault(g.gpu_type, []).append(g.id)
    total, weight = 0.0, 0
    for ids in by_type.values():
        if len(ids) >= job.gang:
            sub = Cluster.from_machines(
                cluster.name,
                [m for m in cluster.machines if m.gpu_type == cluster.gpu(ids[0]).gpu_type],
            )
            rate = ideal_rate(sub, job.gang, job.perf)
            if rate > 0:  # NaN: the job has no throughput on this type
                total += len(ids) * rate
                weight += len(ids)
    if weight:
        return total / weight
    return ideal_rate(cluster, job.gang, job.perf)  # no single type holds it (NaN: none runs it)


def isolated_run(jobs: Sequence[SimJob], cluster: Cluster) -> dict[str, float]:
    """JCT of every job (gang <= cluster) under the isolated policy (module docstring).

    Egalitarian processor sharing with per-gang virtual clocks: a job of gang g advances at
    ``iso_rate · min(1, C / (N g))``; all jobs of one gang share that factor, so each gang keeps
    a heap of finish points on its own virtual clock and an event costs O(gangs + log n).
    """
    c = cluster.num_gpus
    order = sorted((j for j in jobs if j.gang <= c), key=lambda j: (j.arrival_s, j.job_id))
    rate_cache: dict[tuple[int, int], float] = {}
    clocks: dict[int, float] = {}  # gang -> virtual clock (seconds of full-speed running)
    heaps: dict[int, list[tuple[float, str]]] = {}
    arrival = {j.job_id: j.arrival_s for j in order}
    n_active = 0
    jct: dict[str, float] = {}
    t, k = 0.0, 0

    def speed(g: int) -> float:
        return min(1.0, c / (n_active * g)) if n_active else 1.0

    while k < len(order) or n_active:
        # Next completion in real time.
        t_done, g_done = math.inf, None
        for g, h in heaps.items():
            if h:
                cand = t + (h[0][0] - clocks[g]) / speed(g)
                if cand < t_done:
                    t_done, g_done = cand, g
        t_arr = order[k].arrival_s if k < len(order) else math.inf
        t_next = min(t_done, t_arr)
        for g in clocks:
            clocks[g] += (t_next - t) * speed(g)
        t = t_next
        if t_arr <= t_done:
            j = order[k]
            k += 1
            key = (id(j.perf), j.gang)
            if key not in rate_cache:
                rate_cache[key] = isolated_rate(cluster, j)
            if not rate_cache[key] > 0:
                continue  # no GPU type runs this job: left out, as the simulator skips it
            clocks.setdefault(j.gang, 0.0)
            heapq.heappush(
                heaps.setdefault(j.gang, []), (clocks[j.gang] + j.work / rate_cache[key], j.job_id)
            )
            n_active += 1
        else:
            assert g_done is not None  # t_done < t_arr <= inf: some heap set it
            target, job_id = heapq.heappop(heaps[g_done])
            clocks[g_done] = max(clocks[g_done], target)
            jct[job_id] = t - arrival[job_id]
            n_active -= 1
    return jct


def _water_fill(share: float, gangs: dict[int, int]) -> dict[int, float]:
    """GPUs per job of each gang when ``share`` GPUs are split max-min over jobs capped at
    their gangs (``gangs``: gang -> active jobs of that gang)."""
    out: dict[int, float] = {}
    left, n = share, sum(gangs.values())
    ordered = sorted(gangs)
    for i, g in enumerate(ordered):
        level = left / n
        if g > level:  # this gang and every larger one get the level
            out.update((h, level) for h in ordered[i:])
            break
        out[g] = float(g)
        left -= g * gangs[g]
        n -= gangs[g]
    return out


def isolated_app_run(jobs: Sequence[SimJob], cluster: Cluster) -> dict[str, float]:
    """ACT (last job finish − app arrival) of every app under the isolated policy over apps
    (module docstring): apps with no runnable job (gang > cluster, no GPU type runs it) are left
    out, and so are such jobs of other apps, as in :func:`isolated_run`.

    A fluid simulation with a virtual clock per (app, gang): the jobs of one gang in one app all
    run at the same speed, so each group keeps a heap of finish points on its own clock and an
    event costs O(groups + log n).
    """
    c = cluster.num_gpus
    order = sorted((j for j in jobs if j.gang <= c), key=lambda j: (j.arrival_s, j.job_id))
    rate_cache: dict[tuple[int, int], float] = {}
    clocks: dict[tuple[str, int], float] = {}  # (app, gang) -> seconds of full-speed running
    heaps: dict[tuple[str, int], list[tuple[float, str]]] = {}
    counts: dict[str, dict[int, int]] = {}  # active app -> gang -> active jobs
    speeds: dict[tuple[str, int], float] = {}
    first: dict[str, float] = {}  # app -> arrival (its first runnable job's)
    last: dict[str, float] = {}  # app -> latest finish
    t, k = 0.0, 0

    def refresh() -> None:  # every group's speed for the current set of active apps
        speeds.clear()
        if counts:
            share = c / len(counts)
            for app, gangs in counts.items():
                for g, x in _water_fill(share, gangs).items():
                    speeds[(app, g)] = min(1.0, x / g)

    while k < len(order) or counts:
        t_done, key_done = math.inf, None
        for key, h in heaps.items():
            cand = t + (h[0][0] - clocks[key]) / speeds[key]
            if cand < t_done:
                t_done, key_done = cand, key
        t_arr = order[k].arrival_s if k < len(order) else math.inf
        t_next = min(t_done, t_arr)
        for key in clocks:
            clocks[key] += (t_next - t) * speeds[key]
        t = t_next
        if t_arr <= t_done:
            while k < len(order) and order[k].arrival_s <= t:
                j = order[k]
                k += 1
                rk = (id(j.perf), j.gang)
                if rk not in rate_cache:
                    rate_cache[rk] = isolated_rate(cluster, j)
                if not rate_cache[rk] > 0:
                    continue  # no GPU type runs this job: left out, as the simulator skips it
                key = (j.app_id, j.gang)
                clocks.setdefault(key, 0.0)
                heapq.heappush(
                    heaps.setdefault(key, []), (clocks[key] + j.work / rate_cache[rk], j.job_id)
                )
                gangs = counts.setdefault(j.app_id, {})
                gangs[j.gang] = gangs.get(j.gang, 0) + 1
                first.setdefault(j.app_id, j.arrival_s)
        else:
            assert key_done is not None  # t_done < t_arr <= inf: some group set it
            app, g = key_done
            heap = heaps[key_done]
            target, _ = heapq.heappop(heap)
            if heap:
                clocks[key_done] = max(clocks[key_done], target)
            else:  # the group is gone; a later job of it starts a fresh clock
                del heaps[key_done], clocks[key_done]
            gangs = counts[app]
            gangs[g] -= 1
            if not gangs[g]:
                del gangs[g]
                if not gangs:
                    del counts[app]
            last[app] = t
        refresh()
    return {app: last[app] - first[app] for app in first}
