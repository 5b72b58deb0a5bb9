"""Greedy re-planning with hysteresis, checkpoint reuse and backtracking (QOOP §2.4.4, spec A.4.4).

:func:`decide` is called on every share change with all cached plans of one query, the engine's
:class:`~qoop_planner.model.Progress` and the new :class:`~qoop_planner.model.Share`. It
estimates every plan by simulated Tetris packing (:mod:`qoop_planner.packing`; the current plan
with task-level credit for its running stages, the others with whole checkpointed stages only),
picks the earliest, and switches only if the relative improvement over the current plan
``(T_cur - T_best) / T_cur`` exceeds the hysteresis ``h`` (default 0.15, spec A.4.4). A current
plan that can no longer finish under the share (``T_cur = inf``) loses to any finite plan.
:func:`rewrite` turns the chosen plan into what is left to run: its checkpointed frontier
stages become input stages (kind ``"checkpoint"``, no cost) and everything below them goes.

Checkpoints of *every* plan run so far are usable (``progress.checkpointed`` holds their
signatures), so switching back to an earlier plan resumes from its old checkpoints
(backtracking, spec A.5).

Choices where the seed is silent:

* **Ties.** Equal estimates go to the current plan, then the lower ``total_cost``, then the
  smaller plan id. With no current plan (the query has not started) the earliest plan is chosen
  and ``switch`` is True (start it); hysteresis does not apply.
* **Skipping plans (latency).** A plan whose :func:`~qoop_planner.packing.lower_bound` shows it
  can neither beat the best plan found so far nor improve on the current plan by more than
  ``h`` cannot change the decision, so its simulation is skipped (plans are tried in order of
  their bounds, and a simulation stops once its clock plus a bound on the work of its stages not
  yet started passes the limit). ``ReplanDecision.estimates`` is still exact for every plan: a
  skipped plan is simulated when its entry is first read. ``prune=False`` simulates every plan up
  front. On 64 plans of 8 relations this keeps a decision at a few milliseconds (vs tens without).
* **reuse** = the chosen plan's *frontier* checkpoints: checkpointed stages that some stage
  still to run reads (found by walking from the root and stopping at checkpoints). A
  checkpointed stage whose consumers are all checkpointed, or lie below a checkpoint, is not
  reused. If the root itself is checkpointed, reuse is the root.
* **keep_running / cancel.** Running stages (``progress.running``, stages of the current plan)
  whose signature is a stage still to run in the chosen plan keep running; every other running
  stage of the current plan is cancelled, including one the chosen plan contains only below a
  checkpoint. Both are stage ids: ``keep_running`` of the chosen plan, ``cancel`` of the
  current plan.
* **backtrack_depth** (spec A.7, T:704: "max distance from a vertex of the switched-to QEP to
  any running or completed vertex of the current QEP"). Reading: the switched-to plan resumes
  from R, the signatures of its frontier checkpoints and kept running stages, plus those of its
  stages below the frontier (done work it does not need again). A running or completed stage u
  of the current plan whose progress the switch discards (neither u nor any stage downstream of
  u in the current plan is in R) lies at distance ``d(u) = 1 + max d(input)`` over its inputs
  in the current plan, with ``d = 0`` for a stage in R and for base tables. The depth is the
  largest such ``d(u)``: 0 when the switch keeps all progress, 1 when it drops a level of
  running or completed stages whose inputs it reuses (e.g. (A⋈B)⋈(C⋈D) with both joins running
  -> (A⋈C)⋈(B⋈D)), 2 when it also redoes the level below (((A⋈B)⋈C)⋈D with A⋈B done and
  (A⋈B)⋈C running -> (A⋈C)⋈(B⋈D)). It is 0 when there is no switch or no current plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from qoop_planner.model import Plan, Progress, Resources, Share, Stage, StageCost, StageSignature
from qoop_planner.packing import (
    _compiled,
    _finish_within,
    _flight,
    _lower_bound,
    _remaining,
    _simulate,
)

__all__ = ["CHECKPOINT_PREFIX", "ReplanDecision", "checkpoint_table", "decide", "rewrite"]

CHECKPOINT_PREFIX = "qoop_ckpt_"


def checkpoint_table(signature: StageSignature) -> str:
    """Name of the table holding a checkpointed stage's output."""
    return CHECKPOINT_PREFIX + signature.digest


class _Estimates(Mapping[str, float]):
    """plan id -> estimated finish (s from now); skipped plans are simulated on first read."""

    def __init__(
        self, known: dict[str, float], plans: Mapping[str, Plan], progress: Progress, share: Share
    ) -> None:
        self._known = known
        self._plans = plans
        self._progress = progress
        self._share = share

    def __getitem__(self, plan_id: str) -> float:
        v = self._known.get(plan_id)
        if v is None:
            plan = self._plans[plan_id]  # KeyError for an unknown plan
            cur = plan_id == self._progress.current_plan
            v = _finish_within(plan, self._progress, self._share, cur, math.inf)
            assert v is not None
            self._known[plan_id] = v
        return v

    def __iter__(self) -> Iterator[str]:
        return iter(self._plans)

    def __len__(self) -> int:
        return len(self._plans)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass(frozen=True)
