"""``afs-l`` and ``afs-p``: Apathetic Future Share (Hwang et al., "Elastic Resource Sharing for
Distributed Deep Learning", NSDI '21: AFS and its system CoDDL; seed 004, spec ``afs.md``).

Seed sections implemented (``Lnnn`` = line of ``seeds/004_9867e882fd5dc007.txt``):

* the pairwise rule (3) under the AFS assumption, §3.2 L183-187 (spec §3.3): :func:`rule3`. Its
  transitivity (App. C, L505-526) is what lets TOPPRIORITY find the top job in one linear scan;
* Algorithm 1, AFS-L: TOPPRIORITY and the GPU-by-GPU hand-out, §3.3 L201-238 (spec §4):
  :func:`afs_shares`, :class:`AfsL`;
* AFS-P, L240-244 and fn. 11 (spec §5): the modified TOPPRIORITY (both orderings of (3), a random
  winner when neither holds) and processor-sharing counters with a 2-hour unit: :class:`AfsP`;
* throughput curves, §4.5 L297-303 and §5.1 L315 (spec §6): :func:`throughput_curve`;
* network packing and placement, §4.4 L289-295, App. E L538-558 (spec §7.4): :func:`regulate`
  (Prop. 2) and :func:`place_packed` (Prop. 1 plus the migration objective of L295).

Decisions on the spec's errata and open choices:

* **Elastic by default** (AFS is an elastic allocator: a job gets any number of GPUs up to what
  helps it, L64, L123). Knob ``elastic``:

  - ``True`` (default): ``JobView.gang`` is read as the job's maximum and a share is any
    0 <= n <= min(gang, peak). The simulator runs such shares (``arbiter/sim/engine.py`` runs a
    job on a partial gang at ``perf.rate`` of that share when the policy declares ``elastic``),
    so ``yarn-arbiter simulate --policy afs-l`` is AFS. *Where the model supports it:* a job
    whose perf model is rated per whole gang (:func:`~arbiter.policies.base.rated_per_gang`:
    Philly, Tiresias and Synergy durations, Gavel readings) has no throughput curve, and the
    engine will not run it on fewer GPUs than its gang. A decision whose snapshot holds such a
    job is therefore made in gang mode (below) for every job of that snapshot; on the shipped
    traces this means AFS is elastic on the Pollux workloads (measured curves) and in the live
    arbiter (no perf model: linear curves, CoDDL's L301), and in gang mode on every other trace.
    In the live arbiter an app may hence be leased fewer GPUs than it asked for; the policy
    declares ``holds_partial_gangs`` so the live driver shows it the partial share it holds
    (otherwise the share would look lost and be re-placed, with revocations, every round). An
    AM that cannot run on fewer GPUs should be served with ``elastic=false``.
  - ``False``: a job's only share is its gang, so its curve has one point and the pairwise rule
    never fires (no job can take an extra GPU). Algorithm 1 then degenerates to its stage one
    with whole gangs: AFS-L admits jobs by remaining time on their gang, shortest first
    (preemptive SRTF); AFS-P by counter with the non-preemptive quantum. Gangs that do not fit
    are skipped so smaller ones behind them run (backfilling, as ``las`` does). This is the
    non-elastic ablation, not AFS.

* **Curves** (spec §6, §12.11): p(n) = ``perf.rate`` on the best placement of n GPUs of an empty
  cluster (:func:`~arbiter.policies.base.ideal_rate`; NaN, i.e. no type runs it, counts as 0).
  Only perf models whose rate depends on the GPU count give meaningful curves: the Pollux
  models do (measured step time at the local batch B/n, fixed global batch as in CoDDL, L313).
  Philly, Tiresias and Synergy jobs (``SlowdownPerf``) and Gavel jobs are rated per whole gang
  (no curve), so they are scheduled in gang mode (above). With ``perf`` None (the live arbiter,
  which gets no throughput reports yet) curves are linear, p(n) = n: CoDDL's "assume linear
  scalability first" (L301). With linear curves (3) holds only when the shorter job holds >= 2
  GPUs more than the other, so shares come out nearly max-min fair, like AFS-S (L532).
* **Caps** (spec §4 guard rails, §12.5): a job gets at most min(gang, peak) GPUs, peak = the
  smallest n reaching the curve's maximum. GPUs left once every job is at its cap stay idle.
* **Stage one is explicit** (spec §4 edge, §12.6): a job without GPUs beats every job holding
  some, as the prose of L207 says ("every job 1 GPU before stage two"). The literal (3) with a
  strict ``>`` would let a rival scaling linearly or better from 1 to 2 GPUs take its second
  GPU first (Pollux's bert scales 2.01x).
* **Lengths:** len(c) = remaining work / p(c). TOPPRIORITY starts from the first job in arrival
  order (pseudocode's "any job"; the prose's "at random", spec §12.4, only matters for AFS-P's
  random ties) and swaps on equal lengths (line 9's ``>=``). Two jobs without GPUs: the shorter
  len(1) first, ties by arrival then id. If a job's remaining work is unknown (the live
  arbiter), AFS-L compares its pairs as AFS-P does and ranks it after known lengths in stage one.
* **AFS-P's random winner** (L240): ``tie_break="random"`` draws from a ``random.Random`` seeded
  with ``(seed, now)``, so a decision is a pure function of its snapshot; ``"fewest"`` gives the
  GPU to the job holding fewer, then the lower counter, earlier arrival, id.
* **Counters** (spec §5, §12.3): a counter is the wall time the job held GPUs (any share) over
  ``quantum_s`` (default 2 h, fn. 11), rounded down; ties by arrival then id. The counter regime
  applies when jobs outnumber GPUs (n > M; with n = M both rules give one GPU each); in gang mode
  when the gangs do not all fit. "Non-preemptive": a job given GPUs in the last decision whose
  current stint (time held since it last got GPUs after holding none) is under one quantum keeps
  one GPU (its gang in gang mode); the stint's end is a wake-up (``Decision.wake_at``) that
  reschedules everyone, the eviction event of L242. Stints also run in the n <= M regime, so a
  job that ran through it can be evicted as soon as jobs outnumber GPUs.
* **Stage labels** (spec §12.2): §5.4's swapped labels are ignored; implemented per §3.3.
* **Network packing** (App. E) only in elastic mode, and only on clusters whose machines all
  hold 2^k GPUs of one type (the paper's homogeneous cluster); otherwise, and in gang mode (gang
  sizes need not be legal), placement is :class:`~arbiter.policies.base.FreePool`'s, with jobs
  keeping as many of their GPUs as their share allows. Prop. 2's top-ups (spec §12.8): legal
  steps (+2^k at r >= 2^k, doubling below) within the job's cap, the job furthest below its
  AFS share first (the plan "that minimizes the difference from the original plan", L293), ties
  to the job that got its first GPU earlier; caps may leave GPUs idle.
* **Placement with few migrations** (L295): greedy, not an exact maximisation. Whole-machine
  jobs first take machines where they hold the most GPUs, then free machines in the rack they
  already use, avoiding machines that smaller jobs will want back; sub-machine jobs in
  decreasing size take a machine where they hold GPUs, else the best fit that least disturbs
  others (any-fit decreasing always fits: every machine's free space stays a multiple of the
  current power-of-two size). On a machine a job keeps its own GPUs first.
* Not implemented: CoDDL's measurement protocol (initial share <= M/n, L301-303; the simulator
  knows the curves) and the QL/CE/BI telemetry (§2.2).
* App. A's toy example (spec §12.1): the optimum is 1.75 h, not the paper's 1.25 h (tests).
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from arbiter.cluster import Cluster
from arbiter.placement import placement_of
from arbiter.policies.base import (
    Decision,
    FreePool,
    JobView,
    Snapshot,
    ideal_rate,
    rated_per_gang,
)

__all__ = [
    "DEFAULT_QUANTUM_S",
    "AfsL",
    "AfsP",
    "AfsState",
    "Candidate",
    "afs_shares",
    "packing_size",
    "peak",
    "place_packed",
    "regulate",
    "rule3",
    "throughput_curve",
]

DEFAULT_QUANTUM_S = 7200.0  # AFS-P's unit of time for full-scale traces (fn. 11, L244)
_EPS = 1e-9

Curve = tuple[float, ...]  # curve[n - 1] = throughput on n GPUs


def _p(curve: Curve, n: int) -> float:
    """Throughput on ``n`` GPUs; 0 without GPUs, flat beyond the curve's end."""
    if n <= 0 or not curve:
        return 0.0
    return curve[min(n, len(curve)) - 1]


