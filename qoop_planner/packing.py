"""Completion-time estimation by simulated Tetris packing (QOOP §2.4.3, spec A.4.3).

:func:`estimate` takes one cached :class:`~qoop_planner.model.Plan`, the engine's
:class:`~qoop_planner.model.Progress` and the query's current :class:`Share`, and simulates how
the plan's *remaining* tasks would run if that share lasted forever; the simulated finish time
is the estimate the greedy re-planner (:mod:`qoop_planner.replan`) compares across plans.
:func:`advance` runs the same simulation for a bounded time and returns the progress it makes
(a simulator driver uses it to replay a share profile).

What counts as done (progress propagation, spec A.4.2):

* a stage whose signature is in ``progress.checkpointed`` is available at time 0, whatever plan
  computed it, and nothing below it is needed any more (the walk from the root stops there);
* a stage of ``progress.running`` gets *task-level* credit (``tasks - tasks_done`` tasks left)
  in the current plan (``progress.current_plan``); in any other plan only if the running stage
  reports the same :attr:`~qoop_planner.model.Stage.form` as the plan's stage (same signature
  and partitioning: the same tasks, e.g. a scan every plan shares), because partitioning may
  differ across plans (spec A.4.2);
* a credited stage with no task left is done (its inputs are not needed either).

Choices where the seed is silent (spec A.4.3 marks the simulator an assumption):

* **One bin.** The share is one bin of capacity ``(vcores, memory_mb)``; a task runs when its
  peak demand fits into what is free. Demands are normalised by the share, so a dimension in
  which the share is 0 can only hold tasks that demand 0 of it.
* **Readiness.** A task is ready when every needed input stage of its stage is done, i.e. all of
  its tasks have finished (no slow start), or is checkpointed.
* **Tetris order.** When capacity is free, the ready stage whose task has the highest alignment
  ``d·f`` (demand and free capacity, both normalised by the share) gets the next task; ties
  (within 1e-12) go to the longer task, then to the smaller stage id. Placement repeats until
  nothing fits. Identical tasks are placed as a *run* of ``k`` at once, ``k`` being the largest
  count for which the task-by-task greedy would keep choosing that stage (alignment is linear in
  the number placed, so this is a closed form per competitor).
* **Waves and slot holding.** A run keeps its ``k`` slots and refills them with its own stage's
  next tasks wave after wave (like Tez's container reuse within a vertex) until the stage has no
  task left to launch; the stage's runs take its tasks in the order of their wave boundaries, so
  a last, partial wave frees the slots it does not use at its start. Capacity is re-packed only
  when slots are freed or stages become ready, so a plan costs a few events per stage instead of
  one per wave or task: this is what makes a decision over 64 plans fast. The price is that a
  newly ready stage cannot take slots from a running stage at that stage's wave boundaries, as
  task-level Tetris could; on random 16-stage plans the two estimates differed by about 1% on
  average and 8% at most.
* **Time.** Events at equal times (within 1e-9 s) are one event.
* **Partially elapsed tasks.** ``RunningStage`` reports finished tasks and elapsed time and, if
  the engine knows them, the seconds each task in flight has run (``in_flight``). Reported
  tasks in flight keep their slots at time 0 with what is left of their duration, most progress
  first, as far as they fit into the share; the others (and all of them when none are
  reported) start from scratch (a slight over-estimate, the same rule for every plan).
  ``elapsed_s`` is not used by the estimate.
* **Infeasible.** A needed task whose demand exceeds the share in some dimension can never run
  under that share: the estimate is ``math.inf`` (the re-planner then prefers any finite plan).
  A stage of zero demand fits any number of times: all of its tasks start together.

:func:`lower_bound` is a cheap bound on the estimate (work over the share, critical path) that
the re-planner uses to skip plans that cannot change its decision. Per-plan index arrays are
cached by plan identity (plans are immutable).
"""

from __future__ import annotations

import heapq
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

from qoop_planner.model import Plan, Progress, RunningStage, Share, StageSignature

