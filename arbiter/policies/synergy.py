"""``synergy-tune`` and ``synergy-opt``: CPU and memory allocated by measured sensitivity,
under an unmodified GPU-ordering policy (Synergy, seed 003; spec ``synergy.md``).

Implements §3 (round frame), §4.1 (Synergy-Opt, LP-1 and LP-2, as one MILP) and §4.2
(Synergy-Tune, requirements R1-R4 and steps 1 / 2(a) / 2(b)). Profiling (§3.1) is not simulated:
a job's sensitivity matrix W (:class:`arbiter.sim.perf.Sensitivity`) arrives with it in
``JobView.sensitivity``; a job without one is treated as insensitive and gets its
GPU-proportional share. Synergy-Greedy (§3.3, the paper's straw man) is not implemented.

**Frame.** The GPU-ordering policy named by the ``order`` knob (``fifo``, ``las``, ``srtf``,
``themis``, or any other registered non-Synergy policy, built with ``order_knobs``) decides
which jobs run and on how many GPUs, exactly as it would alone: it sees a snapshot in which
every job holds the GPUs *it* gave it last time (its own "virtual" placement, kept in
:class:`SynergyState` with its own policy state), so its decisions do not depend on where
Synergy put the jobs. Synergy then places those jobs on physical GPUs and sets their CPUs and
memory. The GPU-proportional baseline is that ordering policy alone (the engine gives every job
CPUs and memory in proportion to its GPUs on each machine): the comparison changes nothing but
the mechanism. ``round_s`` defaults to the ordering policy's, so both runs decide at the same
times (the paper uses 5-minute rounds for both, L32; pass ``round_s=300``).

Decisions on the spec's open choices (spec §14) and errata:

* **Lease renewal.** A job that keeps running with the same number of GPUs keeps its physical
  GPUs (every job "requests a lease update to continue running on the same server", L251);
  only its CPUs and memory are re-tuned every round. New jobs are placed. Both mechanisms work
  this way, so Opt vs Tune compares packing, not migration.
* **Best-case demand** (§2.4, "saturates" unquantified): the candidate point (the profiled grid,
  each point clipped to one server's CPUs and memory per GPU, spec §15's demand capping) with
  the fewest CPUs, then the least memory, whose throughput reaches
  ``max(W_prop, (1 - eps) * max W)``; ``eps`` defaults to 0 (the reference's tables).
  ``W_prop`` in the floor enforces R3 even with ``eps`` > 0.
* **Packing order** (§14.3): GPU demand, then CPU demand, then memory demand, all descending
  (the reference sorts GPU descending), ties by the ordering policy's priority (R4): arrival
  (fifo, themis and others), attained GPU service (las), remaining time (srtf).
* **Server choice**: a job goes to one server whenever some server has its GPUs free: best fit,
  the server with the fewest free GPUs, then the least free CPU + memory (normalised), that fits
  the demand. Only a job no single server has room for is split, over the servers with the most
  free GPUs, CPU and memory proportional to its GPUs on each (R2). So Synergy never trades
  consolidation for CPU or memory (L439).
* **Step 1 trigger** (§14.4): a demand above the proportional share in *any* dimension falls
  back to the proportional share in *all* dimensions (as the reference does); a demand at or
  below it everywhere (e.g. GNMT's 1 CPU / 20.83 GB) is kept.
* **Step 2(a)** (§14.5): the server is the best fit on free GPUs alone (for a split job, the
  servers with the most free GPUs; for a running job, its own servers). On it, jobs above their
  proportional share in some dimension are switched to proportional, fewest servers first, then
  most CPUs per GPU, then most memory per GPU (the reference's order), until the job fits. A
  switched job that spans servers changes on all of them; where that raises its use of a
  dimension it was below proportional in and overflows a server, further above-proportional
  jobs there are switched too. The pigeonhole argument (spec §6) guarantees success: once every
  job on a server is at or below proportional, any demand at or below proportional fits.
* **Opt** (§4.1): LP-1 and LP-2 merged into one MILP over the real servers (HiGHS): per job one
  configuration from its Pareto-optimal candidates that meet R3, plus the proportional one,
  and an integral number of GPUs per server, CPU and memory per GPU equal on every server (R2),
  per-server GPU, CPU and memory capacity. LP-2's fractional GPUs (L213) cannot be deployed, so
  the MILP keeps GPUs integral instead of rounding afterwards. Objective: LP-1's Σ W over the
  runnable jobs (each job's throughput normalised to its proportional one), minus 1e-5 per
  server a job uses (LP-2's "minimise fragmentation", which the paper leaves to the vertex
  structure, §14.9; 1e-5 is below the 0.01 resolution of the profiles, so it only breaks
  ties). Like the paper's Opt it ignores network effects: the simulator still applies the
  locality slowdown to a split job. It is seeded with Tune's solution, which is feasible, so its
  objective is never below Tune's. Rounds with more than ``max_jobs`` runnable jobs, or where
  HiGHS finds nothing within ``time_limit_s``, use Tune (counted in ``SynergyState``).
* **Errata followed** (spec §5, §14.7-14.8): LP-1's fairness constraint is (5) (Theorem 4.1
  cites "(1-4)"); LP-2's (18) is an equality (each job gets exactly its GPUs), (19) is
  ``x >= 0`` (integral here), (16)'s stray Σ is dropped and (17) is per machine *i*.
* **Heterogeneous servers** (spec §5.4, not evaluated in the paper): Tune's R3 floor is the
  highest proportional throughput over the cluster's CPU/memory-per-GPU ratios, and a demand
  counts as "at or below proportional" only if it is so on every server; Opt weighs the
  proportional configuration by that floor, which is exact on the homogeneous clusters the
  paper assumes (§1). The appendix's 1/n fair baseline is not used.
* **Live arbiter** (``yarn-arbiter serve``, :mod:`arbiter.core`): only the GPU half of a
  decision takes effect. The driver turns ``Decision.allocation`` into GPU leases and ignores
  ``Decision.grants``: leases carry GPUs only, and YARN sizes each container's vcores and
  memory from the AM's own request. Live apps also report no sensitivity
  (``JobView.sensitivity`` is None), so Synergy treats them as insensitive and would grant
  them their GPU-proportional share anyway; ``synergy-tune``/``-opt`` therefore behave live as
  their ``order`` policy with Synergy's placement. The CPU/memory mechanism is exercised in the
  simulator only (engine: ``rate_with`` of the grant, checked per machine).
* Units: CPUs in cores, memory in GB, the reference's per-GPU grid (spec §14.14).
* Storage bandwidth (the reference's fourth dimension) and profiling time are not modelled.

Knobs (``make_policy("synergy-tune", ...)``): ``order`` (default ``fifo``), ``order_knobs``
(a dict passed to the ordering policy, e.g. ``{"lease_s": 600}`` for themis), ``round_s``
(default: the ordering policy's), ``eps`` (saturation tolerance, default 0). ``synergy-opt``
adds ``max_jobs`` (default 64) and ``time_limit_s`` (per round, default 10). The pure
mechanisms are :func:`tune_pack` and :func:`opt_pack` (runnable jobs in, :class:`Packing` out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import highspy
import numpy as np

from arbiter.auction import quiet_highs
from arbiter.cluster import Cluster
from arbiter.policies.base import Decision, JobView, Policy, PolicyError, Snapshot

__all__ = [
    "ORDERS",
    "JobRequest",
    "Packing",
    "SynergyOpt",
    "SynergyState",
    "SynergyTune",
    "opt_pack",
    "tune_pack",
]

ORDERS = ("fifo", "las", "srtf", "themis")  # the orderings the paper evaluates (FTF = themis)
_TOL = 1e-9
_FRAGMENT = 1e-5  # Opt's objective penalty per server a job uses (module docstring)

Point = tuple[float, float]  # (CPUs, GB) per GPU


@dataclass(frozen=True)
class JobRequest:
    """One runnable job for a packing mechanism: ``gang`` GPUs, its sensitivity (None =
    insensitive), ``fixed`` GPUs if it keeps running where it is, and its priority key."""

    job_id: str
    gang: int
    sensitivity: Any = None
    fixed: frozenset[str] | None = None
    priority: tuple = ()


@dataclass(frozen=True)
class Packing:
    """A mechanism's result: GPUs per job, (cpus, mem_gb) grants for jobs not at their
    GPU-proportional share, and each job's normalised throughput W (1 = proportional)."""

    allocation: Mapping[str, frozenset[str]]
    grants: Mapping[str, tuple[float, float]]
    speeds: Mapping[str, float]
    optimal: bool | None = None  # Opt only: HiGHS proved optimality

    @property
    def objective(self) -> float:
        """Σ W over the jobs (LP-1's objective)."""
        return sum(self.speeds.values())