def rule3(a: Curve, a_cnt: int, b: Curve, b_cnt: int) -> bool:
    """Inequality (3) (L185): True when the longer job j_b should get the next GPU before the
    shorter job j_a, i.e. (p'_b - p_b) / p'_b > (p'_a - p_a) / p_a, where p is the throughput on
    the job's current count and p' on one GPU more.

    A job holding nothing has p = 0: as j_b its side is 1, as j_a its side is +inf.

    >>> rule3((1.0, 1.2), 1, (1.0, 2.0), 1)  # (2 - 1) / 2 = 0.5 > (1.2 - 1) / 1 = 0.2
    True
    """
    pb, pb1 = _p(b, b_cnt), _p(b, b_cnt + 1)
    pa, pa1 = _p(a, a_cnt), _p(a, a_cnt + 1)
    lhs = (pb1 - pb) / pb1 if pb1 > 0 else 0.0
    rhs = (pa1 - pa) / pa if pa > 0 else (math.inf if pa1 > 0 else 0.0)
    return lhs > rhs


def peak(curve: Curve) -> int:
    """The smallest GPU count reaching the curve's maximum; 0 if the job runs nowhere."""
    best = max(curve, default=0.0)
    return curve.index(best) + 1 if best > 0 else 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """What Algorithm 1 sees of one job."""

    job_id: str
    curve: Curve
    cap: int  # the most GPUs worth giving it: min(gang, peak)
    remaining: float | None = None  # remaining work (AFS-L); None = unknown
    counter: int = 0  # AFS-P's processor-sharing counter
    arrival_s: float = 0.0

    def length(self, n: int) -> float:
        """len(n) (L205): remaining time on n GPUs; +inf on none or if the work is unknown."""
        p = _p(self.curve, n)
        if n <= 0 or self.remaining is None or not p > 0:
            return math.inf
        return self.remaining / p


