"""``tiresias`` and ``tiresias-gittins``: Discretized 2DAS with profile-based consolidation.

Seed 002 (Gu's thesis), Ch. III TIRESIAS; line refs below are to ``seeds/002_*.txt`` (L) and to
``spec/tiresias.md`` (§):

* **2D attained service** a_J = W_J · t_J in GPU-seconds of *running* time (L1076, §2.2): the
  ``attained_gpu_s`` every driver reports, minus the offset of the job's last promotion.
* **Discretized 2DAS** (L1091-1110, §2.4): K queues with thresholds Q_1^hi < ... < Q_{K-1}^hi;
  a job is in Q_i while Q_i^lo <= a_J < Q_i^hi, so it is demoted when a_J reaches a threshold.
* **Pseudocode 2** (L1115-1194, §2.6): queues served in order; ``tiresias`` (Discretized 2D-LAS)
  orders a queue FIFO by first start time (L1112); ``tiresias-gittins`` (Discretized
  2D-Gittins) orders Q_1..Q_{K-1} by their Gittins index with the fixed quantum Δ_i = Q_i^hi,
  and Q_K FIFO by first start (L1198, §2.5). Jobs that do not fit are skipped; running jobs that
  no longer fit behind higher-priority ones are preempted (implicit preemption).
* **Gittins index** (Pseudocode 1, L1050-1075, §2.3) of an empirical distribution of job
  GPU-time: G(a, Δ) = P(S − a <= Δ | S > a) / E[min(S − a, Δ) | S > a]
  (:class:`ServiceDistribution`).
* **Starvation** (L1202-1214, §2.8): a WAITING job is promoted to Q_1 when δ_J >= PROMOTEKNOB·t_J;
  both t_J and δ_J restart from zero.
* **Placement** (§3.3.3.3, L1268-1289, §3.5): if the job's skew S_J exceeds PACKLIMIT, consolidate
  it on as few machines as possible; otherwise place it so as to decrease fragmentation.

Decisions on the spec's errata and open choices (spec §8):

1. *Tick (§8.1).* Event-driven by default (``round_s=None``): the driver calls on arrivals and
   completions, and the decision asks for a wake-up at the earliest moment a running job crosses
   its queue's threshold or a waiting job reaches its promotion point (computed analytically, as
   the reference simulator does). With ``round_s`` set the policy is time-sliced (Gavel-style
   rounds) and asks for no wake-ups: demotions and promotions then take effect at round ticks.
   The seed's toy example ("the scheduling interval is one unit of time", L1083) is
   ``round_s=1``.
2. *Comparisons (§8.2).* The fit test is ``free >= W_J`` (Pseudocode 2 l.18 says ``>``, an
   erratum); demotion happens when a_J >= Q_i^hi; promotion when δ_J >= PROMOTEKNOB·t_J. Both
   compare with a tolerance of 1e-6 (GPU-)seconds so that a wake-up computed in floating point
   lands on the crossing.
3. *One pass (§2.6).* Pseudocode 2's ``while`` loop around the queue scan is one priority-ordered
   pass counting GPUs (whatever machines they are on). Admitted jobs that run keep their GPUs (no
   migration); admitted jobs that wait are placed in priority order; jobs not admitted are
   preempted. If the free GPUs of an admitted job cannot run it (a GPU type without throughput
   for it), later jobs may use them (work conservation).
4. *First start (§2.5, §8.5).* FIFO order within a queue is by the time a job was *first*
   scheduled (the driver's ``first_start_s``; Pseudocode 2 l.32 would overwrite it on every
   resume, contradicting L1112). Never-started jobs sort after started ones (start = +∞), then by
   arrival, then by job id. A promotion keeps the first-start time, so a promoted job usually goes
   to the head of Q_1.
5. *Promotion guard (§8.6).* Only waiting jobs in Q_2..Q_K that have started are considered
   (t_J > 0 there), as in the reference simulator. δ_J is the time since the first start (or the
   last promotion) not spent running: pre-start waiting does not count. Running jobs are never
   promoted. ``promote_knob`` defaults to ∞ (promotion disabled, the testbed setting L1362).
6. *K and thresholds (§2.7).* Default (2, 1h): one threshold of 3,600 GPU-seconds, the
   simulation default (L1445). ``queues=K`` alone gives the paper's sensitivity series
   (1h, 2h, 4h, ...: each threshold doubles, L1448-1451); explicit ``thresholds`` win. The
   thesis picked 1 h because it "can cover more than 60 % of all the jobs" (L1459) of its
   trace: the threshold is workload-relative. On a workload of larger jobs it should be scaled
   so Q_1 still holds most jobs; otherwise every job lands in Q_K, FIFO by first start, and a
   long gang that started early blocks the rest. On Pollux's workloads (median job 1.6 GPU-h,
   1 h covers 34-46 %) (2, 1h) averages 8,339 s over workloads 1-8, worse than FIFO; Pollux's
   own Tiresias baseline uses 16 GPU-h (3,519 s here, 4,038 s published), which
   ``benchmarks/repro_afs.py`` therefore passes (``thresholds=(57600,)``).
7. *Gittins quantum (§8.3).* Literal reading: Δ_i = Q_i^hi, the same absolute quantum for every
   job in Q_i (the reference simulator's static Δ), not Q_i^hi − a_J. The index uses the same
   priority clock a_J as the queues (so a promoted job is indexed as a fresh one, as
   Pseudocode 2's "Reset t_J" implies). A job whose a_J is at or beyond every sample has index 0.
   Ties (e.g. all fresh jobs) fall back to the FIFO key. A queue is re-sorted at every decision
   (L1409), with no extra wake-ups for index changes.
8. *Gittins toy (§8.4, §9 items 8-11).* The formula is the literal Pseudocode 1, not a variant
   fitted to the seed's "10" for continuous 2D-Gittins (an image-only table settles it; the
   literal continuous schedule gives 28/3). :meth:`ServiceDistribution.sup_index` is the
   continuous sup over Δ for reference; the discretized policy never takes the sup.
9. *Distribution.* ``distribution`` is a file of GPU-second samples (one a line, optional
   header), absolute or relative to :func:`arbiter.datasets.data_root`, or the samples
   themselves (a sequence or a :class:`ServiceDistribution`). Default: the reference simulator's
   ``tiresias/yarn-gput1000.csv`` (1,001 samples from a production YARN cluster; 62.5 % are
   below 1h, cf. "more than 60 %", L1459). A file is read once, when the policy is built
   (configuration, not state between calls): :meth:`TiresiasGittins.decide` reads no file and
   no environment variable. A caller that builds policies on its scheduling path can load the
   samples beforehand (:meth:`ServiceDistribution.from_file`) and pass them in.
10. *Skew S_J (§3.4, §8.7).* The seed measures tensor skew with an RDMA profiler and gives no
    formula. We use the measured *placement sensitivity* of the job's performance model,
    S_J = 1 − rate(one GPU per machine) / rate(all GPUs on one machine), on the cluster's most
    numerous GPU type that runs the job: "profiling" the job in a trial environment. 1-GPU jobs
    have S_J = 0. It is a pure function of the model, so it is recomputed rather than stored.
11. *PACKLIMIT (§3.5).* No default in the seed (a classifier learns it). Default 0.15: on the
    shipped Pollux profiles the insensitive models (cifar10, deepspeech2, imagenet, and the
    4-level locality model) lose <= 0.091 when spread over 2-4 machines, the sensitive ones
    (ncf, yolov3, bert) >= 0.199, as Table 3.3 splits VGG/AlexNet from the rest.
12. *Unknown skew.* In the live arbiter ``perf`` is None, so S_J is unknown: the job is
    consolidated (what the production baseline does, and never slower), but without waiting.
13. *Consolidation (§2.6, §8.7).* "attempts to consolidate ... in as few machines as possible": a
    high-skew job gets the fewest machines the free GPUs allow (:meth:`FreePool.take`: best-fit
    machine, then fewest machines of one rack; the measured best rate among GPU types). It never
    waits for whole machines to free up (the blocking Tiresias criticises, L884).
14. *Fragmentation-reducing fit.* A low-skew job takes a machine with exactly its gang free if
    there is one, otherwise it empties the machines with the fewest free GPUs first, within one
    GPU type (the best-rate one) and, when one can hold it, the rack with the fewest free GPUs.
    That leaves whole machines to high-skew jobs.
15. *Not modelled.* Parameter-server placement (the jobs here have none) and preemption cost (the
    simulator's checkpoint-restore is free; the paper measured about 60 s per preemption).

State between calls (:class:`TiresiasState`) holds only the promoted jobs' clock offsets.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from arbiter.cluster import Cluster
from arbiter.datasets import data_root
from arbiter.placement import Placement, placement_of
from arbiter.policies.base import Decision, FreePool, JobView, Snapshot

__all__ = [
    "DEFAULT_DISTRIBUTION",
    "DEFAULT_PACK_LIMIT",
    "DEFAULT_THRESHOLD_GPU_S",
    "JobClock",
    "ServiceDistribution",
    "Tiresias",
    "TiresiasGittins",
    "TiresiasState",
    "placement_skew",
    "queue_of",
]

DEFAULT_THRESHOLD_GPU_S = 3600.0  # (2, 1h): the simulation default (L1445)
DEFAULT_PACK_LIMIT = 0.15  # decision 11
DEFAULT_DISTRIBUTION = "tiresias/yarn-gput1000.csv"  # decision 9
TOL = 1e-6  # (GPU-)seconds, decision 2


# --- pure building blocks -------------------------------------------------------------------


def queue_of(attained_gpu_s: float, thresholds: Sequence[float]) -> int:
    """Index (0-based) of the queue holding a job of this attained service: Q_i holds
    Q_i^lo <= a < Q_i^hi, so a job is demoted when a reaches a threshold (decision 2).

    >>> queue_of(3599.0, (3600.0,)), queue_of(3600.0, (3600.0,)), queue_of(9e9, (1.0, 2.0))
    (0, 1, 2)
    """
    return bisect.bisect_right(thresholds, attained_gpu_s + TOL)


@dataclass(frozen=True)
class ServiceDistribution:
    """An empirical distribution 𝔻 of job service S (GPU-seconds) and its Gittins index.

    ``samples`` sorted; ``prefix[k]`` = sum of the first k samples, so every index costs two
    binary searches.
    """

    samples: tuple[float, ...]
    prefix: tuple[float, ...]

    @classmethod
    def from_samples(cls, samples: Iterable[float]) -> ServiceDistribution:
        xs = tuple(sorted(samples))
        if not xs:
            raise ValueError("a service distribution needs at least one sample")
        if not all(x > 0 and math.isfinite(x) for x in xs):
            raise ValueError("service samples must be positive and finite")
        return cls(xs, (0, *accumulate(xs)))

    @classmethod
    def from_file(cls, path: str | Path) -> ServiceDistribution:
        """One sample a line (the first column of a CSV), an optional non-numeric header."""
        path = Path(path)
        if not path.is_absolute() and not path.is_file():
            path = data_root() / path
        values = []
        with open(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                cell = line.split(",")[0].strip()
                if not cell:
                    continue
                try:
                    values.append(float(cell))
                except ValueError:
                    if lineno == 1:
                        continue  # header
                    raise ValueError(f"{path}:{lineno}: {cell!r} is not a number") from None
        return cls.from_samples(values)

    def index(self, attained: float, delta: float) -> float:
        """G(a, Δ) = P(S − a <= Δ | S > a) / E[min(S − a, Δ) | S > a] (Pseudocode 1 l.12);
        0 when no sample exceeds ``attained`` (decision 7)."""
        n = len(self.samples)
        lo = bisect.bisect_right(self.samples, attained)
        if lo == n:
            return 0.0
        hi = n if math.isinf(delta) else bisect.bisect_right(self.samples, attained + delta)
        done = hi - lo  # samples finishing within the quantum
        # n_surv · E[min(S − a, Δ) | S > a]: the finishers' remaining service, Δ for the others.
        used = (self.prefix[hi] - self.prefix[lo]) - done * attained
        if hi < n:
            used += delta * (n - hi)
        return done / used

    def sup_index(self, attained: float) -> float:
        """The continuous index sup_{Δ>0} G(a, Δ) (reference only, decision 8). Between two
        samples the numerator is constant and the denominator grows, so the sup is attained at
        some Δ = s − a."""
        lo = bisect.bisect_right(self.samples, attained)
        return max(
            (self.index(attained, s - attained) for s in sorted(set(self.samples[lo:]))),
            default=0.0,
        )


def _gpu_types(cluster: Cluster) -> list[str]:
    """GPU types, most numerous first (ties: cluster order)."""
    count: dict[str, int] = {}
    for m in cluster.machines:
        count[m.gpu_type] = count.get(m.gpu_type, 0) + m.num_gpus
    return sorted((t for t in count if count[t]), key=lambda t: -count[t])


def placement_skew(
    cluster: Cluster, gang: int, perf: Any, gpu_types: Sequence[str] | None = None
) -> float | None:
    """S_J (decision 10): the fraction of throughput a gang loses spread one GPU per machine
    rather than held by one machine, on the cluster's most numerous GPU type that runs it
    (``gpu_types``: the cluster's types, most numerous first, if already known). None when
    there is no performance model (the live arbiter) or no type runs the job."""
    if perf is None:
        return None
    if gang <= 1:
        return 0.0
    for gtype in gpu_types if gpu_types is not None else _gpu_types(cluster):
        packed = Placement((((gtype, (gang,)),),))
        spread = Placement((tuple((gtype, (1,)) for _ in range(gang)),))
        try:
            r_packed, r_spread = perf.rate(packed), perf.rate(spread)
        except KeyError:  # e.g. a Gavel model with no reading on this type
            continue
        if r_packed > 0:
            return max(0.0, 1.0 - r_spread / r_packed)
    return None


def _take_defrag(pool: FreePool, n: int, perf: Any) -> frozenset[str] | None:
    """The fragmentation-reducing fit of decision 14, or None if no candidate runs the job."""
    cluster = pool.cluster
    if n <= 0 or n > pool.size:
        return None
    meta = {m.name: (m.gpu_type, m.rack) for m in cluster.machines}
    free = pool.by_machine

    def order(m: str) -> int:
        return cluster.index(free[m][0])

    def fill(machines: list[str]) -> list[str]:
        exact = [m for m in machines if len(free[m]) == n]
        if exact:
            return free[min(exact, key=order)][:n]
        out: list[str] = []
        for m in sorted(machines, key=lambda m: (len(free[m]), order(m))):
            out.extend(free[m][: n - len(out)])
            if len(out) == n:
                break
        return out

    by_type: dict[str, list[str]] = {}
    for m, gpus in free.items():
        if gpus:
            by_type.setdefault(meta[m][0], []).append(m)
    candidates = []
    for machines in by_type.values():
        if sum(len(free[m]) for m in machines) < n:
            continue
        racks: dict[str, list[str]] = {}
        for m in machines:
            racks.setdefault(meta[m][1], []).append(m)
        fitting = [ms for ms in racks.values() if sum(len(free[m]) for m in ms) >= n]
        if fitting:
            machines = min(fitting, key=lambda ms: (sum(len(free[m]) for m in ms), order(ms[0])))
        candidates.append(fill(machines))
    if not candidates:  # no single type holds the gang: across types
        candidates.append(fill([m for ms in by_type.values() for m in ms]))
    best, best_rate = None, 0.0
    for gpus in candidates:
        rate = perf.rate(placement_of(cluster, gpus)) if perf is not None else 1.0
        if rate > best_rate:
            best, best_rate = gpus, rate
    if best is None:
        return None
    chosen = set(best)
    for m in {cluster.gpu(g).machine for g in best}:
        free[m] = [g for g in free[m] if g not in chosen]
    pool.size -= n
    return frozenset(best)


class _Ranked(NamedTuple):
    key: tuple
    job: JobView
    attained: float  # a_J on the priority clock
    queue: int
    running: bool


# --- state ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobClock:
    """A promoted job's priority clock: a_J counts from ``offset_gpu_s`` of attained service,
    δ_J from ``reset_s`` (L1214)."""

    offset_gpu_s: float
    reset_s: float


@dataclass(frozen=True)
class TiresiasState:
    """Carried in ``Decision.policy_state``: clocks of the active jobs promoted at least once."""

    clocks: Mapping[str, JobClock] = field(default_factory=lambda: MappingProxyType({}))


# --- the policies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Tiresias:
    """Discretized 2D-LAS (module docstring). Knobs: ``thresholds`` (GPU-seconds, increasing;
    K = len + 1 queues), ``queues`` (K alone: 1h, 2h, 4h, ...), ``promote_knob`` (∞ disables
    promotion), ``pack_limit`` (skew above which a job is consolidated), ``round_s`` (None:
    event-driven with wake-ups)."""

    name: str = "tiresias"
    thresholds: tuple[float, ...] | None = None
    queues: int | None = None
    promote_knob: float = math.inf
    pack_limit: float = DEFAULT_PACK_LIMIT
    round_s: float | None = None

    def __post_init__(self) -> None:
        if self.queues is not None and (not isinstance(self.queues, int) or self.queues < 1):
            raise ValueError(f"queues must be an integer >= 1, got {self.queues!r}")
        if self.thresholds is None:
            k = 2 if self.queues is None else self.queues
            thresholds = tuple(DEFAULT_THRESHOLD_GPU_S * 2**i for i in range(k - 1))
        else:
            thresholds = tuple(float(x) for x in self.thresholds)
        if not all(x > 0 and math.isfinite(x) for x in thresholds) or any(
            b <= a for a, b in pairwise(thresholds)
        ):
            raise ValueError(f"thresholds must be positive, finite, increasing: {thresholds}")
        if self.queues is not None and self.queues != len(thresholds) + 1:
            raise ValueError(
                f"queues={self.queues} needs {self.queues - 1} thresholds, got {len(thresholds)}"
            )
        object.__setattr__(self, "thresholds", thresholds)
        object.__setattr__(self, "queues", len(thresholds) + 1)
        if not self.promote_knob >= 0:  # also rejects NaN
            raise ValueError(f"promote_knob must be >= 0 (inf disables), got {self.promote_knob}")
        if not 0 <= self.pack_limit <= 1:
            raise ValueError(f"pack_limit must be in [0, 1], got {self.pack_limit}")
        if self.round_s is not None and not (self.round_s > 0 and math.isfinite(self.round_s)):
            raise ValueError(f"round_s must be positive (or None), got {self.round_s}")

    # Gittins overrides this: the within-queue key's first element (lower runs first).
    def _index_key(self, queue: int, attained: float) -> float:
        return 0.0

    def decide(self, snapshot: Snapshot) -> Decision:
        now, cluster = snapshot.now, snapshot.cluster
        thresholds: tuple[float, ...] = self.thresholds  # type: ignore[assignment]
        state = snapshot.policy_state
        old = state.clocks if isinstance(state, TiresiasState) else {}
        clocks: dict[str, JobClock] = {}
        ranked = []
        for job in snapshot.jobs:
            clock = old.get(job.job_id)
            if clock is not None:
                clocks[job.job_id] = clock
            attained = job.attained_gpu_s - (clock.offset_gpu_s if clock else 0.0)
            queue = queue_of(attained, thresholds)
            running = len(job.held) >= job.gang
            if queue > 0 and not running and job.first_start_s is not None:
                t_j = attained / job.gang
                since = clock.reset_s if clock else job.first_start_s
                delta_j = now - since - t_j
                if delta_j + TOL >= self.promote_knob * t_j:  # promote to Q_1 (L1206-1214)
                    clock = JobClock(job.attained_gpu_s, now)
                    clocks[job.job_id] = clock
                    attained, queue = 0.0, 0
            start = job.first_start_s if job.first_start_s is not None else math.inf
            key = (queue, self._index_key(queue, attained), start, job.arrival_s, job.job_id)
            ranked.append(_Ranked(key, job, attained, queue, running))
        ranked.sort(key=lambda r: r.key)

        # One priority-ordered pass counting GPUs (decision 3).
        budget = cluster.num_gpus
        alloc: dict[str, frozenset[str]] = {}
        waiting: list[_Ranked] = []  # admitted, to be placed
        for r in ranked:
            if r.job.gang <= budget:  # ">=" free GPUs (decision 2)
                budget -= r.job.gang
                if r.running:
                    alloc[r.job.job_id] = r.job.held  # keeps its GPUs
                else:
                    waiting.append(r)
            if budget == 0:
                break
        free_n = cluster.num_gpus - sum(len(g) for g in alloc.values())
        if free_n:
            placed = set(alloc) | {r.job.job_id for r in waiting}
            candidates = waiting + [r for r in ranked if r.job.job_id not in placed]
            pool: FreePool | None = None  # built only if some job may be placed
            types: list[str] = []
            for r in candidates:
                if free_n == 0:
                    break
                if r.job.gang > free_n:
                    continue
                if pool is None:
                    kept = set().union(*alloc.values()) if alloc else set()
                    pool = FreePool(cluster, cluster.gpu_ids - kept)
                    types = _gpu_types(cluster)
                if (gpus := self._place(pool, r.job, types)) is not None:
                    alloc[r.job.job_id] = gpus
                    free_n = pool.size
        return Decision(
            alloc,
            policy_state=TiresiasState(MappingProxyType(clocks)),
            wake_at=self._wake_at(now, ranked, alloc, clocks),
        )

    def _place(self, pool: FreePool, job: JobView, types: list[str]) -> frozenset[str] | None:
        skew = placement_skew(pool.cluster, job.gang, job.perf, types)
        if skew is None or skew > self.pack_limit:  # consolidate (decisions 12-13)
            return pool.take(job.gang, job.perf)
        gpus = _take_defrag(pool, job.gang, job.perf)  # decision 14
        return gpus if gpus is not None else pool.take(job.gang, job.perf)

    def _wake_at(
        self,
        now: float,
        ranked: Sequence[_Ranked],
        alloc: Mapping[str, frozenset[str]],
        clocks: Mapping[str, JobClock],
    ) -> float | None:
        """Event mode only: the next demotion of a job running after this decision, or the next
        promotion point of a waiting one (decision 1)."""
        if self.round_s is not None:
            return None
        thresholds: tuple[float, ...] = self.thresholds  # type: ignore[assignment]
        promote = math.isfinite(self.promote_knob)
        times = []
        for r in ranked:
            job, attained, queue = r.job, r.attained, r.queue
            if job.job_id in alloc:
                if queue < len(thresholds):
                    times.append(now + (thresholds[queue] - attained) / job.gang)
            elif promote and queue > 0 and job.first_start_s is not None:
                clock = clocks.get(job.job_id)
                t_j = attained / job.gang
                delta_j = now - (clock.reset_s if clock else job.first_start_s) - t_j
                times.append(now + max(0.0, self.promote_knob * t_j - delta_j))
        later = [t for t in times if t > now]
        return min(later) if later else None


@dataclass(frozen=True)
class TiresiasGittins(Tiresias):
    """Discretized 2D-Gittins (module docstring): Tiresias's knobs plus ``distribution`` (a file
    of GPU-second samples, relative to the shared data folder, or the samples themselves, as a
    sequence or a :class:`ServiceDistribution`: then nothing is read, decision 9)."""

    name: str = "tiresias-gittins"
    distribution: str | Path | Sequence[float] | ServiceDistribution = DEFAULT_DISTRIBUTION
    _dist: ServiceDistribution = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.distribution, str | Path):
            # The policy's only file (and, for a relative path, environment) read: here, once.
            dist = ServiceDistribution.from_file(self.distribution)
        else:
            if isinstance(self.distribution, ServiceDistribution):
                dist = self.distribution
            else:
                dist = ServiceDistribution.from_samples(self.distribution)
            object.__setattr__(self, "distribution", dist.samples)
        object.__setattr__(self, "_dist", dist)

    def _index_key(self, queue: int, attained: float) -> float:
        thresholds: tuple[float, ...] = self.thresholds  # type: ignore[assignment]
        if queue >= len(thresholds):  # Q_K: FIFO (L1198)
            return 0.0
        return -self._dist.index(attained, thresholds[queue])