@dataclass(frozen=True)
class SynergyState:
    """What a Synergy policy carries between calls: the ordering policy's own state and the
    GPUs it believes each job holds (module docstring), and Opt's fallbacks to Tune."""

    base: Any = None
    virtual: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    opt_rounds: int = 0
    opt_fallbacks: int = 0


# --- shared helpers -------------------------------------------------------------------------


def _ratios(cluster: Cluster) -> dict[str, Point]:
    return {m.name: (m.cpus / m.num_gpus, m.mem_gb / m.num_gpus) for m in cluster.machines}


def _cap(cluster: Cluster, gang: int) -> Point:
    """The most CPUs and GB per GPU one server can give a job of ``gang`` GPUs."""
    return (
        max(m.cpus / min(gang, m.num_gpus) for m in cluster.machines),
        max(m.mem_gb / min(gang, m.num_gpus) for m in cluster.machines),
    )


def _floor(sens: Any, ratios: Iterable[Point]) -> float:
    """W at the GPU-proportional point; the largest over the cluster's server ratios."""
    return max(sens.speed(c, m) for c, m in set(ratios))


def _best(req: JobRequest, cluster: Cluster, ratios: Mapping[str, Point], eps: float) -> Point:
    sens = req.sensitivity
    return sens.best_case(_floor(sens, ratios.values()), eps, _cap(cluster, req.gang))


