"""Stage costs calibrated to the engine from its own history of prior runs (QOOP §2.5).

QOOP's optimizer "relies on estimates of tasks' resource demands ... and their durations. Peak
resource estimates are based on prior runs for each QEP" (QOOP §2.5, Implementation, seed 000
L610). The cost model of :mod:`qoop_planner.cost` and :mod:`qoop_planner.physical` is linear in
bytes, with rates that are not this engine's; this module turns what the engine itself recorded
about a prior run into :class:`~qoop_planner.cost.StageMeasurement` records that replace the
estimate of exactly the stage (signature and physical form) that ran:

* :class:`EngineStage` is one engine stage as the engine reports it (Spark's REST API
  ``/api/v1/applications/<id>/stages``, :meth:`EngineStage.from_spark`): its tasks, the
  executor time of all its tasks, its start and end, its peak execution memory;
* a planner stage ran as one statement (a checkpoint's ``CREATE TABLE ... AS SELECT`` or the
  final ``SELECT``), i.e. one or more engine stages (:func:`statement_stages` picks them by the
  statement's text) plus time outside any engine stage (parsing, planning, the commit: the
  statement's wall time minus the union of its engine stages' intervals);
* :func:`calibrate_stage` folds them into the planner's shape, ``tasks`` tasks of ``task_s``
  seconds of one vcore each (module docstring of :mod:`qoop_planner.cost`), such that the
  estimate at a share of ``v`` vcores, ``ceil(tasks / v) x task_s``, is the measured wall time
  once the share covers the parallelism the engine achieved, and the work over the share
  (``(executor time + serial time) / (v x cores_per_vcore)``) below it;
* :func:`calibrated_history` keys the results by signature digest and form, the keys
  :meth:`History.lookup <qoop_planner.cost.History.lookup>` uses, so a stage identical across
  plans (same signature and form: the same tasks) gets the same calibrated cost in every plan
  of the cache, and so the same credit when it is running or checkpointed (QOOP §2.3.3: progress
  propagated by provenance); a final stage, the same in every plan, is keyed by its digest only;
* :func:`calibrated_config` scales the model's rates by the ratio of measured to estimated work
  over the measured stages, for the stages no prior run measured.

How the shape is derived (one statement, from its engine stages): the work is CPU, what a CPU
share limits: ``W = (S + sum cpu_i) / cores_per_vcore`` vcore-seconds, with ``cpu_i`` the
executor CPU time of engine stage ``i`` and ``S`` the statement's wall time outside every engine
stage (the driver's parsing, planning, commit; counted as CPU); the critical path is the
statement's wall time ``T``. Then ``tasks = max(1, round(W / T))`` and ``task_s = W / tasks``
(about ``T``): at a share of ``tasks`` vcores or more the estimate is the measured wall time, at
fewer the work over the share. The executor *run* time is not used: it includes waiting for a
CPU, so on a loaded machine it is not the work. Peak memory per task: the largest
``peakExecutionMemory / tasks`` over the stages, on top of ``base_memory_mb``. A prior run
should run with the engine's full share (no quota), or its wall time is the throttled one;
one stage's measurements from several runs are averaged. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from qoop_planner.cost import MB, CostConfig, History, StageMeasurement
from qoop_planner.model import Stage, StageCost

__all__ = [
    "EngineStage",
    "MeasuredStatement",
    "calibrate_stage",
    "calibrated_config",
    "calibrated_history",
    "lookup_form",
    "statement_stages",
]

_DONE = "COMPLETE"


def _spark_time(value: Any) -> float | None:
    """Seconds since the epoch of a Spark REST timestamp (``2026-11-27T18:32:08.870GMT``)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.removesuffix("GMT")
    try:
        t = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError as e:
        raise ValueError(f"not a Spark timestamp: {value!r}") from e
    return t.replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class EngineStage:
    """One engine stage of a prior run, as the engine recorded it.

    ``run_s``: executor run time summed over its tasks (seconds); ``cpu_s``: their CPU time;
    ``start``/``end``: when its first task was launched (else when it was submitted) and when it
    completed (epoch seconds); ``peak_memory_mb``: peak execution memory summed over its tasks.
    """

    stage_id: int
    attempt: int
    status: str
    description: str
    tasks: int
    run_s: float
    cpu_s: float
    start: float
    end: float
    peak_memory_mb: float = 0.0

    def __post_init__(self) -> None:
        if self.tasks < 0:
            raise ValueError(f"stage {self.stage_id}: tasks must be >= 0, got {self.tasks}")
        for name in ("run_s", "cpu_s", "peak_memory_mb"):
            v = getattr(self, name)
            if not (v >= 0) or v == math.inf:
                raise ValueError(f"stage {self.stage_id}: {name} must be finite >= 0, got {v}")
        if not self.end >= self.start:
            raise ValueError(f"stage {self.stage_id}: ends ({self.end}) before it starts")

    @classmethod
    def from_spark(cls, d: Mapping[str, Any]) -> EngineStage:
        """One element of Spark's ``/api/v1/applications/<id>/stages`` (a ``StageData``).

        >>> s = EngineStage.from_spark({"stageId": 3, "attemptId": 0, "status": "COMPLETE",
        ...     "description": "CREATE TABLE c.t AS SELECT 1", "numTasks": 4,
        ...     "executorRunTime": 1500, "executorCpuTime": 1_000_000_000,
        ...     "submissionTime": "2026-11-27T18:32:08.000GMT",
        ...     "firstTaskLaunchedTime": "2026-11-27T18:32:08.250GMT",
        ...     "completionTime": "2026-11-27T18:32:09.000GMT", "peakExecutionMemory": 2097152})
        >>> s.tasks, s.run_s, s.cpu_s, round(s.end - s.start, 3), s.peak_memory_mb
        (4, 1.5, 1.0, 0.75, 2.0)
        """
        try:
            sid = int(d["stageId"])
            status = str(d["status"])
            start = _spark_time(d.get("firstTaskLaunchedTime")) or _spark_time(
                d.get("submissionTime")
            )
            end = _spark_time(d.get("completionTime"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a Spark stage record ({e}): {dict(d)!r:.200}") from e
        if start is None:
            raise ValueError(f"stage {sid} has no submission time (status {status})")
        return cls(
            stage_id=sid,
            attempt=int(d.get("attemptId", 0)),
            status=status,
            description=str(d.get("description") or ""),
            tasks=int(d.get("numTasks", 0)),
            run_s=float(d.get("executorRunTime", 0)) / 1000.0,
            cpu_s=float(d.get("executorCpuTime", 0)) / 1e9,
            start=start,
            end=end if end is not None else start,
            peak_memory_mb=float(d.get("peakExecutionMemory", 0)) / MB,
        )


def statement_stages(stages: Iterable[EngineStage], needle: str) -> list[EngineStage]:
    """The completed engine stages of the statement whose text contains ``needle`` as whole
    words (case and whitespace runs ignored), e.g. ``CREATE TABLE db.checkpoint`` for a
    checkpoint's CTAS (not ``db.checkpoint_r1``'s).

    >>> s = [EngineStage(i, 0, "COMPLETE", d, 1, 1.0, 1.0, 0.0, 1.0) for i, d in
    ...      enumerate(["CREATE TABLE c.t_r1 AS SELECT 1", "create  table c.t USING parquet"])]
    >>> [x.stage_id for x in statement_stages(s, "CREATE TABLE c.t")]
    [1]
    """
    words = needle.lower().split()
    if not words:
        raise ValueError("needle must not be empty")
    pattern = re.compile(
        r"(?<![\w.`])" + r"\s+".join(re.escape(w) for w in words) + r"(?![\w`])", re.I
    )
    return [s for s in stages if s.status == _DONE and pattern.search(s.description)]


def _union_s(intervals: Iterable[tuple[float, float]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None and cur_a is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None and cur_b is not None:
        total += cur_b - cur_a
    return total


def lookup_form(stage: Stage) -> str:
    """The form the planner looks a measurement of ``stage`` up by: a physical join's
    ``join:<method>:<partitions>`` (as estimated, whatever tasks a measurement then gives it),
    else ``""`` (scans, final stages and joins without a pinned method are looked up by
    signature only)."""
    if stage.kind == "join" and stage.method:
        return f"join:{stage.method}:{stage.partitions}"
    return ""


def calibrate_stage(
    stages: Sequence[EngineStage],
    wall_s: float,
    rows_out: float,
    *,
    cores_per_vcore: float = 1.0,
    base_memory_mb: float = 0.0,
    form: str = "",
) -> StageMeasurement:
    """The planner's ``tasks`` x ``task_s`` (and peak memory) of one statement that ran as the
    engine ``stages`` in ``wall_s`` seconds (module docstring: how the shape is derived).

    Two engine stages with 3 s and 2 s of CPU over 3 s of wall time, inside a 4 s statement
    (1 s outside them): 6 core-seconds; vcores of 0.25 cores:

    >>> a = EngineStage(1, 0, "COMPLETE", "q", 4, 4.0, 3.0, 10.0, 12.0, 64.0)
    >>> b = EngineStage(2, 0, "COMPLETE", "q", 2, 2.0, 2.0, 12.0, 13.0)
    >>> m = calibrate_stage([a, b], 4.0, 100.0, cores_per_vcore=0.25)
    >>> m.tasks, m.task_s, m.memory_mb
    (6, 4.0, 16.0)

    At a share of 6 vcores or more (1.5 cores): one wave of 4 s, the measured wall time; at 1
    vcore (0.25 cores), 6 waves, 24 s = 6 core-seconds / 0.25 cores.
    """
    if not (wall_s >= 0) or wall_s == math.inf:
        raise ValueError(f"wall_s must be finite >= 0, got {wall_s}")
    if not cores_per_vcore > 0:
        raise ValueError(f"cores_per_vcore must be > 0, got {cores_per_vcore}")
    done = [s for s in stages if s.status == _DONE]
    busy = _union_s((s.start, s.end) for s in done)
    serial = max(0.0, wall_s - busy)
    work = (serial + sum(s.cpu_s for s in done)) / cores_per_vcore  # vcore-seconds
    critical = max(wall_s, 1e-3)
    tasks = max(1, round(work / critical))
    task_s = max(critical, work / tasks) if tasks == 1 else work / tasks
    peak = max((s.peak_memory_mb / s.tasks for s in done if s.tasks > 0), default=0.0)
    memory = float(math.ceil(base_memory_mb + peak)) if done else None
    return StageMeasurement(task_s, tasks, float(rows_out), form, memory)


@dataclass(frozen=True)
class MeasuredStatement:
    """One planner stage that ran in a prior run: its signature ``digest`` and ``form`` (the
    uncalibrated :attr:`~qoop_planner.model.Stage.form` the planner looks it up by; ``""`` for
    a final stage), the engine stages of its statement, its wall time and output rows."""

    digest: str
    form: str
    stages: tuple[EngineStage, ...]
    wall_s: float
    rows_out: float


def calibrated_history(
    measured: Iterable[MeasuredStatement],
    *,
    cores_per_vcore: float = 1.0,
    base_memory_mb: float = 0.0,
    base: Mapping[str, StageMeasurement] | None = None,
) -> History:
    """``base`` (default empty) with every measured statement as a calibrated stage, keyed
    ``digest@form`` (``digest`` when the form is empty); statements of the same key from
    several runs are averaged (work and tasks, rows; the largest peak memory)."""
    groups: dict[tuple[str, str], list[StageMeasurement]] = {}
    for m in measured:
        if not m.digest:
            raise ValueError("a measured statement needs its stage's signature digest")
        c = calibrate_stage(
            m.stages,
            m.wall_s,
            m.rows_out,
            cores_per_vcore=cores_per_vcore,
            base_memory_mb=base_memory_mb,
            form=m.form,
        )
        groups.setdefault((m.digest, m.form), []).append(c)
    out = History(base)
    for (digest, form), ms in groups.items():
        tasks = max(1, round(statistics.fmean(m.tasks for m in ms)))
        work = statistics.fmean(m.tasks * m.task_s for m in ms)
        mems = [m.memory_mb for m in ms if m.memory_mb is not None]
        out.record(
            digest,
            work / tasks,
            tasks,
            statistics.fmean(m.rows_out for m in ms),
            form=form,
            memory_mb=max(mems) if mems else None,
        )
    return out


def calibrated_config(
    cfg: CostConfig, pairs: Iterable[tuple[StageCost, StageMeasurement]]
) -> CostConfig:
    """``cfg`` with every duration scaled by measured over estimated work of the ``pairs``
    (a stage's uncalibrated cost and its calibrated measurement): rates divided and the task
    start-up overhead multiplied by the factor. No pairs (or no estimated work): ``cfg``.

    >>> cfg = CostConfig()
    >>> from qoop_planner.model import Resources
    >>> est = StageCost(tasks=2, task_s=1.0, demand=Resources(1.0, 1024.0))
    >>> c = calibrated_config(cfg, [(est, StageMeasurement(3.0, 2, 1.0))])
    >>> c.scan_mb_s, c.task_overhead_s
    (33.333333333333336, 1.5)
    """
    estimated = measured = 0.0
    for cost, m in pairs:
        estimated += cost.work
        measured += max(1, m.tasks) * m.task_s
    if estimated <= 0.0 or measured <= 0.0:
        return cfg
    f = measured / estimated
    return replace(
        cfg,
        scan_mb_s=cfg.scan_mb_s / f,
        join_mb_s=cfg.join_mb_s / f,
        final_mb_s=cfg.final_mb_s / f,
        map_join_mb_s=cfg.map_join_mb_s / f,
        broadcast_build_mb_s=cfg.broadcast_build_mb_s / f,
        spill_mb_s=cfg.spill_mb_s / f,
        task_overhead_s=cfg.task_overhead_s * f,
        shuffle_block_s=cfg.shuffle_block_s * f,
    )