def _stage_one_key(c: Candidate, length_aware: bool) -> tuple:
    return (c.length(1) if length_aware else 0.0, c.counter, c.arrival_s, c.job_id)


def _winner(
    x: Candidate,
    y: Candidate,
    cnt: Mapping[str, int],
    length_aware: bool,
    rng: random.Random | None,
) -> Candidate:
    """TOPPRIORITY's comparison of j* = ``x`` with the scanned job ``y`` in stage two (module
    docstring)."""
    cx, cy = cnt[x.job_id], cnt[y.job_id]  # both >= 1: stage one is a sort (afs_shares)
    if length_aware and x.remaining is not None and y.remaining is not None:
        a, b = x, y
        if a.length(cx) >= b.length(cy):  # Algorithm 1, line 9
            a, b = b, a
        return b if rule3(a.curve, cnt[a.job_id], b.curve, cnt[b.job_id]) else a
    # AFS-P's modified TOPPRIORITY: (3) in both orderings; it never holds in both (L240).
    if rule3(x.curve, cx, y.curve, cy):
        return y
    if rule3(y.curve, cy, x.curve, cx):
        return x
    if rng is not None:
        return x if rng.random() < 0.5 else y
    return min(x, y, key=lambda c: (cnt[c.job_id], c.counter, c.arrival_s, c.job_id))