def _below(point: Point, ratio: Point) -> bool:
    return point[0] <= ratio[0] + _TOL and point[1] <= ratio[1] + _TOL


def _speed(req: JobRequest, per_machine: Mapping[str, int], point: Point | None, ratios) -> float:
    """W of a job at ``point`` per GPU, or at its proportional share when ``point`` is None."""
    if req.sensitivity is None:
        return 1.0
    if point is None:
        g = sum(per_machine.values())
        point = (
            sum(k * ratios[m][0] for m, k in per_machine.items()) / g,
            sum(k * ratios[m][1] for m, k in per_machine.items()) / g,
        )
    return req.sensitivity.speed(*point)


def _packing(
    reqs: Sequence[JobRequest],
    cluster: Cluster,
    gpus: Mapping[str, list[str]],
    points: Mapping[str, Point | None],
    optimal: bool | None = None,
) -> Packing:
    ratios = _ratios(cluster)
    alloc, grants, speeds = {}, {}, {}
    for r in reqs:
        ids = frozenset(gpus[r.job_id])
        alloc[r.job_id] = ids
        per: dict[str, int] = {}
        for g in ids:
            m = cluster.gpu(g).machine
            per[m] = per.get(m, 0) + 1
        point = points[r.job_id]
        if point is not None and not all(point == ratios[m] for m in per):
            grants[r.job_id] = (point[0] * r.gang, point[1] * r.gang)
        else:
            point = None
        speeds[r.job_id] = _speed(r, per, point, ratios)
    return Packing(
        MappingProxyType(alloc), MappingProxyType(grants), MappingProxyType(speeds), optimal
    )


def _free_gpus(cluster: Cluster, reqs: Sequence[JobRequest]) -> dict[str, list[str]]:
    """Machine -> GPUs (cluster order) not held by the running jobs among ``reqs``."""
    taken = set().union(*(r.fixed for r in reqs if r.fixed))
    free: dict[str, list[str]] = {m.name: [] for m in cluster.machines}
    for g in cluster.gpus:
        if g.id not in taken:
            free[g.machine].append(g.id)
    return free