class ReplanDecision:
    """The outcome of one re-planning decision (module docstring).

    ``plan`` is the plan to run from now on: the new plan on a switch, else the current one.
    ``rewritten`` is :func:`rewrite` of it. ``estimates`` maps every plan id to its estimated
    finish in seconds from now (exact for all; see "Skipping plans"), ``lower_bounds`` the cheap
    bounds used to skip, ``evaluated`` the plans simulated to the end while deciding.
    """

    switch: bool
    plan: Plan
    rewritten: Plan
    current_plan_id: str | None
    estimates: Mapping[str, float]
    lower_bounds: Mapping[str, float]
    evaluated: frozenset[str]
    hysteresis: float
    reuse: frozenset[str]  # stage ids of ``plan``
    keep_running: frozenset[str]  # stage ids of ``plan``
    cancel: frozenset[str]  # stage ids of the current plan
    backtrack_depth: int

    @property
    def improvement(self) -> float:
        """``(T_cur - T_plan) / T_cur`` (1.0 if only the current plan cannot finish, 0.0 with
        no current plan or if neither can)."""
        if self.current_plan_id is None:
            return 0.0
        t_cur = self.estimates[self.current_plan_id]
        t_new = self.estimates[self.plan.plan_id]
        return _improvement(t_cur, t_new)


def _improvement(t_cur: float, t_new: float) -> float:
    if math.isinf(t_cur):
        return 1.0 if math.isfinite(t_new) else 0.0
    if t_cur <= 0:
        return 0.0
    return (t_cur - t_new) / t_cur


def _needed_and_frontier(
    plan: Plan, ckpt: frozenset[StageSignature]
) -> tuple[list[int], list[int]]:
    """Indices of the stages still to run (walk from the root, stopping at checkpoints) and of
    the checkpointed stages they read (the root alone if it is checkpointed)."""
    cp = _compiled(plan)
    if cp.sigs[cp.root] in ckpt:
        return [], [cp.root]
    needed = [False] * cp.n
    frontier = [False] * cp.n
    stack = [cp.root]
    needed[cp.root] = True
    while stack:
        i = stack.pop()
        for j in cp.inputs[i]:
            if cp.sigs[j] in ckpt:
                frontier[j] = True
            elif not needed[j]:
                needed[j] = True
                stack.append(j)
    return (
        [i for i in range(cp.n) if needed[i]],
        [i for i in range(cp.n) if frontier[i]],
    )


def rewrite(plan: Plan, progress: Progress) -> Plan:
    """What is left of ``plan``: the stages still to run, reading checkpoints where they exist.

    Frontier checkpoints become stages of kind ``"checkpoint"`` (same id and signature, no
    inputs, zero cost, ``sql`` reading :func:`checkpoint_table`), so the ``{{id}}`` placeholders
    of the stages reading them still resolve; stages below them are dropped. ``total_cost`` is
    the work of the stages still to run. If the root is checkpointed the result is that one
    checkpoint stage.
    """
    needed, frontier = _needed_and_frontier(plan, progress.checkpointed)
    keep = set(needed) | set(frontier)
    front = set(frontier)
    stages: list[Stage] = []
    for i, st in enumerate(plan.stages):
        if i not in keep:
            continue
        if i in front:
            st = Stage(
                stage_id=st.stage_id,
                kind="checkpoint",
                inputs=(),
                signature=st.signature,
                operators=st.operators,
                sql=f"SELECT * FROM {checkpoint_table(st.signature)}",
                cost=StageCost(
                    0, 0.0, Resources(0, 0), rows_out=st.cost.rows_out, bytes_out=st.cost.bytes_out
                ),
            )
        stages.append(st)
    work = sum(plan.stages[i].cost.work for i in needed)
    return Plan(plan.plan_id, plan.query_id, tuple(stages), plan.root, work, plan.physical)


def _backtrack_depth(current: Plan, kept: set[StageSignature], progress: Progress) -> int:
    cp = _compiled(current)
    ckpt = progress.checkpointed
    running = progress.running
    # subsumed[i]: i or a stage downstream of i (in the current plan) is kept by the new plan
    subsumed = [cp.sigs[i] in kept for i in range(cp.n)]
    for i in range(cp.n - 1, -1, -1):  # reverse topological order: consumers first
        if not subsumed[i]:
            subsumed[i] = any(subsumed[c] for c in cp.consumers[i])
    dist = [0] * cp.n
    depth = 0
    for i in range(cp.n):  # topological order: inputs first
        if cp.sigs[i] in kept:
            continue
        dist[i] = 1 + max((dist[j] for j in cp.inputs[i]), default=0)
        sig = cp.sigs[i]
        if (sig in ckpt or sig in running) and not subsumed[i]:
            depth = max(depth, dist[i])
    return depth