def afs_shares(
    candidates: Sequence[Candidate],
    num_gpus: int,
    *,
    length_aware: bool = True,
    rng: random.Random | None = None,
) -> tuple[dict[str, int], tuple[str, ...]]:
    """Algorithm 1 (AFS-L; AFS-P's modified TOPPRIORITY with ``length_aware=False``).

    Hands out ``num_gpus`` GPUs one at a time, each to the top job of TOPPRIORITY among the
    jobs below their cap; candidates are scanned in the given order (arrival order). Returns
    the GPUs per job and the job of each grant, in order. Stage one (everyone gets one GPU,
    shortest first) is a sort: a job without GPUs beats any job with some, and those compare by
    len(1). O(M·n).

    >>> a = Candidate("a", (1.0, 1.2, 1.3, 1.35), 4, remaining=2.0)
    >>> b = Candidate("b", (1.0, 2.0, 3.0, 4.0), 4, remaining=8.0)
    >>> afs_shares([a, b], 4)
    ({'a': 1, 'b': 3}, ('a', 'b', 'b', 'b'))
    """
    cnt = {c.job_id: 0 for c in candidates}
    eligible = [c for c in candidates if c.cap > 0]
    first = sorted(eligible, key=lambda c: _stage_one_key(c, length_aware))[: max(0, num_gpus)]
    grants = [c.job_id for c in first]
    for job_id in grants:
        cnt[job_id] = 1
    left = num_gpus - len(grants)
    while left > 0:
        open_ = [c for c in eligible if cnt[c.job_id] < c.cap]
        if not open_:
            break  # every job at its cap: the rest idles
        top = open_[0]
        for c in open_[1:]:
            top = _winner(top, c, cnt, length_aware, rng)
        cnt[top.job_id] += 1
        grants.append(top.job_id)
        left -= 1
    return cnt, tuple(grants)


def throughput_curve(
    cluster: Cluster, job: JobView, cache: dict[tuple[int, int], float] | None = None
) -> Curve:
    """p(1..gang) of ``job`` (module docstring); ``cache`` (keyed by ``id(perf)``) must not
    outlive the perf objects, e.g. one ``decide`` call."""
    if job.perf is None:
        return tuple(float(n) for n in range(1, job.gang + 1))
    out = []
    for n in range(1, job.gang + 1):
        key = (id(job.perf), n)
        if cache is not None and key in cache:
            rate = cache[key]
        else:
            rate = ideal_rate(cluster, n, job.perf)
            rate = rate if rate > 0 else 0.0  # NaN: no GPU type runs it on n GPUs
            if cache is not None:
                cache[key] = rate
        out.append(rate)
    return tuple(out)


# --- network packing (App. E) ---------------------------------------------------------------


def packing_size(cluster: Cluster) -> int | None:
    """2^k if every machine with GPUs holds 2^k GPUs of one type (App. E's cluster), else None."""
    machines = [m for m in cluster.machines if m.num_gpus]
    sizes = {m.num_gpus for m in machines}
    if len(sizes) != 1 or len({m.gpu_type for m in machines}) != 1:
        return None
    size = sizes.pop()
    return size if size & (size - 1) == 0 else None


def _legal_floor(s: int, size: int) -> int:
    """x_i of Prop. 2: the largest legal share <= s."""
    if s <= 0:
        return 0
    if s > size:
        return s // size * size
    return 1 << (s.bit_length() - 1)