def _packing_order(
    reqs: Sequence[JobRequest], best: Mapping[str, Point | None], prop: Point
) -> list:
    """GPU, then CPU, then memory demand, descending; then the policy's priority (R4)."""

    def key(r: JobRequest):
        c, m = best[r.job_id] or prop
        return (-r.gang, -c * r.gang, -m * r.gang, r.priority, r.job_id)

    return sorted(reqs, key=key)


# --- Synergy-Tune ---------------------------------------------------------------------------


class _Tune:
    """Mutable packing state of one :func:`tune_pack` call (machines' free GPUs and used
    CPU / memory, each placed job's GPUs per machine and per-GPU point)."""

    def __init__(self, cluster: Cluster, reqs: Sequence[JobRequest]) -> None:
        self.cluster = cluster
        self.order = {m.name: i for i, m in enumerate(cluster.machines)}
        self.cap = {m.name: (m.cpus, m.mem_gb) for m in cluster.machines}
        self.ratio = _ratios(cluster)
        self.free = _free_gpus(cluster, reqs)
        self.used = {m.name: [0.0, 0.0] for m in cluster.machines}
        self.on: dict[str, list[str]] = {m.name: [] for m in cluster.machines}
        self.gpus: dict[str, dict[str, list[str]]] = {}
        self.point: dict[str, Point | None] = {}

    def per_gpu(self, point: Point | None, m: str) -> Point:
        return self.ratio[m] if point is None else point

    def fits(self, m: str, k: int, point: Point | None) -> bool:
        c, mem = self.per_gpu(point, m)
        cap, used = self.cap[m], self.used[m]
        return (
            used[0] + k * c <= cap[0] * (1 + _TOL) + _TOL
            and used[1] + k * mem <= cap[1] * (1 + _TOL) + _TOL
        )

    def overflows(self, m: str) -> bool:
        cap, used = self.cap[m], self.used[m]
        return used[0] > cap[0] * (1 + _TOL) + _TOL or used[1] > cap[1] * (1 + _TOL) + _TOL

    def _account(self, job: str, sign: float) -> None:
        for m, ids in self.gpus[job].items():
            c, mem = self.per_gpu(self.point[job], m)
            self.used[m][0] += sign * len(ids) * c
            self.used[m][1] += sign * len(ids) * mem

    def commit(self, job: str, take: Mapping[str, list[str]], point: Point | None) -> None:
        self.gpus[job] = {m: list(ids) for m, ids in take.items()}
        self.point[job] = point
        for m, ids in take.items():
            self.free[m] = [g for g in self.free[m] if g not in set(ids)]
            self.on[m].append(job)
        self._account(job, +1.0)

    def above(self, job: str, m: str) -> bool:
        point = self.point[job]
        return point is not None and not _below(point, self.ratio[m])

    def revert(self, job: str) -> None:
        """Switch ``job`` to its proportional share on all its servers, then switch further
        above-proportional jobs wherever that overflows a server (module docstring)."""
        self._account(job, -1.0)
        self.point[job] = None
        self._account(job, +1.0)
        for m in self.gpus[job]:
            self.make_room(m, 0, None)

    def make_room(self, m: str, k: int, point: Point | None) -> None:
        """Switch above-proportional jobs on ``m`` to proportional until ``k`` GPUs at
        ``point`` fit (k = 0: until ``m`` no longer overflows)."""
        while not (self.fits(m, k, point) if k else not self.overflows(m)):
            peers = [j for j in self.on[m] if self.above(j, m)]
            if not peers:
                raise PolicyError(f"synergy-tune: cannot make room on {m} (pigeonhole broken)")

            def key(j: str) -> tuple:
                at = self.point[j]
                assert at is not None  # above(j, m): an above-proportional job has a point
                return (len(self.gpus[j]), *(-x for x in at), self.on[m].index(j))

            victim = min(peers, key=key)
            self.revert(victim)

    def single(self, g: int, point: Point | None, check: bool) -> str | None:
        """Best-fit server with ``g`` free GPUs (and room for ``point`` if ``check``)."""
        fit = [
            m
            for m, ids in self.free.items()
            if len(ids) >= g and (not check or self.fits(m, g, point))
        ]
        if not fit:
            return None

        def key(m: str):
            cap, used = self.cap[m], self.used[m]
            room = (cap[0] - used[0]) / cap[0] + (cap[1] - used[1]) / cap[1]
            return (len(self.free[m]), room, self.order[m])

        return min(fit, key=key)

    def split(self, g: int, point: Point | None, check: bool) -> dict[str, int] | None:
        """GPUs per server for a job no single server has room for: most free GPUs first."""
        take: dict[str, int] = {}
        need = g
        for m in sorted(self.free, key=lambda m: (-len(self.free[m]), self.order[m])):
            if need == 0:
                break
            k = min(len(self.free[m]), need)
            if check:
                c, mem = self.per_gpu(point, m)
                cap, used = self.cap[m], self.used[m]
                room_c = (cap[0] * (1 + _TOL) + _TOL - used[0]) / c if c > 0 else math.inf
                room_m = (cap[1] * (1 + _TOL) + _TOL - used[1]) / mem if mem > 0 else math.inf
                k = min(k, int(max(0.0, math.floor(min(room_c, room_m) + 1e-12))))
            if k > 0:
                take[m] = k
                need -= k
        return take if need == 0 else None

    def place(self, req: JobRequest, point: Point | None, check: bool = True) -> bool:
        """PLACE(j, d): commit ``req`` at ``point`` if it fits (``check``), else False."""
        if req.fixed is not None:
            per: dict[str, list[str]] = {}
            for gid in sorted(req.fixed, key=self.cluster.index):
                per.setdefault(self.cluster.gpu(gid).machine, []).append(gid)
            if check and not all(self.fits(m, len(ids), point) for m, ids in per.items()):
                return False
            self.point[req.job_id] = point
            self.gpus[req.job_id] = per
            for m in per:
                self.on[m].append(req.job_id)
            self._account(req.job_id, +1.0)
            return True
        consolidated = any(len(ids) >= req.gang for ids in self.free.values())
        if consolidated:
            server = self.single(req.gang, point, check)
            if server is None:
                return False
            self.commit(req.job_id, {server: self.free[server][: req.gang]}, point)
            return True
        counts = self.split(req.gang, point, check)
        if counts is None:
            return False
        self.commit(req.job_id, {m: self.free[m][:k] for m, k in counts.items()}, point)
        return True

    def step2(self, req: JobRequest, point: Point | None) -> None:
        """Step 2(a): servers by GPUs alone, then switch peers there to proportional."""
        if req.fixed is not None:
            counts: dict[str, int] = {}
            for gid in req.fixed:
                m = self.cluster.gpu(gid).machine
                counts[m] = counts.get(m, 0) + 1
        else:
            server = self.single(req.gang, point, check=False)
            split = {server: req.gang} if server is not None else self.split(req.gang, point, False)
            if split is None:
                raise PolicyError(f"synergy-tune: {req.gang} GPUs for {req.job_id} not free")
            counts = split
        # Switching a peer that spans servers can take room on a server already cleared, so
        # repeat until every server fits; each pass switches at least one job, at most once.
        while bad := [m for m, k in counts.items() if not self.fits(m, k, point)]:
            self.make_room(bad[0], counts[bad[0]], point)
        if req.fixed is not None:
            if not self.place(req, point, check=False):
                raise PolicyError(f"synergy-tune: cannot place {req.job_id}")  # not reached
        else:
            self.commit(req.job_id, {m: self.free[m][:k] for m, k in counts.items()}, point)


