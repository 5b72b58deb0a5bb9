"""What a run reports: its stage events, stage timings, plan switches, the query result and the
plan estimates of ``explain``.

These are the observable record of QOOP's stage-by-stage execution with checkpoints (QOOP §2.3:
each finished stage is a checkpoint a later plan can resume from) and of its plan switching
(QOOP §2.4: on a share change the query may move to another plan; :class:`PlanSwitch` says what
the move cancelled and what it resumed from). Plain frozen values, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qoop_planner.model import Plan, Share

__all__ = [
    "EVENT_KINDS",
    "PlanEstimate",
    "PlanSwitch",
    "QueryResult",
    "StageEvent",
    "StageTiming",
]

EVENT_KINDS = ("start", "done", "reused", "cancelled", "switch", "lost")


@dataclass(frozen=True)
class StageEvent:
    """Something happened to a stage (or the plan) of a running query.

    ``kind``: ``start`` (a stage's statement was submitted), ``done`` (it finished; for a
    checkpoint stage ``table`` is the checkpoint), ``reused`` (the plan reads a checkpoint made by
    an earlier run or another plan instead of computing it), ``cancelled`` (a switch cancelled
    it), ``switch`` (``plan_id`` is the new plan; ``detail`` says from which), ``lost`` (the
    connection died while it ran; it will rerun).
    """

    query_id: str
    plan_id: str
    stage_id: str
    kind: str
    rows: int | None = None
    seconds: float | None = None
    table: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class StageTiming:
    """One executed (or reused) stage of a run."""

    plan_id: str
    stage_id: str
    kind: str  # the stage's kind: scan | join | final
    outcome: str  # done | reused | cancelled | lost
    seconds: float
    rows: int | None = None
    table: str | None = None


@dataclass(frozen=True)
class PlanSwitch:
    at_s: float  # seconds since the run started
    from_plan: str
    to_plan: str
    share: Share
    cancelled: tuple[str, ...]  # stage ids cancelled by the switch
    reused: tuple[str, ...]  # checkpoints the new plan resumes from (its own included)


@dataclass(frozen=True)
class QueryResult:
    query_id: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    plan_id: str  # the plan that finished
    initial_plan_id: str
    switches: tuple[PlanSwitch, ...]
    stages: tuple[StageTiming, ...]
    reused: tuple[str, ...]  # stage ids read from checkpoints made before (earlier run/other plan)
    elapsed_s: float
    planning_s: float
    share_changes: int
    reconnects: int = 0
    passthrough: bool = False  # the planner could not decompose the SQL; it ran as one statement
    events: tuple[StageEvent, ...] = ()
    streamed: int = 0  # rows handed to ``on_rows`` as they were fetched (then ``rows`` is empty)
    plans: tuple[Plan, ...] = ()  # the cached plans the run chose from (its stages' plan ids)

    @property
    def row_count(self) -> int:
        return self.streamed or len(self.rows)


@dataclass(frozen=True)
class PlanEstimate:
    """One cached plan, as :meth:`QueryRunner.explain` reports it."""

    plan: Plan
    estimate_s: float  # estimated finish under the share (from now, checkpoints counted)
    chosen: bool
    checkpointed: tuple[str, ...]  # stage ids with a usable checkpoint
    to_run: tuple[str, ...]  # stage ids still to run, in order
    statements: Mapping[str, str]  # stage id -> the statement the executor would send