def regulate(
    shares: Mapping[str, int],
    gpus_per_machine: int,
    *,
    caps: Mapping[str, int] | None = None,
    order: Sequence[str] = (),
) -> dict[str, int]:
    """Prop. 2 (L548-558): legal shares r_i (0, 2^l < 2^k, or multiples of 2^k) with r_i >= x_i
    (the largest legal value <= s_i), then the d = sum(s) - sum(r) idle GPUs handed back in legal
    steps (module docstring for the order). ``caps`` bound the top-ups; ``order`` breaks ties.

    >>> regulate({"a": 3, "b": 5}, 4)
    {'a': 4, 'b': 4}
    """
    size = gpus_per_machine
    if size < 1 or size & (size - 1):
        raise ValueError(f"network packing needs 2^k GPUs per machine, got {size}")
    rank = {j: k for k, j in enumerate(order)}
    r = {j: _legal_floor(s, size) for j, s in shares.items()}
    d = sum(shares.values()) - sum(r.values())
    while d > 0:
        best: tuple[tuple, str, int] | None = None
        for j, rj in r.items():
            if rj <= 0:
                continue
            step = size if rj >= size else rj
            if step > d or (caps is not None and rj + step > caps.get(j, rj)):
                continue
            key = (rj - shares[j], rank.get(j, len(rank)), j)
            if best is None or key < best[0]:
                best = (key, j, step)
        if best is None:
            break
        r[best[1]] += best[2]
        d -= best[2]
    return r


