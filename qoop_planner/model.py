"""The planner's data model: plans as DAGs of stages with provenance (QOOP §2.2, spec A.4).

Every value is an immutable dataclass; the planner's functions take and return these and do no
I/O. One query has several cached :class:`Plan` s; a plan is a DAG of :class:`Stage` s in
topological order (inputs before the stages that read them), ending in its ``root`` stage.

Provenance (spec A.4.1-A.4.2). Each stage carries the logical operators it computes
(``operators``) and a canonical :class:`StageSignature`: the set of base relations it covers
(each with its pushed-down filters, normalised) and the set of normalised join predicates
applied inside it, plus, for the final stage, a digest of what sits on top of the join tree
(aggregates, ORDER BY, LIMIT, ...). Two stages with equal signatures are the same relational
result whatever the plan or join order, so a checkpoint of one serves the other
(progress propagation). Relations are named by their alias in the query, so self-joins stay
distinct; signatures are compared within one query.

Stage kinds: ``scan`` (one base relation with its filters), ``join`` (two input stages joined
on their predicates), ``final`` (the top of the query over the root of the join tree).

Physical form (QOOP §2.2: plans differ in "structure and task-level resource requirements").
A join stage may carry a ``method`` (``"shuffle_hash"``, ``"merge"`` or ``"broadcast"``, see
:mod:`qoop_planner.physical`) and a number of ``partitions`` (0: the engine's default); the
executor pins them on the engine. They change how the stage runs, not its result, so the
signature (and the checkpoint) is the same whatever the form. :attr:`Stage.form` names the
partitioning: two running stages of equal signature and form have the same tasks, so one's
finished tasks count for the other (:mod:`qoop_planner.packing`).

``Stage.sql`` is Hive SQL that computes the stage from base tables and its input stages, where
each input appears as the placeholder identifier ``{{<input stage_id>}}`` (the executor
substitutes the checkpoint table holding that input). ``Plan.to_sql()`` inlines every stage and
gives one Hive query equivalent to the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "Plan",
    "Progress",
    "Relation",
    "Resources",
    "RunningStage",
    "Share",
    "Stage",
    "StageCost",
    "StageSignature",
]


@dataclass(frozen=True, order=True)
class Relation:
    """A base relation occurrence: its alias in the query, the table, its local filters."""

    alias: str
    table: str
    filters: tuple[str, ...] = ()  # normalised predicate SQL, sorted


@dataclass(frozen=True)
class StageSignature:
    """Canonical identity of a stage's result (module docstring)."""

    relations: frozenset[Relation]
    predicates: frozenset[str] = frozenset()  # normalised join predicates, e.g. "a.x = b.y"
    top: str = ""  # digest of the final stage's operators on top of the join tree ("" if none)

    @property
    def digest(self) -> str:
        """A short stable hex id (used to name checkpoint tables)."""
        text = "|".join(
            [
                ";".join(
                    f"{r.alias}:{r.table}:{'&'.join(r.filters)}" for r in sorted(self.relations)
                ),
                ";".join(sorted(self.predicates)),
                self.top,
            ]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Resources:
    """Per-task peak demand, or a share: vcores and memory."""

    vcores: float
    memory_mb: float

    def __post_init__(self) -> None:
        for name in ("vcores", "memory_mb"):
            v = getattr(self, name)
            if not (v >= 0) or v == float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {v}")


Share = Resources  # the query's fair share of the cluster, from the arbiter's share stream


@dataclass(frozen=True)
class StageCost:
    """Estimated execution of one stage: ``tasks`` tasks of ``task_s`` seconds each."""

    tasks: int
    task_s: float
    demand: Resources
    rows_out: float = 0.0
    bytes_out: float = 0.0

    @property
    def work(self) -> float:
        """Task-seconds."""
        return self.tasks * self.task_s


@dataclass(frozen=True)
class Stage:
    stage_id: str
    kind: str  # "scan" | "join" | "final"
    inputs: tuple[str, ...]
    signature: StageSignature
    operators: tuple[str, ...]
    sql: str
    cost: StageCost
    method: str = ""  # join method ("" for scans, final stages, and joins left to the engine)
    partitions: int = 0  # shuffle partitions of a join stage (0: the engine's default)

    @property
    def form(self) -> str:
        """The stage's partitioning: equal signatures and forms mean the same tasks."""
        return f"{self.kind}:{self.method}:{self.cost.tasks}"


@dataclass(frozen=True)
class Plan:
    plan_id: str
    query_id: str
    stages: tuple[Stage, ...]  # topological order
    root: str
    total_cost: float  # the enumerator's cost (task-seconds), used to rank plans
    physical: str = ""  # name of the physical profile the plan was built with ("" if none)
    _by_id: Mapping[str, Stage] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {s.stage_id: s for s in self.stages}
        if len(by_id) != len(self.stages):
            raise ValueError(f"plan {self.plan_id}: duplicate stage ids")
        seen: set[str] = set()
        for s in self.stages:
            missing = [i for i in s.inputs if i not in seen]
            if missing:
                raise ValueError(
                    f"plan {self.plan_id}: stage {s.stage_id} reads {missing} "
                    "before they are computed (stages must be topological)"
                )
            seen.add(s.stage_id)
        if self.root not in by_id:
            raise ValueError(f"plan {self.plan_id}: root {self.root!r} is not a stage")
        object.__setattr__(self, "_by_id", MappingProxyType(by_id))

    def stage(self, stage_id: str) -> Stage:
        return self._by_id[stage_id]

    @property
    def signatures(self) -> frozenset[StageSignature]:
        return frozenset(s.signature for s in self.stages)

    def to_sql(self) -> str:
        """One Hive query equivalent to the plan (every stage inlined as a subquery)."""

        def inline(stage_id: str) -> str:
            stage = self._by_id[stage_id]
            sql = stage.sql
            for i in stage.inputs:
                sql = sql.replace("{{" + i + "}}", f"({inline(i)})")
            return sql

        return inline(self.root)


@dataclass(frozen=True)
class RunningStage:
    """A running stage: tasks finished so far, time spent, its :attr:`Stage.form` ("" if
    unknown; then only the plan it runs in gets credit for its tasks), and the seconds each
    task in flight has run (empty: tasks in flight are not reported and start again)."""

    tasks_done: int
    elapsed_s: float
    form: str = ""
    in_flight: tuple[float, ...] = ()


@dataclass(frozen=True)
class Progress:
    """What the execution engine reports to the planner on a share change (spec A.1 step 2)."""

    current_plan: str | None = None
    checkpointed: frozenset[StageSignature] = frozenset()  # finished stages of every plan run
    running: Mapping[StageSignature, RunningStage] = field(default_factory=dict)