def tune_pack(cluster: Cluster, reqs: Sequence[JobRequest], *, eps: float = 0.0) -> Packing:
    """Synergy-Tune (§4.2, module docstring) for the runnable jobs ``reqs``: their GPU counts
    fit the cluster, running jobs keep their ``fixed`` GPUs."""
    state = _Tune(cluster, reqs)
    best = {r.job_id: _best(r, cluster, state.ratio, eps) if r.sensitivity else None for r in reqs}
    prop = max(state.ratio.values())
    for req in _packing_order(reqs, best, prop):
        point = best[req.job_id]
        if state.place(req, point):
            continue
        if point is not None and not all(_below(point, r) for r in state.ratio.values()):
            point = None  # step 1: above proportional in some dimension -> proportional
            if state.place(req, point):
                continue
        state.step2(req, point)
    gpus = {j: [g for ids in per.values() for g in ids] for j, per in state.gpus.items()}
    return _packing(reqs, cluster, gpus, state.point)


# --- Synergy-Opt ----------------------------------------------------------------------------


def _configs(req: JobRequest, cluster: Cluster, ratios: Mapping[str, Point]) -> list:
    """Per-GPU candidate points on the Pareto frontier meeting R3, plus None (proportional)."""
    if req.sensitivity is None:
        return [None]
    sens = req.sensitivity
    floor = _floor(sens, ratios.values()) - 1e-12
    pts = [(p, sens.speed(*p)) for p in sens.candidates(_cap(cluster, req.gang))]
    pts = [(p, w) for p, w in pts if w >= floor]
    frontier = [
        p
        for p, w in pts
        if not any(q != p and q[0] <= p[0] and q[1] <= p[1] and v >= w for q, v in pts)
    ]
    return [None, *frontier]