def place_packed(
    cluster: Cluster,
    shares: Mapping[str, int],
    held: Mapping[str, frozenset[str]],
    order: Sequence[str] = (),
) -> dict[str, frozenset[str]]:
    """Prop. 1 (L542-546) with the migration objective (L295): every job with a legal share
    ``r`` on exactly ceil(r / 2^k) machines, machines shared only by sub-machine jobs (no
    network sharing); module docstring for the greedy reuse rules. ``held`` = current GPUs."""
    size = packing_size(cluster)
    if size is None:
        raise ValueError(f"cluster {cluster.name!r}: network packing needs 2^k GPUs per machine")
    if sum(shares.values()) > cluster.num_gpus:
        raise ValueError(f"shares total {sum(shares.values())} > {cluster.num_gpus} GPUs")
    gpus_on: dict[str, list[str]] = defaultdict(list)
    for g in cluster.gpus:
        gpus_on[g.machine].append(g.id)
    index = {m.name: k for k, m in enumerate(cluster.machines)}
    rack = {m.name: m.rack for m in cluster.machines}
    rank = {j: k for k, j in enumerate(order)}
    jobs = sorted(
        (j for j, n in shares.items() if n > 0), key=lambda j: (rank.get(j, len(rank)), j)
    )
    for j in jobs:
        n = shares[j]
        if not (n % size == 0 or (n < size and n & (n - 1) == 0)):
            raise ValueError(f"job {j!r}: share {n} is not legal with {size} GPUs per machine")
    held_on = {j: Counter(cluster.gpu(g).machine for g in held.get(j, ())) for j in jobs}
    whole = [j for j in jobs if shares[j] >= size]
    small = [j for j in jobs if shares[j] < size]
    pending: Counter[str] = Counter()  # GPUs small jobs not yet placed hold on each machine
    for j in small:
        pending.update(held_on[j])
    free = {m for m in gpus_on if len(gpus_on[m]) == size}
    on_machine: dict[str, list[tuple[str, int]]] = defaultdict(list)

    need = {j: shares[j] // size for j in whole}
    pairs = sorted(
        (-c, rank.get(j, 0), index[m], j, m) for j in whole for m, c in held_on[j].items()
    )
    for *_, j, m in pairs:
        if need[j] > 0 and m in free:
            free.discard(m)
            on_machine[m].append((j, size))
            need[j] -= 1
    for j in whole:
        home = Counter(rack[m] for m, lst in on_machine.items() if any(x == j for x, _ in lst))
        while need[j] > 0 and free:
            m = min(free, key=lambda m: (-home[rack[m]], pending[m], index[m]))
            free.discard(m)
            on_machine[m].append((j, size))
            home[rack[m]] += 1
            need[j] -= 1

    space = {m: size for m in free}
    for j in sorted(small, key=lambda j: (-shares[j], rank.get(j, len(rank)), j)):
        n = shares[j]
        pending.subtract(held_on[j])
        fits = [m for m in space if space[m] >= n]
        if not fits:  # impossible by Prop. 1's argument; kept so a bug shows as a smaller share
            continue
        reuse = [m for m in fits if held_on[j][m] > 0]
        if reuse:
            m = min(reuse, key=lambda m: (-held_on[j][m], index[m]))
        else:
            m = min(fits, key=lambda m: (max(0, pending[m] - (space[m] - n)), space[m], index[m]))
        space[m] -= n
        on_machine[m].append((j, n))

    out: dict[str, list[str]] = defaultdict(list)
    for m, lst in on_machine.items():
        ids = gpus_on[m]
        own = {j: [g for g in ids if g in held.get(j, ())][:n] for j, n in lst}
        claimed = {g for gs in own.values() for g in gs}
        rest = [g for g in ids if g not in claimed]
        for j, n in lst:
            k = n - len(own[j])
            out[j].extend(own[j] + rest[:k])
            rest = rest[k:]
    return {j: frozenset(gs) for j, gs in out.items()}


def _keep(cluster: Cluster, held: frozenset[str], n: int) -> frozenset[str]:
    """``n`` of the held GPUs, from the machines holding most of them (n >= len: all)."""
    if len(held) <= n:
        return held
    by_machine: dict[str, list[str]] = defaultdict(list)
    for g in sorted(held, key=cluster.index):
        by_machine[cluster.gpu(g).machine].append(g)
    out: list[str] = []
    for gs in sorted(by_machine.values(), key=lambda gs: (-len(gs), cluster.index(gs[0]))):
        out.extend(gs[: n - len(out)])
        if len(out) >= n:
            break
    return frozenset(out)


def _place_generic(
    cluster: Cluster, shares: Mapping[str, int], jobs: Mapping[str, JobView], order: Sequence[str]
) -> dict[str, frozenset[str]]:
    """Elastic placement without network packing: keep what the share allows, add the rest
    where :class:`FreePool` rates it best."""
    kept = {j: _keep(cluster, jobs[j].held, shares[j]) for j in order if shares.get(j, 0) > 0}
    used = set().union(*kept.values()) if kept else set()
    pool = FreePool(cluster, cluster.gpu_ids - used)
    out: dict[str, frozenset[str]] = {}
    for j, have in kept.items():
        extra = shares[j] - len(have)
        perf = jobs[j].perf
        got: frozenset[str] = frozenset()
        if extra > 0:
            got = pool.take(extra, perf) or pool.take_any(extra, perf)
            bad = have and got and perf is not None
            if bad and not perf.rate(placement_of(cluster, have | got)) > 0:
                pool.give(got)  # e.g. a GPU type the job has no throughput on
                got = frozenset()
        if have | got:
            out[j] = have | got
    return out


def _place_gangs(
    cluster: Cluster, ranked: Sequence[JobView], admitted: set[str]
) -> dict[str, frozenset[str]]:
    """Gang mode: admitted running jobs keep their GPUs, the other admitted jobs are placed in
    rank order, then the rest backfill what is left (as ``las``)."""
    alloc = {j.job_id: j.held for j in ranked if j.job_id in admitted and j.running}
    kept = set().union(*alloc.values()) if alloc else set()
    pool = FreePool(cluster, cluster.gpu_ids - kept)
    waiting = [j for j in ranked if j.job_id in admitted and j.job_id not in alloc]
    waiting += [j for j in ranked if j.job_id not in admitted]
    for job in waiting:
        if pool.size == 0:
            break
        if job.gang <= pool.size and (gpus := pool.take(job.gang, job.perf)) is not None:
            alloc[job.job_id] = gpus
    return alloc


# --- the policies ---------------------------------------------------------------------------


def _frozen(d: Mapping) -> MappingProxyType:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class AfsState:
    """What AFS carries between calls (``Decision.policy_state``)."""

    last_now: float | None = None
    allocated: frozenset[str] = frozenset()  # jobs given GPUs by the last decision
    executed_s: Mapping[str, float] = field(default_factory=lambda: _frozen({}))
    stint_start_s: Mapping[str, float] = field(default_factory=lambda: _frozen({}))
    curves: Mapping[str, Curve] = field(default_factory=lambda: _frozen({}))


@dataclass(frozen=True)
class _Afs:
    name: str = "afs"
    round_s: float | None = None  # decide at every arrival, completion and eviction
    elastic: bool = True  # module docstring: gang mode is the non-elastic ablation
    network_packing: bool = True  # App. E regulation and placement (elastic mode)
    tie_break: str = "random"  # AFS-P's winner when (3) holds in neither ordering
    seed: int = 0

    def __post_init__(self) -> None:
        if self.tie_break not in ("random", "fewest"):
            raise ValueError(f"tie_break must be 'random' or 'fewest', got {self.tie_break!r}")

    @property
    def holds_partial_gangs(self) -> bool:
        """The live driver shows an app the partial share it holds (module docstring)."""
        return self.elastic

    def _decide(
        self, snapshot: Snapshot[AfsState], *, length_aware: bool, quantum_s: float | None
    ) -> Decision[AfsState]:
        prev = snapshot.policy_state
        if not isinstance(prev, AfsState):
            prev = AfsState()
        now, jobs = snapshot.now, snapshot.jobs
        by_id = {j.job_id: j for j in jobs}
        dt = 0.0 if prev.last_now is None else max(0.0, now - prev.last_now)
        executed = {
            j: prev.executed_s.get(j, 0.0) + (dt if j in prev.allocated else 0.0) for j in by_id
        }
        quantum = quantum_s if quantum_s is not None else math.inf
        counter = {j: int(e / quantum + _EPS) if math.isfinite(quantum) else 0
                   for j, e in executed.items()}  # fmt: skip
        protected = set()  # AFS-P: mid-stint jobs keep their GPUs in the counter regime
        if quantum_s is not None:
            for j in prev.allocated & by_id.keys():
                stint = executed[j] - prev.stint_start_s.get(j, executed[j])
                if stint < quantum * (1 - _EPS) - _EPS:
                    protected.add(j)
        rng = random.Random(f"{self.seed}:{now!r}") if self.tie_break == "random" else None
        curves = {j: c for j, c in prev.curves.items() if j in by_id}

        if self.elastic and not any(rated_per_gang(j.perf) for j in jobs):
            alloc, counter_regime = self._elastic(
                snapshot, by_id, curves, counter, protected, rng, length_aware, quantum_s
            )
        else:
            alloc, counter_regime = self._gangs(
                snapshot, by_id, counter, protected, length_aware, quantum_s
            )

        allocated = frozenset(j for j, g in alloc.items() if g)
        stint_start = {}
        for j in allocated:
            continuing = j in prev.allocated and j in prev.stint_start_s
            if continuing and (j in protected or not counter_regime):
                stint_start[j] = prev.stint_start_s[j]
            else:
                stint_start[j] = executed[j]
        wake = None
        if counter_regime and allocated and len(allocated) < len(jobs):
            left = min(quantum - (executed[j] - stint_start[j]) for j in allocated)
            wake = now + max(left, _EPS)
        state = AfsState(
            last_now=now,
            allocated=allocated,
            executed_s=_frozen(executed),
            stint_start_s=_frozen(stint_start),
            curves=_frozen(curves),
        )
        return Decision({j: g for j, g in alloc.items() if g}, policy_state=state, wake_at=wake)

    def _elastic(self, snapshot, by_id, curves, counter, protected, rng, length_aware, quantum_s):
        cluster, num = snapshot.cluster, snapshot.cluster.num_gpus
        cache: dict[tuple[int, int], float] = {}
        cands = []
        for job in snapshot.jobs:
            if job.job_id not in curves:
                curves[job.job_id] = throughput_curve(cluster, job, cache)
            curve = curves[job.job_id]
            cands.append(
                Candidate(
                    job.job_id, curve, min(job.gang, peak(curve)), job.remaining_work,
                    counter[job.job_id], job.arrival_s,
                )
            )  # fmt: skip
        eligible = [c for c in cands if c.cap > 0]
        counter_regime = quantum_s is not None and len(eligible) > num
        if counter_regime:  # L242: one GPU each, by counter, non-preemptively
            keep = [c for c in eligible if c.job_id in protected]
            rest = sorted(
                (c for c in eligible if c.job_id not in protected),
                key=lambda c: (c.counter, c.arrival_s, c.job_id),
            )
            grants = tuple(c.job_id for c in (keep + rest)[:num])
            shares = dict.fromkeys(grants, 1)
        else:
            shares, grants = afs_shares(cands, num, length_aware=length_aware, rng=rng)
        order = list(dict.fromkeys(grants))
        size = packing_size(cluster) if self.network_packing else None
        if size is not None:
            caps = {c.job_id: c.cap for c in cands}
            legal = regulate(shares, size, caps=caps, order=order)
            held = {j: v.held for j, v in by_id.items()}
            return place_packed(cluster, legal, held, order), counter_regime
        return _place_generic(cluster, shares, by_id, order), counter_regime

    def _gangs(self, snapshot, by_id, counter, protected, length_aware, quantum_s):
        jobs, num = snapshot.jobs, snapshot.cluster.num_gpus
        counter_regime = False
        if quantum_s is None:  # AFS-L: shortest remaining time on the gang first

            def length(j: JobView) -> float:
                rate = j.ideal_rate
                if rate is None or not rate > 0:
                    rate = ideal_rate(snapshot.cluster, j.gang, j.perf) if j.perf else 1.0
                if j.remaining_work is None or not rate > 0:
                    return math.inf
                return j.remaining_work / rate

            ranked = sorted(jobs, key=lambda j: (length(j), counter[j.job_id], j.arrival_s,
                                                 j.job_id))  # fmt: skip
        else:
            counter_regime = sum(j.gang for j in jobs) > num
            keep = [j for j in jobs if j.job_id in protected]
            rest = sorted(
                (j for j in jobs if j.job_id not in protected),
                key=lambda j: (counter[j.job_id], j.arrival_s, j.job_id),
            )
            ranked = keep + rest
        admitted, budget = set(), num
        for j in ranked:
            if j.gang <= budget:
                admitted.add(j.job_id)
                budget -= j.gang
        return _place_gangs(snapshot.cluster, ranked, admitted), counter_regime


@dataclass(frozen=True)
class AfsL(_Afs):
    """AFS-L: Algorithm 1 with known job lengths (``JobView.remaining_work``)."""

    name: str = "afs-l"

    def decide(self, snapshot: Snapshot[AfsState]) -> Decision[AfsState]:
        return self._decide(snapshot, length_aware=True, quantum_s=None)


@dataclass(frozen=True)
class AfsP(_Afs):
    """AFS-P: lengths unknown; (3) in both orderings, processor-sharing counters (L240-244)."""

    name: str = "afs-p"
    quantum_s: float = DEFAULT_QUANTUM_S

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.quantum_s > 0 and math.isfinite(self.quantum_s)):
            raise ValueError(f"quantum_s must be positive, got {self.quantum_s}")

    def decide(self, snapshot: Snapshot[AfsState]) -> Decision[AfsState]:
        return self._decide(snapshot, length_aware=False, quantum_s=self.quantum_s)