__all__ = ["Estimate", "Wave", "advance", "estimate", "lower_bound", "remaining_tasks"]

_EPS = 1e-9  # capacity / time slack for float rounding
_TIE = 1e-12  # alignment scores closer than this are a tie


@dataclass(frozen=True)
class Wave:
    """``tasks`` tasks of ``stage_id`` run in ``[start_s, end_s)``; the same wave recurs
    ``repeat`` times in all, every ``period_s`` seconds (``repeat`` 1: a single wave)."""

    stage_id: str
    start_s: float
    end_s: float
    tasks: int
    repeat: int = 1
    period_s: float = 0.0


@dataclass(frozen=True)
class Estimate:
    """Estimated completion of one plan: ``finish_s`` seconds from now (``math.inf`` if some
    needed task can never fit into the share); ``schedule`` when asked for."""

    plan_id: str
    finish_s: float
    schedule: tuple[Wave, ...] | None = None


# --------------------------------------------------------------------------------------------
# Per-plan index arrays, cached by plan identity.


class _Compiled:
    __slots__ = (
        "consumers",
        "dem_c",
        "dem_m",
        "dur",
        "forms",
        "ids",
        "inputs",
        "n",
        "rank",
        "root",
        "sig_hash",
        "sig_index",
        "sigs",
        "tasks",
    )

    def __init__(self, plan: Plan) -> None:
        stages = plan.stages
        index = {s.stage_id: i for i, s in enumerate(stages)}
        self.n = len(stages)
        self.ids = [s.stage_id for s in stages]
        self.sigs = [s.signature for s in stages]
        self.forms = [s.form for s in stages]
        self.sig_index = {sig: i for i, sig in enumerate(self.sigs)}
        self.sig_hash = [hash(s) for s in self.sigs]
        self.inputs = [tuple(index[j] for j in s.inputs) for s in stages]
        consumers: list[list[int]] = [[] for _ in stages]
        for i, ins in enumerate(self.inputs):
            for j in ins:
                consumers[j].append(i)
        self.consumers = [tuple(c) for c in consumers]
        self.tasks = [max(0, int(s.cost.tasks)) for s in stages]
        self.dur = [float(s.cost.task_s) for s in stages]
        self.dem_c = [float(s.cost.demand.vcores) for s in stages]
        self.dem_m = [float(s.cost.demand.memory_mb) for s in stages]
        order = sorted(range(self.n), key=lambda i: self.ids[i])
        self.rank = [0] * self.n
        for r, i in enumerate(order):
            self.rank[i] = r
        self.root = index[plan.root]


_CACHE: dict[int, tuple[weakref.ref, _Compiled]] = {}


def _compiled(plan: Plan) -> _Compiled:
    key = id(plan)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is plan:
        return hit[1]
    cp = _Compiled(plan)
    _CACHE[key] = (weakref.ref(plan, lambda _r: _CACHE.pop(key, None)), cp)
    return cp


# --------------------------------------------------------------------------------------------
# What is left of a plan.

_AVAILABLE = -1  # rem[] marker: checkpointed, credited as finished, or not needed


_VIEWS: dict[int, tuple[weakref.ref, frozenset[int], frozenset[int]]] = {}


def _progress_view(progress: Progress) -> tuple[frozenset[int], frozenset[int]]:
    """Hashes of the checkpointed and running signatures, cached by progress identity: a fast
    negative membership test (a hit is confirmed against the real sets)."""
    key = id(progress)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0]() is progress:
        return hit[1], hit[2]
    ck = frozenset(hash(s) for s in progress.checkpointed)
    run = frozenset(hash(s) for s in progress.running)
    _VIEWS[key] = (weakref.ref(progress, lambda _r: _VIEWS.pop(key, None)), ck, run)
    return ck, run