def opt_pack(
    cluster: Cluster,
    reqs: Sequence[JobRequest],
    *,
    eps: float = 0.0,
    time_limit_s: float = 10.0,
    hint: Packing | None = None,
) -> Packing | None:
    """Synergy-Opt (§4.1, module docstring): the MILP's best packing of ``reqs``, or None if
    HiGHS found no solution in ``time_limit_s``. ``hint`` (default: Tune's packing) seeds it."""
    if hint is None:
        hint = tune_pack(cluster, reqs, eps=eps)
    ratios = _ratios(cluster)
    machines = cluster.machines
    mi = {m.name: i for i, m in enumerate(machines)}
    configs = [_configs(r, cluster, ratios) for r in reqs]
    cost: list[float] = []
    upper: list[float] = []

    def col(c: float, ub: float) -> int:
        cost.append(c)
        upper.append(ub)
        return len(cost) - 1

    y: dict[tuple[int, int], int] = {}  # job j takes configuration k
    z: dict[tuple[int, int, int], int] = {}  # GPUs of j on machine i under configuration k
    u: dict[tuple[int, int], int] = {}  # j uses machine i (new jobs only)
    fixed: list[dict[int, int]] = []
    for j, r in enumerate(reqs):
        counts: dict[int, int] = {}
        for gid in r.fixed or ():
            i = mi[cluster.gpu(gid).machine]
            counts[i] = counts.get(i, 0) + 1
        fixed.append(counts)
        where = sorted(counts) if r.fixed is not None else range(len(machines))
        for k, point in enumerate(configs[j]):
            if r.sensitivity is None:
                w = 1.0
            elif point is None:  # proportional (homogeneous clusters: one ratio)
                w = _floor(r.sensitivity, ratios.values())
            else:
                w = r.sensitivity.speed(*point)
            y[j, k] = col(-w, 1.0)
            for i in where:
                z[j, k, i] = col(0.0, float(min(r.gang, machines[i].num_gpus)))
        if r.fixed is None:
            for i in range(len(machines)):
                u[j, i] = col(_FRAGMENT, 1.0)
    inf = highspy.kHighsInf
    rows: list[tuple[list[int], list[float], float, float]] = []
    per_machine: list[list[tuple[int, int, int]]] = [[] for _ in machines]
    for (j, k, i), c in z.items():
        per_machine[i].append((j, k, c))
    for j, r in enumerate(reqs):
        ks = range(len(configs[j]))
        rows.append(([y[j, k] for k in ks], [1.0] * len(ks), 1.0, 1.0))
        where = sorted(fixed[j]) if r.fixed is not None else range(len(machines))
        for k in ks:
            zs = [z[j, k, i] for i in where]
            rows.append(([*zs, y[j, k]], [1.0] * len(zs) + [-float(r.gang)], 0.0, 0.0))
        for i, n in fixed[j].items():
            rows.append(([z[j, k, i] for k in ks], [1.0] * len(ks), float(n), float(n)))
        if r.fixed is None:
            for i in range(len(machines)):
                bound = float(min(r.gang, machines[i].num_gpus))
                rows.append(
                    ([*(z[j, k, i] for k in ks), u[j, i]], [1.0] * len(ks) + [-bound], -inf, 0.0)
                )
    for i, mach in enumerate(machines):
        if not per_machine[i]:
            continue
        idx = [c for _, _, c in per_machine[i]]
        pts = [configs[j][k] or ratios[mach.name] for j, k, _ in per_machine[i]]
        rows.append((idx, [1.0] * len(idx), -inf, float(mach.num_gpus)))
        rows.append((idx, [p[0] for p in pts], -inf, mach.cpus * (1 + _TOL) + _TOL))
        rows.append((idx, [p[1] for p in pts], -inf, mach.mem_gb * (1 + _TOL) + _TOL))

    n = len(cost)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(rows)
    lp.col_cost_ = np.asarray(cost)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.asarray(upper)
    lp.row_lower_ = np.asarray([r[2] for r in rows])
    lp.row_upper_ = np.asarray([r[3] for r in rows])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.cumsum([0] + [len(r[0]) for r in rows]).astype(np.int32)
    lp.a_matrix_.index_ = np.asarray([c for r in rows for c in r[0]], dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray([v for r in rows for v in r[1]], dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h = quiet_highs()  # single-threaded, like every HiGHS of the project
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-7)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.passModel(lp)
    # Seed with the hint (Tune's packing), feasible by construction.
    start = np.zeros(n)
    jobs = {r.job_id: j for j, r in enumerate(reqs)}
    for job_id, gpus in hint.allocation.items():
        j = jobs[job_id]
        grant = hint.grants.get(job_id)
        point = None if grant is None else (grant[0] / reqs[j].gang, grant[1] / reqs[j].gang)
        k = _nearest(configs[j], point)
        start[y[j, k]] = 1.0
        for gid in gpus:
            i = mi[cluster.gpu(gid).machine]
            start[z[j, k, i]] += 1.0
            if (j, i) in u:
                start[u[j, i]] = 1.0
    sol = highspy.HighsSolution()
    sol.col_value = list(start)
    h.setSolution(sol)
    h.run()
    if h.getInfo().primal_solution_status != 2:  # kSolutionStatusFeasible: nothing found
        return None
    optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    x = np.asarray(h.getSolution().col_value)
    free = _free_gpus(cluster, reqs)
    gpus_of: dict[str, list[str]] = {}
    points: dict[str, Point | None] = {}
    for j, r in enumerate(reqs):
        k = next(k for k in range(len(configs[j])) if x[y[j, k]] > 0.5)
        points[r.job_id] = configs[j][k]
        if r.fixed is not None:
            gpus_of[r.job_id] = sorted(r.fixed, key=cluster.index)
            continue
        ids: list[str] = []
        for i, mach in enumerate(machines):
            cnt = round(x[z[j, k, i]])
            ids.extend(free[mach.name][:cnt])
            free[mach.name] = free[mach.name][cnt:]
        gpus_of[r.job_id] = ids
    return _packing(reqs, cluster, gpus_of, points, optimal)


def _nearest(configs: list, point: Point | None) -> int:
    """Index of ``point`` among ``configs`` (None = proportional = index 0)."""
    if point is None:
        return 0
    for k, p in enumerate(configs):
        if p is not None and abs(p[0] - point[0]) < 1e-6 and abs(p[1] - point[1]) < 1e-6:
            return k
    raise PolicyError(f"Tune's point {point} is not among Opt's configurations")


# --- the policies ---------------------------------------------------------------------------


def _priority(order: str, snapshot: Snapshot):
    def key(j: JobView) -> tuple:
        if order == "las":
            return (j.attained_gpu_s, j.arrival_s)
        if order == "srtf":
            left = (
                j.remaining_work / j.ideal_rate
                if j.remaining_work is not None and j.ideal_rate
                else math.inf
            )
            return (left, j.arrival_s)
        return (j.arrival_s,)

    return key


@dataclass(frozen=True)
class _Synergy:
    """The round frame shared by Tune and Opt (module docstring)."""

    name: str = "synergy"
    order: str = "fifo"
    order_knobs: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    round_s: float | None = math.nan  # NaN: the ordering policy's round length
    eps: float = 0.0
    base: Policy[Any] = field(init=False, repr=False, compare=False, hash=False)
    preemptive: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        from arbiter.policies import POLICIES, make_policy

        if self.order.startswith("synergy") or self.order not in POLICIES:
            known = sorted(p for p in POLICIES if not p.startswith("synergy"))
            raise ValueError(f"order {self.order!r}: expected one of {', '.join(known)}")
        if not 0.0 <= self.eps < 1.0:
            raise ValueError(f"eps must be in [0, 1), got {self.eps}")
        base = make_policy(self.order, **dict(self.order_knobs))
        if getattr(base, "two_phase", False):  # Themis orders through its (simulated) Agents
            from arbiter.sim.agents import SimulatedAgents

            base = SimulatedAgents(base)
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "order_knobs", MappingProxyType(dict(self.order_knobs)))
        if self.round_s is not None and math.isnan(self.round_s):
            object.__setattr__(self, "round_s", base.round_s)
        object.__setattr__(self, "preemptive", getattr(base, "preemptive", True))

    def _pack(self, cluster: Cluster, reqs: Sequence[JobRequest], st: SynergyState):
        return tune_pack(cluster, reqs, eps=self.eps), st

    def decide(self, snapshot: Snapshot[SynergyState]) -> Decision[SynergyState]:
        st: SynergyState = snapshot.policy_state or SynergyState()
        virtual = st.virtual
        base_snap = replace(
            snapshot,
            jobs=tuple(replace(j, held=virtual.get(j.job_id, frozenset())) for j in snapshot.jobs),
            policy_state=st.base,
        )
        bd = self.base.decide(base_snap)
        prio = _priority(self.order, snapshot)
        reqs = []
        for j in snapshot.jobs:
            want = bd.allocation.get(j.job_id)
            if not want:
                continue
            keep = bool(j.held) and len(j.held) == len(want)
            reqs.append(
                JobRequest(
                    j.job_id,
                    len(want),
                    j.sensitivity,
                    j.held if keep else None,
                    prio(j),
                )
            )
        packing, st = self._pack(snapshot.cluster, reqs, st)
        state = replace(
            st,
            base=bd.policy_state,
            virtual=MappingProxyType({k: v for k, v in bd.allocation.items() if v}),
        )
        return Decision(packing.allocation, state, bd.wake_at, packing.grants)


@dataclass(frozen=True)
class SynergyTune(_Synergy):
    """``synergy-tune``: Synergy-Tune under the ``order`` policy (module docstring)."""

    name: str = "synergy-tune"


@dataclass(frozen=True)
class SynergyOpt(_Synergy):
    """``synergy-opt``: the MILP upper bound, for small instances (module docstring)."""

    name: str = "synergy-opt"
    max_jobs: int = 64
    time_limit_s: float = 10.0

    def _pack(self, cluster: Cluster, reqs: Sequence[JobRequest], st: SynergyState):
        tuned = tune_pack(cluster, reqs, eps=self.eps)
        if not reqs:
            return tuned, st
        best = None
        if len(reqs) <= self.max_jobs:
            best = opt_pack(cluster, reqs, eps=self.eps, time_limit_s=self.time_limit_s, hint=tuned)
        if best is None or best.objective < tuned.objective - 1e-9:
            return tuned, replace(
                st, opt_rounds=st.opt_rounds + 1, opt_fallbacks=st.opt_fallbacks + 1
            )
        return best, replace(st, opt_rounds=st.opt_rounds + 1)
