"""Online query planning in the a×b model: Pseudocode 2, its offline optimum and Theorem 2.1.

Source: QOOP §2.4 (seed ``000_3f32c23170426fc0`` T:535-600) and its Appendix A.1 proofs
(T:1992-2022); spec ``qoop-themis.md`` section A.5. This is the analysable toy model behind the
planner's greedy replanning (spec A.4.4), not the planner itself: pure functions over frozen
dataclasses, no I/O.

Model. A QEP ``a×b`` (:class:`Qep`) is a bag of ``b`` tasks, each needing ``a`` resource units and
taking one step; its work is ``w = a·b``. Each step the scheduler gives the query ``r`` units.

- ``model="discrete"``: the QEP run in a step executes ``min(floor(r/a), b_rem)`` tasks (``a``
  units each); nothing runs if ``r < a``.
- ``model="fluid"``: the QEP run in a step progresses by ``min(r, rem_work)`` if ``r >= a``,
  else not at all.

Pseudocode 2 (:func:`prune`, :func:`choose`, :func:`run_online`): drop near-duplicate QEPs, then
every step run, among the QEPs with ``a_i <= r``, the one with the least remaining processing time
assuming ``r`` persists. The offline optimum (:func:`offline_finish`) knows the allocations and runs
``α`` back-to-back copies of the single best QEP. :func:`competitive_ratio` gives
``α* = inf{α : T_off(α) >= T_on}`` (Definition 2.1). :func:`lower_bound_adversary` plays the
Theorem 2.1 adversary against the greedy.

Decisions where the spec marks [ASSUMPTION] or leaves a gap:

1. Pruning compares ``w_i`` with the **last retained** QEP: keep ``i`` iff
   ``w_i <= ½·w_last``. The input is first sorted by ``(a, w)`` (stable), so the QEP with the
   smallest ``a`` (and, among equal ``a``, the smallest work) is always kept. A QEP with the same
   ``a`` and no less work is pruned by the same rule (``w >= w_last > ½·w_last``), so duplicate
   ``a`` values need no special case.
2. Remaining time with ``r`` persisting is ``ceil(b_rem / floor(r/a_i))`` steps (discrete) or
   ``rem_work / r`` (fluid), see :func:`remaining_time`. QEPs with ``a_i > r`` are infeasible.
3. One QEP runs per step; units it cannot use stay idle.
4. Ties go to the smallest ``a_i`` (then the smaller work, then input order).
5. ``backtracking=True``: the progress of every QEP is kept (free checkpoints), and switching back
   resumes it. ``backtracking=False``: switching to a different QEP throws away the progress of the
   one left, as in the seed's "QEP backtracking is necessary" example. A step where nothing is
   feasible is idle and is not a switch, so the progress of the current QEP survives it.
6. The greedy is "lazy" without an extra rule. With a constant allocation the running QEP's
   remaining time strictly decreases and the others' stay the same, so it stays the strict
   minimum until it completes. :func:`greedy_steps` relies on this to jump over runs of equal
   allocations, and the tests check it against repeated :func:`greedy_step`.
7. The offline optimum may pick any input QEP, pruned or not. Its ``α`` copies form one bag of
   ``α·b`` tasks, so fractional ``α`` is allowed. Per step it gets ``a·floor(r/a)`` work
   (discrete) or ``r`` (fluid) when ``r >= a``. ``T_off(α)`` is the first 1-based step ``t``
   where that cumulative work reaches ``α·w_i``, minimised over ``i``.
8. ``α* = inf{α : T_off(α) >= T_on} = max_i cum_i(T_on − 1) / w_i`` (the infimum is not
   attained). :func:`offline_copies` gives ``max_i cum_i(T_on) / w_i`` instead: the copies the
   offline optimum completes within the online completion time. Theorem 2.1's proof measures this
   ("in the same amount of time"), and the spec's recipe-2 numbers (m=3, W=4096 → 28660/16384)
   are this quantity. ``α*`` is smaller by the last step's ``a_1`` units (28658/16384). Both tend
   to ``2 − 2^-(m−1)`` as ``W`` grows. :class:`AdversaryRun` reports both.
9. Theorem 2.1's adversary: QEP ``i`` (1-based) is ``2^i × 2^(m−2i)·W``. ``W`` must be a positive
   multiple of ``2^m`` so every ``b_i`` is an integer. "Near-completion" means
   ``done_i >= w_i − a_i``. The last step gives ``a_1 = 2`` units; the seed's "one more unit of
   resource" cannot run a 2-unit task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Literal, TypeVar

__all__ = [
    "AdversaryRun",
    "Model",
    "OnlineRun",
    "OnlineState",
    "Qep",
    "advance",
    "choose",
    "competitive_ratio",
    "greedy_step",
    "greedy_steps",
    "lower_bound_adversary",
    "offline_copies",
    "offline_finish",
    "offline_finish_times",
    "prune",
    "remaining_time",
    "retained_indices",
    "run_adaptive",
    "run_online",
    "start",
    "step_work",
]

Model = Literal["discrete", "fluid"]
_MODELS = ("discrete", "fluid")
_T = TypeVar("_T")

# A run-length encoded allocation sequence: (allocation, number of consecutive steps).
_Runs = Sequence[tuple[int, int]]


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_model(model: str) -> None:
    if model not in _MODELS:
        raise ValueError(f"model must be one of {_MODELS}, got {model!r}")


@dataclass(frozen=True, order=True)
class Qep:
    """A QEP ``a×b``: ``b`` one-step tasks of ``a`` resource units each."""

    a: int
    b: int

    def __post_init__(self) -> None:
        _check_int("a", self.a, 1)
        _check_int("b", self.b, 1)

    @property
    def work(self) -> int:
        """``w = a·b``."""
        return self.a * self.b

    @classmethod
    def from_work(cls, a: int, w: int) -> Qep:
        """The QEP with task size ``a`` and total work ``w`` (``a`` must divide ``w``)."""
        if w % a:
            raise ValueError(f"work {w} is not a multiple of a={a}")
        return cls(a, w // a)

    def __str__(self) -> str:
        return f"{self.a}×{self.b}"


# ---------------------------------------------------------------------------------------------
# Pruning (Pseudocode 2, lines 1-3)


def _order(qeps: Sequence[Qep]) -> list[int]:
    return sorted(range(len(qeps)), key=lambda i: (qeps[i].a, qeps[i].work, i))


def retained_indices(qeps: Sequence[Qep]) -> tuple[int, ...]:
    """Indices (into ``qeps``) of the QEPs Pseudocode 2 keeps, in increasing ``a`` (decision 1)."""
    kept: list[int] = []
    for i in _order(qeps):
        if not kept or 2 * qeps[i].work <= qeps[kept[-1]].work:
            kept.append(i)
    return tuple(kept)


def prune(qeps: Sequence[Qep]) -> tuple[Qep, ...]:
    """The retained QEPs, in increasing ``a``: each has at most half the work of the one before."""
    return tuple(qeps[i] for i in retained_indices(qeps))


# ---------------------------------------------------------------------------------------------
# One step of progress


def step_work(qep: Qep, allocation: int, model: Model = "discrete") -> int:
    """Work one step of ``qep`` does with ``allocation`` units, ignoring how much work remains."""
    if allocation < qep.a:
        return 0
    if model == "discrete":
        return qep.a * (allocation // qep.a)
    return allocation


def remaining_time(
    qep: Qep, done: int, allocation: int, model: Model = "discrete"
) -> Fraction | None:
    """Steps ``qep`` still needs if ``allocation`` persists (decision 2); ``None`` if infeasible.

    ``done`` is the work already done on ``qep``. Discrete: ``ceil(b_rem / floor(r/a))``. Fluid:
    ``rem_work / r``.
    """
    _check_model(model)
    if allocation < qep.a:
        return None
    rem = qep.work - done
    if model == "discrete":
        return Fraction(-(-(rem // qep.a) // (allocation // qep.a)))
    return Fraction(rem, allocation)


def _choose(
    qeps: Sequence[Qep], candidates: Sequence[int], done: Sequence[int], r: int, model: str
) -> int | None:
    """Pseudocode 2 line 4. ``candidates`` must be in ``(a, w, index)`` order (tie-break)."""
    best: int | None = None
    best_t = 0
    for i in candidates:
        q = qeps[i]
        if q.a > r:
            break  # candidates are sorted by a
        rem = q.work - done[i]
        # Fluid remaining time is rem / r with r common to all candidates: compare rem.
        t = -(-(rem // q.a) // (r // q.a)) if model == "discrete" else rem
        if best is None or t < best_t:
            best, best_t = i, t
    return best


# ---------------------------------------------------------------------------------------------
# Online state and steps


@dataclass(frozen=True)
class OnlineState:
    """The online algorithm between steps. Build it with :func:`start`."""

    qeps: tuple[Qep, ...]
    candidates: tuple[int, ...]  # retained indices into qeps, in (a, w, index) order
    done: tuple[int, ...]  # work done per QEP (same order as qeps)
    model: Model = "discrete"
    backtracking: bool = True
    current: int | None = None  # the QEP that ran last (None before the first non-idle step)
    completed: int | None = None  # index of the QEP that completed the query
    steps: int = 0  # steps taken so far
    total_work: int = 0  # work executed so far, lost progress included

    @property
    def finished(self) -> bool:
        return self.completed is not None

    @property
    def wasted_work(self) -> int:
        """Executed work that is not part of the completing QEP (all of it if none completed)."""
        useful = 0 if self.completed is None else self.qeps[self.completed].work
        return self.total_work - useful


def start(
    qeps: Iterable[Qep],
    *,
    model: Model = "discrete",
    backtracking: bool = True,
    prune: bool = True,
) -> OnlineState:
    """The initial state. With ``prune=False`` every QEP is a candidate (still ``a``-ordered)."""
    _check_model(model)
    qs = tuple(qeps)
    if not qs:
        raise ValueError("need at least one QEP")
    for q in qs:
        if not isinstance(q, Qep):
            raise TypeError(f"expected Qep, got {q!r}")
    candidates = retained_indices(qs) if prune else tuple(_order(qs))
    return OnlineState(
        qeps=qs,
        candidates=candidates,
        done=(0,) * len(qs),
        model=model,
        backtracking=backtracking,
    )


def choose(state: OnlineState, allocation: int) -> int | None:
    """The QEP the greedy runs next with ``allocation`` units (``None``: nothing is feasible)."""
    _check_int("allocation", allocation, 0)
    if state.finished:
        raise ValueError("the query has already completed")
    return _choose(state.qeps, state.candidates, state.done, allocation, state.model)


def advance(state: OnlineState, allocation: int, choice: int | None, steps: int = 1) -> OnlineState:
    """Run ``choice`` (any policy's pick, ``None`` = idle) for ``steps`` steps at ``allocation``.

    Stops early if the QEP completes; ``state.steps`` counts only the steps taken. Without
    backtracking, switching to a QEP other than ``state.current`` throws away the current one's
    progress (decision 5).
    """
    _check_int("allocation", allocation, 0)
    _check_int("steps", steps, 1)
    if state.finished:
        raise ValueError("the query has already completed")
    if choice is None:
        return replace(state, steps=state.steps + steps)
    if not (0 <= choice < len(state.qeps)):
        raise ValueError(f"no QEP with index {choice}")
    q = state.qeps[choice]
    per_step = step_work(q, allocation, state.model)
    if per_step == 0:
        raise ValueError(f"QEP {q} is infeasible with {allocation} units")
    done = list(state.done)
    if not state.backtracking and state.current is not None and state.current != choice:
        done[state.current] = 0
    rem = q.work - done[choice]
    taken = min(steps, -(-rem // per_step))
    work = min(taken * per_step, rem)
    done[choice] += work
    return OnlineState(  # the constructor, not dataclasses.replace: this is the hot path
        qeps=state.qeps,
        candidates=state.candidates,
        done=tuple(done),
        model=state.model,
        backtracking=state.backtracking,
        current=choice,
        completed=choice if done[choice] == q.work else None,
        steps=state.steps + taken,
        total_work=state.total_work + work,
    )


def greedy_step(state: OnlineState, allocation: int) -> tuple[OnlineState, int | None]:
    """One step of Pseudocode 2: the new state and the QEP that ran (``None``: idle)."""
    choice = choose(state, allocation)
    return advance(state, allocation, choice), choice


def greedy_steps(
    state: OnlineState, allocation: int, max_steps: int
) -> tuple[OnlineState, int | None, int]:
    """Up to ``max_steps`` greedy steps at a constant allocation, in one jump.

    Returns the new state, the QEP that ran and the steps taken, fewer than ``max_steps`` only if
    the query completed. This is exact because the greedy is lazy (decision 6).
    """
    _check_int("max_steps", max_steps, 1)
    choice = choose(state, allocation)
    new = advance(state, allocation, choice, max_steps)
    return new, choice, new.steps - state.steps


# ---------------------------------------------------------------------------------------------
# Whole runs


@dataclass(frozen=True)
class OnlineRun:
    """The outcome of an online run."""

    qeps: tuple[Qep, ...]
    allocations: tuple[int, ...]  # the allocations consumed (up to and including finish)
    choices: tuple[int | None, ...]  # QEP index run at each step (None = idle)
    finish: int | None  # 1-based step at which the query completed; None = not within the input
    completed: int | None  # index into qeps of the completing QEP
    total_work: int
    wasted_work: int  # total_work minus the completing QEP's work (all of it if none completed)
    model: Model
    final: OnlineState

    @property
    def completed_qep(self) -> Qep | None:
        return None if self.completed is None else self.qeps[self.completed]

    @property
    def alpha_star(self) -> Fraction | float:
        """:func:`competitive_ratio` of this run (``math.inf`` if the query never completed)."""
        return competitive_ratio(self.qeps, self.allocations, self.finish, model=self.model)


def _run(
    state: OnlineState,
    next_allocation: Callable[[OnlineState, list[int | None]], int | None],
) -> OnlineRun:
    allocations: list[int] = []
    choices: list[int | None] = []
    while not state.finished:
        r = next_allocation(state, choices)
        if r is None:
            break
        state, c = greedy_step(state, r)
        allocations.append(r)
        choices.append(c)
    return OnlineRun(
        qeps=state.qeps,
        allocations=tuple(allocations),
        choices=tuple(choices),
        finish=state.steps if state.finished else None,
        completed=state.completed,
        total_work=state.total_work,
        wasted_work=state.wasted_work,
        model=state.model,
        final=state,
    )


def run_online(
    qeps: Iterable[Qep],
    allocations: Iterable[int],
    *,
    model: Model = "discrete",
    backtracking: bool = True,
    prune: bool = True,
) -> OnlineRun:
    """Run the greedy over a fixed allocation sequence, stopping when the query completes."""
    state = start(qeps, model=model, backtracking=backtracking, prune=prune)
    it = iter(allocations)
    return _run(state, lambda _s, _c: next(it, None))


def run_adaptive(
    qeps: Iterable[Qep],
    adversary: Callable[[OnlineState, tuple[int | None, ...]], int],
    horizon: int,
    *,
    model: Model = "discrete",
    backtracking: bool = True,
    prune: bool = True,
) -> OnlineRun:
    """Run the greedy against an adaptive scheduler for at most ``horizon`` steps.

    Before each step ``adversary(state, choices_so_far)`` returns the allocation. It sees the
    state (progress of every QEP) and every past choice of the algorithm.
    """
    _check_int("horizon", horizon, 0)
    state = start(qeps, model=model, backtracking=backtracking, prune=prune)
    return _run(state, lambda s, c: adversary(s, tuple(c)) if s.steps < horizon else None)


# ---------------------------------------------------------------------------------------------
# Offline optimum and competitive ratio


def _to_runs(allocations: Iterable[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for r in allocations:
        _check_int("allocation", r, 0)
        if runs and runs[-1][0] == r:
            runs[-1] = (r, runs[-1][1] + 1)
        else:
            runs.append((r, 1))
    return runs


def _first_step_reaching(qep: Qep, runs: _Runs, target: Fraction, model: Model) -> int | None:
    if target <= 0:
        return 0
    cum = 0
    t = 0
    for r, n in runs:
        p = step_work(qep, r, model)
        if p and cum + n * p >= target:
            return t + math.ceil((target - cum) / p)
        cum += n * p
        t += n
    return None


def _cum_work(qep: Qep, runs: _Runs, steps: int, model: Model) -> int:
    cum = 0
    left = steps
    for r, n in runs:
        if left <= 0:
            break
        k = min(n, left)
        cum += k * step_work(qep, r, model)
        left -= k
    return cum


def _offline_times(
    qeps: Sequence[Qep], runs: _Runs, copies: float | Fraction, model: Model
) -> tuple[int | None, ...]:
    _check_model(model)
    alpha = Fraction(copies)
    if alpha < 0:
        raise ValueError(f"copies must be >= 0, got {copies!r}")
    return tuple(_first_step_reaching(q, runs, alpha * q.work, model) for q in qeps)


def offline_finish_times(
    qeps: Sequence[Qep],
    allocations: Iterable[int],
    copies: float | Fraction = 1,
    *,
    model: Model = "discrete",
) -> tuple[int | None, ...]:
    """Per QEP: the first step by which ``copies`` back-to-back copies of it are done, or None."""
    return _offline_times(qeps, _to_runs(allocations), copies, model)


def offline_finish(
    qeps: Sequence[Qep],
    allocations: Iterable[int],
    copies: float | Fraction = 1,
    *,
    model: Model = "discrete",
) -> int | None:
    """``T_off(α)``: the offline optimum's completion step for ``α = copies`` copies, or None."""
    times = [
        t for t in offline_finish_times(qeps, allocations, copies, model=model) if t is not None
    ]
    return min(times) if times else None


def _max_copies(qeps: Sequence[Qep], runs: _Runs, steps: int, model: Model) -> Fraction:
    _check_model(model)
    return max(Fraction(_cum_work(q, runs, steps, model), q.work) for q in qeps)


def offline_copies(
    qeps: Sequence[Qep], allocations: Iterable[int], steps: int, *, model: Model = "discrete"
) -> Fraction:
    """``max_i cum_i(steps)/w_i``: copies the offline optimum completes within ``steps`` steps."""
    _check_int("steps", steps, 0)
    return _max_copies(qeps, _to_runs(allocations), steps, model)


def competitive_ratio(
    qeps: Sequence[Qep],
    allocations: Iterable[int],
    finish: int | None,
    *,
    model: Model = "discrete",
) -> Fraction | float:
    """``α* = inf{α : T_off(α) >= T_on}`` for an online completion step ``finish`` (decision 8).

    Equals ``max_i cum_i(finish − 1) / w_i``: every ``α`` above it makes the offline optimum
    finish no earlier than the online run. ``math.inf`` if the online run never completed.
    """
    if finish is None:
        return math.inf
    _check_int("finish", finish, 1)
    return _max_copies(qeps, _to_runs(allocations), finish - 1, model)


# ---------------------------------------------------------------------------------------------
# Theorem 2.1: the adaptive adversary


@dataclass(frozen=True)
class AdversaryRun:
    """The Theorem 2.1 instance played against the greedy (:func:`lower_bound_adversary`)."""

    m: int
    W: int
    qeps: tuple[Qep, ...]  # QEP i (1-based) = qeps[i-1] = 2^i × 2^(m-2i)·W
    allocation_runs: tuple[tuple[int, int], ...]  # (allocation, consecutive steps)
    choice_runs: tuple[tuple[int | None, int], ...]  # (QEP index run, consecutive steps)
    finish: int  # online completion step T_on
    online_work: int  # Σ_i (w_i − a_i) + a_1 for the greedy
    ratio: Fraction  # offline copies within T_on steps (the proof's measure, decision 8)
    alpha_star: Fraction  # inf{α : T_off(α) >= T_on}
    bound: Fraction  # 2 − 2^-(m−1)

    @property
    def order(self) -> tuple[int, ...]:
        """The QEP indices the online algorithm ran, in order, each listed once."""
        seen: list[int] = []
        for c, _ in self.choice_runs:
            if c is not None and c not in seen:
                seen.append(c)
        return tuple(seen)

    @property
    def allocations(self) -> tuple[int, ...]:
        """The full allocation sequence (long: about ``W·2^m/3`` steps)."""
        return tuple(r for r, n in self.allocation_runs for _ in range(n))


def _append_run(runs: list[tuple[_T, int]], value: _T, n: int) -> None:
    if runs and runs[-1][0] == value:
        runs[-1] = (value, runs[-1][1] + n)
    else:
        runs.append((value, n))


def lower_bound_adversary(
    m: int, W: int, *, model: Model = "discrete", stepwise: bool = False
) -> AdversaryRun:
    """Play Theorem 2.1's adversary against the greedy (decision 9).

    Phases ``j = m … 1``: give ``2^j`` units per step until some QEP ``i <= j`` reaches
    near-completion (``w_i − a_i`` done), then continue with phase ``i − 1``. After phase 1, give
    ``a_1`` units once. The adversary decides each allocation after seeing the algorithm's past
    choices and progress. With ``stepwise=True`` it calls :func:`greedy_step` once per step
    (about ``W·2^m/3`` calls). By default it calls :func:`greedy_steps`, which moves straight to
    the next step where near-completion can change. Only the running QEP progresses, so both
    give the same run.
    """
    _check_int("m", m, 1)
    _check_int("W", W, 1)
    if W % (1 << m):
        raise ValueError(f"W must be a multiple of 2^m = {1 << m}, got {W}")
    qeps = tuple(Qep(1 << i, (W << (m - i)) >> i) for i in range(1, m + 1))
    state = start(qeps, model=model)
    alloc_runs: list[tuple[int, int]] = []
    choice_runs: list[tuple[int | None, int]] = []
    j = m  # current phase; 0 = the final a_1 step

    def near(i: int) -> bool:  # 0-based QEP index
        return state.done[i] >= qeps[i].work - qeps[i].a

    while not state.finished:
        while j >= 1 and any(near(i) for i in range(j)):
            j = min(i for i in range(j) if near(i))  # 0-based i = paper's i − 1
        r = 1 << j if j >= 1 else qeps[0].a
        if stepwise:
            state, c = greedy_step(state, r)
            n = 1
        else:
            c = choose(state, r)
            if c is None:
                raise RuntimeError(f"greedy idles with {r} units")  # cannot happen: QEP j fits
            need = qeps[c].work - qeps[c].a - state.done[c]
            k = max(1, -(-need // step_work(qeps[c], r, model))) if j >= 1 else 1
            state, c2, n = greedy_steps(state, r, k)
            assert c2 == c
        _append_run(alloc_runs, r, n)
        _append_run(choice_runs, c, n)
        if j == 0 and not state.finished:
            raise RuntimeError("the final step did not complete the query")

    runs = tuple(alloc_runs)
    finish = state.steps
    return AdversaryRun(
        m=m,
        W=W,
        qeps=qeps,
        allocation_runs=runs,
        choice_runs=tuple(choice_runs),
        finish=finish,
        online_work=state.total_work,
        ratio=_max_copies(qeps, runs, finish, model),
        alpha_star=_max_copies(qeps, runs, finish - 1, model),
        bound=2 - Fraction(1, 1 << (m - 1)),
    )