def _remaining(cp: _Compiled, progress: Progress, credit: bool) -> list[int]:
    """rem[i] = tasks left of needed stage i, or _AVAILABLE (module docstring).

    ``credit``: the plan is the current plan, so every running stage of it is credited;
    otherwise only running stages of the same signature *and* form (same tasks)."""
    ckpt = progress.checkpointed
    running: Mapping[StageSignature, RunningStage] = progress.running
    ck_h, run_h = _progress_view(progress)
    hashes = cp.sig_hash
    rem = [_AVAILABLE] * cp.n
    seen = [False] * cp.n
    stack = [cp.root]
    while stack:
        i = stack.pop()
        if seen[i]:
            continue
        seen[i] = True
        h = hashes[i]
        if h in ck_h and cp.sigs[i] in ckpt:
            continue
        r = cp.tasks[i]
        if h in run_h:
            rs = running.get(cp.sigs[i])
            if rs is not None and (credit or (rs.form and rs.form == cp.forms[i])):
                r = max(0, r - max(0, int(rs.tasks_done)))
                if r == 0:
                    continue  # every task finished: done, inputs not needed
        rem[i] = r
        stack.extend(cp.inputs[i])
    return rem


def _flight(
    cp: _Compiled, progress: Progress, credit: bool, rem: list[int]
) -> dict[int, list[float]]:
    """Elapsed seconds of the tasks in flight of each credited running stage still needed."""
    out: dict[int, list[float]] = {}
    for sig, rs in progress.running.items():
        if not rs.in_flight:
            continue
        i = cp.sig_index.get(sig)
        if i is None or rem[i] <= 0 or not (credit or (rs.form and rs.form == cp.forms[i])):
            continue
        out[i] = sorted(rs.in_flight, reverse=True)[: rem[i]]  # most progress first
    return out


def remaining_tasks(
    plan: Plan, progress: Progress, *, current_plan_id: str | None = None
) -> dict[str, int]:
    """Tasks left per needed stage of ``plan`` (stages absent are checkpointed, credited or
    below a checkpoint). ``current_plan_id`` defaults to ``progress.current_plan``."""
    cur = progress.current_plan if current_plan_id is None else current_plan_id
    cp = _compiled(plan)
    rem = _remaining(cp, progress, plan.plan_id == cur)
    return {cp.ids[i]: r for i, r in enumerate(rem) if r != _AVAILABLE}


# --------------------------------------------------------------------------------------------
# The simulation.


class _Result:
    __slots__ = ("completed", "cut", "done", "finish", "first_start", "runs", "t")

    completed: list[int]
    cut: bool
    done: list[bool]
    finish: float
    first_start: list[float | None]
    runs: list[list[_Run] | None]
    t: float


class _Run:
    """A run: ``k`` slots of one stage, holding them from wave to wave (module docstring).

    ``nb`` is its next wave boundary after the time the stage was last planned; from there it
    launches ``f`` more full waves of ``k`` tasks and then, if ``l`` > 0, one wave of ``l``.
    ``segs`` holds the launches already made: (start, tasks, waves) with waves ``dur`` apart.
    """

    __slots__ = ("f", "k", "l", "nb", "segs")

    def __init__(self, k: int, nb: float, t: float) -> None:
        self.k = k
        self.nb = nb
        self.f = 0
        self.l = 0
        self.segs: list[tuple[float, int, int]] = [(t, k, 1)]

    def launches(self, d: float) -> list[tuple[float, int, int]]:
        """Every launch, made or planned."""
        out = list(self.segs)
        if self.f:
            out.append((self.nb, self.k, self.f))
        if self.l:
            out.append((self.nb + self.f * d, self.l, 1))
        return out