def decide(
    plans: Sequence[Plan],
    progress: Progress,
    share: Share,
    *,
    hysteresis: float = 0.15,
    current_plan_id: str | None,
    prune: bool = True,
) -> ReplanDecision:
    """One greedy re-planning decision (module docstring).

    ``current_plan_id`` is the plan running now (None before the query starts); it must be one
    of ``plans`` and agree with ``progress.current_plan`` when that is set.
    """
    if not plans:
        raise ValueError("decide needs at least one plan")
    if not hysteresis >= 0:
        raise ValueError(f"hysteresis must be >= 0, got {hysteresis}")
    by_id: dict[str, Plan] = {}
    for p in plans:
        if p.plan_id in by_id:
            raise ValueError(f"duplicate plan id {p.plan_id!r}")
        by_id[p.plan_id] = p
    if current_plan_id is not None and current_plan_id not in by_id:
        raise ValueError(f"current plan {current_plan_id!r} is not among the plans")
    if progress.current_plan is not None and progress.current_plan != current_plan_id:
        raise ValueError(
            f"progress is of plan {progress.current_plan!r}, current_plan_id is {current_plan_id!r}"
        )
    if progress.current_plan != current_plan_id:
        progress = Progress(current_plan_id, progress.checkpointed, progress.running)

    known: dict[str, float] = {}
    bounds: dict[str, float] = {}
    rems: dict[str, list[int]] = {}
    flights: dict[str, dict[int, list[float]]] = {}
    for p in plans:
        cp = _compiled(p)
        cur = p.plan_id == current_plan_id
        rem = _remaining(cp, progress, cur)
        rems[p.plan_id] = rem
        flights[p.plan_id] = _flight(cp, progress, cur, rem)
        bounds[p.plan_id] = _lower_bound(cp, rem, share, flights[p.plan_id])

    # a plan other than the current one is chosen only if it finishes before switch_below
    # (improvement > h; inf without a current plan or when the current one cannot finish)
    def simulate(pid: str, cutoff: float) -> float | None:
        res = _simulate(_compiled(by_id[pid]), list(rems[pid]), share, None, cutoff, flights[pid])
        return None if res.cut else res.finish

    t_cur = math.inf
    if current_plan_id is not None:
        t = simulate(current_plan_id, math.inf)
        assert t is not None
        t_cur = known[current_plan_id] = t
    switch_below = t_cur * (1 - hysteresis) if math.isfinite(t_cur) else math.inf

    def rank(pid: str) -> tuple[float, float, str]:
        return (known[pid], by_id[pid].total_cost, pid)

    best: str | None = None  # the best candidate other than the current plan
    others = sorted((pid for pid in by_id if pid != current_plan_id), key=lambda q: bounds[q])
    for pid in others:
        limit = switch_below if best is None else min(switch_below, known[best])
        if prune and bounds[pid] > limit:
            break  # sorted by bound: no later plan can change the decision either
        t = simulate(pid, limit if prune else math.inf)
        if t is None:
            continue  # certainly finishes after the limit
        known[pid] = t
        if t < switch_below and (best is None or rank(pid) < rank(best)):
            best = pid

    if current_plan_id is not None:
        switch = best is not None
        if best is None:
            best = current_plan_id
    else:
        switch = True  # start the query
        if best is None:  # no plan can finish under this share: the cheapest, for the record
            best = min(by_id, key=lambda q: (by_id[q].total_cost, q))
    chosen = by_id[best]

    needed, frontier = _needed_and_frontier(chosen, progress.checkpointed)
    cpn = _compiled(chosen)
    needed_sigs = {cpn.sigs[i]: cpn.ids[i] for i in needed}
    reuse = frozenset(cpn.ids[i] for i in frontier)
    keep_running: set[str] = set()
    cancel: set[str] = set()
    depth = 0
    if current_plan_id is not None:
        cur_cp = _compiled(by_id[current_plan_id])
        for i in range(cur_cp.n):
            sig = cur_cp.sigs[i]
            if sig not in progress.running:
                continue
            if sig in needed_sigs:
                keep_running.add(needed_sigs[sig])
            else:
                cancel.add(cur_cp.ids[i])
        if switch:
            # what the new plan resumes from or does not need: its frontier checkpoints, the
            # running stages it keeps and every stage of it below the frontier
            to_run = set(needed)
            kept = {cpn.sigs[i] for i in range(cpn.n) if i not in to_run}
            kept |= {cpn.sigs[i] for i in needed if cpn.sigs[i] in progress.running}
            depth = _backtrack_depth(by_id[current_plan_id], kept, progress)

    return ReplanDecision(
        switch=switch,
        plan=chosen,
        rewritten=rewrite(chosen, progress),
        current_plan_id=current_plan_id,
        estimates=_Estimates(known, by_id, progress, share),
        lower_bounds=bounds,
        evaluated=frozenset(known),
        hysteresis=hysteresis,
        reuse=reuse,
        keep_running=frozenset(keep_running),
        cancel=frozenset(cancel),
        backtrack_depth=depth,
    )