def _simulate(
    cp: _Compiled,
    rem: list[int],
    share: Share,
    horizon: float | None,
    cutoff: float = math.inf,
    flight: dict[int, list[float]] | None = None,
) -> _Result:
    """Tetris packing of the needed tasks (``rem``) in one bin of capacity ``share``; tasks in
    flight (``flight``: elapsed seconds per stage) keep their slots first, as far as they fit."""
    n = cp.n
    res = _Result()
    res.completed = [0] * n
    res.done = done = [False] * n
    res.first_start = [None] * n
    runs: list[list[_Run] | None] = [None] * n
    res.runs = runs
    res.finish = math.inf
    res.t = 0.0
    res.cut = False
    root = cp.root
    if rem[root] == _AVAILABLE:
        res.finish = 0.0
        return res

    cap_c = float(share.vcores)
    cap_m = float(share.memory_mb)
    dur = cp.dur
    nc = [0.0] * n
    nm = [0.0] * n
    for i in range(n):
        if rem[i] <= 0:
            continue
        dc, dm = cp.dem_c[i], cp.dem_m[i]
        if dc > cap_c * (1 + _EPS) or dm > cap_m * (1 + _EPS):
            return res  # can never fit: inf
        nc[i] = dc / cap_c if dc > 0 else 0.0
        nm[i] = dm / cap_m if dm > 0 else 0.0
    rank = cp.rank
    consumers = cp.consumers
    # with a cutoff: a bound on what the stages not started yet still need after any time t
    # (their work over the bin, and each one's shortest run plus the shortest path above it)
    bounding = cutoff < math.inf
    unstarted_c = unstarted_m = 0.0
    min_len = [0.0] * n
    tail = [0.0] * n
    unstarted_path = 0.0
    if bounding:
        for i in range(n):
            if rem[i] > 0:
                big = nc[i] if nc[i] > nm[i] else nm[i]
                k = int((1 + _EPS) / big) if big > 0 else rem[i]
                min_len[i] = -(-rem[i] // k) * dur[i]
                unstarted_c += rem[i] * dur[i] * nc[i]
                unstarted_m += rem[i] * dur[i] * nm[i]
        for i in range(n - 1, -1, -1):  # consumers come later in topological order
            for c in consumers[i]:
                if rem[c] != _AVAILABLE and min_len[c] + tail[c] > tail[i]:
                    tail[i] = min_len[c] + tail[c]
        unstarted_path = max(
            (min_len[i] + tail[i] for i in range(n) if min_len[i] > 0), default=0.0
        )
    pool = rem  # tasks not launched yet (as of the stage's last planning)
    pending = [0] * n
    for i in range(n):
        if rem[i] != _AVAILABLE:
            pending[i] = sum(1 for j in cp.inputs[i] if rem[j] != _AVAILABLE)
    held = [0] * n  # slots held by the stage's runs
    exhaust = [math.inf] * n  # time of the stage's last launch (as planned)
    version = [0] * n
    settled = [-1.0] * n
    ready: list[int] = []
    root_done = False
    events: list[tuple[float, int, int, int]] = []  # (time, seq, stage, version): next release
    releases: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    seq = 0
    total_held = 0

    def complete(i: int) -> None:
        nonlocal root_done
        stack = [i]
        while stack:
            k = stack.pop()
            done[k] = True
            if k == root:
                root_done = True
            for c in consumers[k]:
                if rem[c] == _AVAILABLE:
                    continue
                pending[c] -= 1
                if pending[c] == 0:
                    if pool[c] > 0:
                        ready.append(c)
                    else:
                        stack.append(c)

    def settle(s: int, t: float) -> None:
        # count the launches of stage s's runs at boundaries <= t
        d = dur[s]
        launched = 0
        runs_s = runs[s]
        assert runs_s is not None  # settled only once the stage has a run
        for r in runs_s:
            if r.nb > t + _EPS:
                continue
            cnt = int((t - r.nb) / d + _EPS) + 1
            full = min(cnt, r.f)
            if full:
                r.segs.append((r.nb, r.k, full))
                launched += full * r.k
            if cnt > r.f and r.l:
                r.segs.append((r.nb + r.f * d, r.l, 1))
                launched += r.l
            r.nb += cnt * d
        pool[s] -= launched

    def plan(s: int, t: float) -> None:
        # share the stage's unlaunched tasks among its runs, boundary by boundary
        nonlocal seq
        d = dur[s]
        rs: list[_Run] = []
        runs_s = runs[s]
        assert runs_s is not None  # planned only once the stage has a run
        for r in sorted(runs_s, key=lambda r: r.nb):
            if rs and r.nb - rs[-1].nb <= _EPS:  # same phase from now on: one run
                rs[-1].k += r.k
                rs[-1].segs.extend(r.segs)
            else:
                rs.append(r)
        runs[s] = rs
        c, left = divmod(pool[s], sum(r.k for r in rs))
        version[s] += 1
        ex = t
        rel: list[tuple[float, int]] = []  # (time, slots freed)
        for r in rs:
            k = r.k
            if left > 0:
                part = min(k, left)
                left -= part
                f, part = (c + 1, 0) if part == k else (c, part)
            else:
                f, part = c, 0
            r.f, r.l = f, part
            nb = r.nb
            if part:
                last = nb + f * d
                rel.append((last, k - part))
                rel.append((last + d, part))
            else:
                last = nb + (f - 1) * d if f else t
                rel.append((nb + f * d, k))
            if last > ex:
                ex = last
        rel.sort(reverse=True)  # popped from the end, earliest first
        releases[s] = rel
        heapq.heappush(events, (rel[-1][0], seq, s, version[s]))
        seq += 1
        exhaust[s] = ex if pool[s] > 0 else t

    for i in range(n):
        if rem[i] != _AVAILABLE and pending[i] == 0:
            if rem[i] > 0:
                ready.append(i)
            else:
                complete(i)
    if root_done:
        res.finish = 0.0
        return res

    t = 0.0
    free_c = 1.0
    free_m = 1.0
    # tasks in flight keep their slots (most progress first) while they fit; the rest fail
    # and start again from the pool (a share decrease revokes their containers)
    for i, elapsed in sorted((flight or {}).items()):
        if pending[i] != 0 or pool[i] <= 0:
            continue
        d = dur[i]
        groups: dict[float, int] = {}
        placed = 0
        for e in elapsed:
            if placed >= pool[i]:
                break
            if nc[i] > free_c + _EPS or nm[i] > free_m + _EPS:
                break
            left = min(d, max(0.0, d - e))
            if left <= _EPS:
                left = _EPS  # finishing now
            groups[left] = groups.get(left, 0) + 1
            placed += 1
            free_c -= nc[i]
            free_m -= nm[i]
        if not placed:
            continue
        pool[i] -= placed
        held[i] += placed
        total_held += placed
        runs[i] = [_Run(k, left, left - d) for left, k in sorted(groups.items())]
        if bounding:  # pool aliases rem: the stage's whole remaining work has started
            unstarted_c -= (pool[i] + placed) * d * nc[i]
            unstarted_m -= (pool[i] + placed) * d * nm[i]
            min_len[i] = 0.0
            unstarted_path = max(
                (min_len[j] + tail[j] for j in range(n) if min_len[j] > 0), default=0.0
            )
        plan(i, 0.0)
        if pool[i] == 0 and i in ready:
            ready.remove(i)
    while True:
        if horizon is not None and t >= horizon - _EPS:
            res.t = horizon  # launches at the horizon itself belong to the next share
            break
        # ---- pack the free capacity at time t (Tetris, in runs of identical tasks) --------
        touched: list[int] = []
        while ready:
            best = -1
            best_score = -1.0
            for i in ready:
                ci, mi = nc[i], nm[i]
                if ci > free_c + _EPS or mi > free_m + _EPS or exhaust[i] <= t + _EPS:
                    continue
                sc = ci * free_c + mi * free_m
                if (
                    best < 0
                    or sc > best_score + _TIE
                    or (
                        sc >= best_score - _TIE
                        and (dur[i] > dur[best] or (dur[i] == dur[best] and rank[i] < rank[best]))
                    )
                ):
                    best, best_score = i, sc
            if best < 0:
                break
            s = best
            if runs[s] is not None and settled[s] != t:
                settle(s, t)
                settled[s] = t
            cs, ms = nc[s], nm[s]
            k = pool[s]
            if cs > 0:
                k = min(k, int((free_c + _EPS) / cs))
            if ms > 0:
                k = min(k, int((free_m + _EPS) / ms))
            if k > 1:
                ss = cs * cs + ms * ms
                for x in ready:
                    if x == s:
                        continue
                    cx, mx = nc[x], nm[x]
                    if cx > free_c + _EPS or mx > free_m + _EPS or exhaust[x] <= t + _EPS:
                        continue
                    b = ss - (cx * cs + mx * ms)
                    if b <= _TIE:
                        continue  # s stays ahead of x however many it places
                    a = best_score - (cx * free_c + mx * free_m)
                    if dur[s] > dur[x] or (dur[s] == dur[x] and rank[s] < rank[x]):
                        j = math.floor((a + _TIE) / b)
                    else:
                        j = math.ceil((a - _TIE) / b) - 1
                    # s keeps winning for placements 0..j; x may take placement j+1 only if it
                    # still fits after j+1 tasks of s
                    if j + 1 < k and (
                        cx + (j + 1) * cs <= free_c + _EPS and mx + (j + 1) * ms <= free_m + _EPS
                    ):
                        k = max(1, j + 1)
            pool[s] -= k
            held[s] += k
            total_held += k
            free_c -= k * cs
            free_m -= k * ms
            rs = runs[s]
            if rs is None:
                runs[s] = [_Run(k, t + dur[s], t)]
                if bounding:
                    unstarted_c -= (pool[s] + k) * dur[s] * cs
                    unstarted_m -= (pool[s] + k) * dur[s] * ms
                    was = min_len[s] + tail[s]
                    min_len[s] = 0.0  # marks the stage started
                    if was >= unstarted_path:
                        unstarted_path = max(
                            (min_len[i] + tail[i] for i in range(n) if min_len[i] > 0),
                            default=0.0,
                        )
            elif rs[-1].segs[0][0] == t and len(rs[-1].segs) == 1:
                r = rs[-1]
                r.k += k
                r.segs[0] = (t, r.k, 1)
            else:
                rs.append(_Run(k, t + dur[s], t))
            if s not in touched:
                touched.append(s)
            if pool[s] == 0:
                ready.remove(s)
        for s in touched:
            plan(s, t)
        ready = [i for i in ready if exhaust[i] > t + _EPS]

        # ---- advance to the next release of slots -----------------------------------------
        while events and events[0][3] != version[events[0][2]]:
            heapq.heappop(events)
        if not events:
            raise RuntimeError("packing simulation stalled (no task running, root not done)")
        t_next = events[0][0]
        if horizon is not None and t_next > horizon + _EPS:
            res.t = horizon
            break
        if t_next > cutoff or (
            bounding
            and t_next + max(unstarted_c, unstarted_m, unstarted_path) > cutoff * (1 + _EPS)
        ):
            res.cut = True  # finishes after the cutoff: the caller needs no more
            return res
        t = t_next
        while events and events[0][0] <= t + _EPS:
            _, _, s, v = heapq.heappop(events)
            if v != version[s]:
                continue
            rel = releases[s]
            slots = 0
            while rel and rel[-1][0] <= t + _EPS:
                slots += rel.pop()[1]
            if rel:
                heapq.heappush(events, (rel[-1][0], seq, s, v))
                seq += 1
            held[s] -= slots
            total_held -= slots
            free_c += slots * nc[s]
            free_m += slots * nm[s]
            if held[s] == 0:
                pool[s] = 0
                complete(s)
        if total_held == 0:
            free_c = free_m = 1.0  # no drift when the bin is empty
        if root_done:
            res.finish = t
            res.t = t
            break

    if horizon is None:
        return res  # progress counts are for advance()
    end = res.t
    for s in range(n):
        runs_s = runs[s]
        if runs_s is None:
            continue
        d = dur[s]
        res.first_start[s] = runs_s[0].segs[0][0]
        total = 0
        for r in runs_s:
            for st, k, w in r.launches(d):
                if st + d <= end + _EPS:
                    total += k * min(w, int((end - st - d) / d + _EPS) + 1)
        res.completed[s] = total
    return res


def _in_flight_at(cp: _Compiled, res: _Result) -> dict[int, list[float]]:
    """Elapsed seconds of every task in flight at ``res.t`` (started before, ending after)."""
    end = res.t
    out: dict[int, list[float]] = {}
    for s, runs_s in enumerate(res.runs):
        d = cp.dur[s]
        if not runs_s or d <= 0:
            continue
        for r in runs_s:
            for st, k, w in r.launches(d):
                if st > end - _EPS:
                    continue
                j = int((end - st) / d + _EPS)
                if j >= w:
                    continue
                start = st + j * d
                if start < end - _EPS and start + d > end + _EPS:
                    out.setdefault(s, []).extend([end - start] * k)
    return out


def _waves(cp: _Compiled, res: _Result) -> tuple[Wave, ...]:
    out: list[Wave] = []
    for s, rs in enumerate(res.runs):
        d = cp.dur[s]
        for r in rs or ():
            out.extend(
                Wave(cp.ids[s], st, st + d, k, w, d if w > 1 else 0.0) for st, k, w in r.launches(d)
            )
    out.sort(key=lambda w: (w.start_s, w.stage_id))
    return tuple(out)


def estimate(
    plan: Plan,
    progress: Progress,
    share: Share,
    *,
    current_plan_id: str | None = None,
    schedule: bool = False,
) -> Estimate:
    """Estimated seconds from now until ``plan`` finishes under ``share`` (module docstring).

    ``current_plan_id`` (default ``progress.current_plan``) decides whether running stages get
    task-level credit. ``schedule=True`` also returns the simulated waves.

    >>> from qoop_planner.model import *
    >>> sig = StageSignature(frozenset({Relation("a", "t")}))
    >>> scan = Stage("s", "scan", (), sig, (), "", StageCost(4, 10.0, Resources(1, 1)))
    >>> plan = Plan("p", "q", (scan,), "s", 40.0)
    >>> estimate(plan, Progress(), Resources(2, 8)).finish_s
    20.0
    """
    cur = progress.current_plan if current_plan_id is None else current_plan_id
    cp = _compiled(plan)
    credit = plan.plan_id == cur
    rem = _remaining(cp, progress, credit)
    res = _simulate(cp, rem, share, None, flight=_flight(cp, progress, credit, rem))
    return Estimate(plan.plan_id, res.finish, _waves(cp, res) if schedule else None)


def _finish_within(
    plan: Plan, progress: Progress, share: Share, current: bool, cutoff: float
) -> float | None:
    """The estimate, or None when it is certainly > ``cutoff`` (the simulation stops there)."""
    cp = _compiled(plan)
    rem = _remaining(cp, progress, current)
    res = _simulate(cp, rem, share, None, cutoff, _flight(cp, progress, current, rem))
    return None if res.cut else res.finish


def lower_bound(
    plan: Plan, progress: Progress, share: Share, *, current_plan_id: str | None = None
) -> float:
    """A cheap bound ``<= estimate(...).finish_s``: the larger of the remaining work over the
    share (per dimension, task-seconds of normalised demand) and the critical path, each
    stage taking ``ceil(tasks / k) * task_s`` where ``k`` tasks fit into the share at once.
    ``math.inf`` when some needed task can never fit. Used to skip plans in a decision.
    """
    cur = progress.current_plan if current_plan_id is None else current_plan_id
    cp = _compiled(plan)
    credit = plan.plan_id == cur
    rem = _remaining(cp, progress, credit)
    return _lower_bound(cp, rem, share, _flight(cp, progress, credit, rem))


def _lower_bound(
    cp: _Compiled, rem: list[int], share: Share, flight: dict[int, list[float]] | None = None
) -> float:
    cap_c = float(share.vcores)
    cap_m = float(share.memory_mb)
    work_c = work_m = 0.0
    path = [0.0] * cp.n
    dur = cp.dur
    for i in range(cp.n):  # topological order
        r = rem[i]
        if r == _AVAILABLE:
            continue
        longest = 0.0
        for j in cp.inputs[i]:
            if path[j] > longest:
                longest = path[j]
        if r > 0:
            dc, dm = cp.dem_c[i], cp.dem_m[i]
            if dc > cap_c * (1 + _EPS) or dm > cap_m * (1 + _EPS):
                return math.inf
            d = dur[i]
            nc = dc / cap_c if dc > 0 else 0.0
            nm = dm / cap_m if dm > 0 else 0.0
            head = 0.0  # seconds the tasks in flight are ahead (elapsed, at most d each)
            ahead = 0.0
            if flight and i in flight:
                done_s = [min(d, e) for e in flight[i]]
                head = sum(done_s)
                ahead = max(done_s, default=0.0)
            work_c += (r * d - head) * nc
            work_m += (r * d - head) * nm
            big = nc if nc > nm else nm
            k = int((1 + _EPS) / big) if big > 0 else r
            longest += max(0.0, -(-r // k) * d - ahead)
        path[i] = longest
    return max(work_c, work_m, path[cp.root])


def advance(
    plan: Plan, progress: Progress, share: Share, seconds: float, *, keep_in_flight: bool = False
) -> Progress:
    """Run ``plan`` (as the current plan) for ``seconds`` under ``share``; the new progress.

    Stages finished by then (tasks ending exactly at the horizon included) are added to
    ``checkpointed``, and so are stages credited as finished; stages with a task started are
    ``running``: tasks finished so far, and seconds since their first task started (plus the
    time already reported for a stage that was running before), with the stage's form. Running
    stages of another plan carry over when ``plan`` has them in the same form. Nothing is
    launched at the horizon itself (the share changes then). Tasks still in flight are not
    counted as done; with ``keep_in_flight`` their elapsed seconds are reported
    (``RunningStage.in_flight``) and the next estimate or advance lets them finish where they
    fit into the share (a smaller share fails those that do not, least progress first);
    without it they start again from scratch. Other ``progress.running`` entries are dropped.
    Used to replay share profiles.
    """
    if seconds < 0:
        raise ValueError(f"seconds must be >= 0, got {seconds}")
    cp = _compiled(plan)
    credit = progress.current_plan == plan.plan_id
    rem = _remaining(cp, progress, credit)
    rem0 = list(rem)
    res = _simulate(cp, rem, share, seconds, flight=_flight(cp, progress, credit, rem))
    flying = _in_flight_at(cp, res) if keep_in_flight else {}
    ckpt = set(progress.checkpointed)
    running: dict[StageSignature, RunningStage] = {}
    old = {
        sig: rs
        for sig, rs in progress.running.items()
        if credit or (rs.form and rs.form in cp.forms)
    }
    for i in range(cp.n):
        sig = cp.sigs[i]
        before = old.get(sig)
        if before is not None and not credit and before.form != cp.forms[i]:
            before = None
        if rem0[i] == _AVAILABLE:
            if before is not None and before.tasks_done >= cp.tasks[i]:
                ckpt.add(sig)  # every task finished: the stage is done
            continue
        if res.done[i]:
            ckpt.add(sig)
            continue
        first_start = res.first_start[i]
        form = cp.forms[i]
        fl = tuple(flying.get(i, ()))
        if before is not None:
            done = cp.tasks[i] - rem0[i] + res.completed[i]
            running[sig] = RunningStage(done, before.elapsed_s + res.t, form, fl)
        elif first_start is not None:
            running[sig] = RunningStage(res.completed[i], res.t - first_start, form, fl)
    return Progress(plan.plan_id, frozenset(ckpt), running)
