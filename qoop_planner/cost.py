"""A simple cost model for the stages of a join plan (spec A.4.1), refined by measured history.

Estimates come from table statistics (:class:`TableStats`: row counts, bytes, column NDVs; defaults
where unknown) and textbook selectivities: a filter ``col = const`` keeps ``1/NDV(col)`` of the rows
(``default_eq_selectivity`` when the NDV is unknown), ranges keep ``range_selectivity``, other
predicates ``default_selectivity``; an equi-join keeps ``|L||R| / max(NDV_L, NDV_R)``.

A stage reading ``B`` input bytes runs ``ceil(B / split_bytes)`` tasks; each task processes its
share of the bytes read and written at the stage kind's rate, plus a fixed start-up overhead.
Every task asks for one vcore and memory that grows with the hash-join build side (broadcast if
small, partitioned across the tasks otherwise).

:class:`History` maps :attr:`StageSignature.digest` to what a previous run measured; a measured
stage's ``tasks``, ``task_s``, ``rows_out`` and, when measured, peak ``memory_mb`` per task
replace the estimates (spec A.4.1: "durations come from prior runs of each QEP", T:610: "peak
resource estimates are based on prior runs"). A measurement recorded with a stage's
:attr:`~qoop_planner.model.Stage.form` (``History.record(..., form=...)``) applies to that
physical form only (:func:`History.lookup`); one without a form applies to every form.
Everything here is pure computation, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from qoop_planner.model import Resources, StageCost, StageSignature

__all__ = [
    "CostConfig",
    "History",
    "StageMeasurement",
    "TableStats",
    "filter_selectivity",
    "stage_cost",
    "stage_work",
    "task_estimate",
    "type_width",
]

MB = float(2**20)


@dataclass(frozen=True)
class TableStats:
    """Statistics of one table: rows, total bytes (``None``: rows x row width), column NDVs."""

    rows: float
    bytes: float | None = None
    ndv: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.rows >= 0) or self.rows == math.inf:
            raise ValueError(f"rows must be a finite number >= 0, got {self.rows}")
        if self.bytes is not None and (not (self.bytes >= 0) or self.bytes == math.inf):
            raise ValueError(f"bytes must be a finite number >= 0, got {self.bytes}")


@dataclass(frozen=True)
class CostConfig:
    """Knobs of the cost model (all sizes in bytes, rates in MB/s per task)."""

    split_bytes: float = 256 * MB
    scan_mb_s: float = 100.0  # read, filter and project
    join_mb_s: float = 50.0  # hash join: inputs read plus output written
    final_mb_s: float = 50.0  # aggregation / sort / residual work on top of the join tree
    task_overhead_s: float = 0.5  # start-up cost of every task
    default_rows: float = 1_000_000.0  # tables (and subqueries) without statistics
    default_width: float = 8.0  # bytes per column of unknown type
    default_selectivity: float = 0.1
    default_eq_selectivity: float = 0.1  # col = const when NDV(col) is unknown
    range_selectivity: float = 1.0 / 3.0
    columnar: bool = True  # scans read only the referenced columns' share of the table
    base_memory_mb: float = 1024.0
    max_memory_mb: float = 16384.0
    memory_step_mb: float = 128.0
    hash_overhead: float = 2.0  # memory bytes per byte of hash-join build side
    broadcast_bytes: float = 64 * MB  # build sides up to this size are broadcast to every task
    # physical alternatives (qoop_planner.physical)
    map_join_mb_s: float = 100.0  # broadcast join: probe side read in splits, no shuffle
    broadcast_build_mb_s: float = 200.0  # broadcast join: every task builds the whole table
    shuffle_block_s: float = 0.002  # shuffle join: per block fetched (input tasks x partitions)
    sort_buffer_mb: float = 512.0  # sort-merge join: in-memory sort buffer per task
    spill_mb_s: float = 100.0  # sort-merge join: what exceeds the buffer is written and re-read

    def __post_init__(self) -> None:
        for name in (
            "split_bytes",
            "scan_mb_s",
            "join_mb_s",
            "final_mb_s",
            "default_rows",
            "map_join_mb_s",
            "broadcast_build_mb_s",
            "spill_mb_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class StageMeasurement:
    """What a run of a stage measured: tasks, mean task seconds, output rows, and optionally
    the physical form it ran in and its peak memory per task."""

    task_s: float
    tasks: int
    rows_out: float
    form: str = ""
    memory_mb: float | None = None


class History(Mapping[str, StageMeasurement]):
    """Measured stages by :attr:`StageSignature.digest`; applied over the estimates."""

    def __init__(self, entries: Mapping[str, StageMeasurement] | None = None) -> None:
        self._entries: dict[str, StageMeasurement] = dict(entries or {})

    def record(
        self,
        stage: StageSignature | str,
        task_s: float,
        tasks: int,
        rows_out: float,
        *,
        form: str = "",
        memory_mb: float | None = None,
    ) -> None:
        key = stage.digest if isinstance(stage, StageSignature) else stage
        if form:
            key = f"{key}@{form}"
        mem = float(memory_mb) if memory_mb is not None else None
        self._entries[key] = StageMeasurement(float(task_s), int(tasks), float(rows_out), form, mem)

    @staticmethod
    def lookup(
        history: Mapping[str, StageMeasurement], digest: str, form: str = ""
    ) -> StageMeasurement | None:
        """The measurement of the stage ``digest`` in ``form``, else its form-less one.

        >>> h = History()
        >>> h.record("d", 2.0, 4, 10.0)
        >>> h.record("d", 9.0, 1, 10.0, form="join:broadcast:1", memory_mb=3000)
        >>> History.lookup(h, "d", "join:broadcast:1").memory_mb, History.lookup(h, "d").tasks
        (3000.0, 4)
        """
        if form:
            m = history.get(f"{digest}@{form}")
            if m is not None:
                return m
        return history.get(digest)

    def __getitem__(self, key: str) -> StageMeasurement:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def type_width(dtype: exp.DataType | None, default: float = 8.0) -> float:
    """Average bytes of a value of ``dtype`` (a rough, storage-agnostic figure)."""
    if dtype is None:
        return default
    t = exp.DataType.Type
    kind = dtype.this
    if kind in (t.BOOLEAN, t.TINYINT, t.UTINYINT):
        return 1.0
    if kind in (t.SMALLINT, t.USMALLINT):
        return 2.0
    if kind in (t.INT, t.UINT, t.FLOAT, t.DATE):
        return 4.0
    if kind in (t.DECIMAL, t.BIGINT, t.UBIGINT, t.DOUBLE, t.TIMESTAMP, t.DATETIME):
        return 8.0
    if kind in (t.CHAR, t.NCHAR, t.VARCHAR, t.NVARCHAR, t.TEXT, t.BINARY, t.VARBINARY):
        length = dtype.expressions[0].name if dtype.expressions else ""
        if length.isdigit():
            n = float(length)
            return n if kind in (t.CHAR, t.NCHAR) else max(1.0, n / 2)
        return 20.0
    return default


# NDV lookup of a column of the relation being filtered: (column name) -> NDV or None.
NdvLookup = Callable[[str], float | None]


def _column_of(e: exp.Expr) -> exp.Column | None:
    while isinstance(e, (exp.Paren, exp.Cast)):
        e = e.this
    return e if isinstance(e, exp.Column) else None


def _eq_selectivity(col: exp.Column | None, ndv: NdvLookup, cfg: CostConfig) -> float:
    n = ndv(col.name) if col is not None else None
    return 1.0 / n if n and n >= 1 else cfg.default_eq_selectivity


def filter_selectivity(pred: exp.Expr, ndv: NdvLookup, cfg: CostConfig) -> float:
    """Fraction of rows a single-relation predicate keeps (independence assumed)."""
    s = _selectivity(pred, ndv, cfg)
    return min(1.0, max(0.0, s))


def _selectivity(p: exp.Expr, ndv: NdvLookup, cfg: CostConfig) -> float:
    if isinstance(p, exp.Paren):
        return _selectivity(p.this, ndv, cfg)
    if isinstance(p, exp.And):
        return _selectivity(p.left, ndv, cfg) * _selectivity(p.right, ndv, cfg)
    if isinstance(p, exp.Or):
        a, b = _selectivity(p.left, ndv, cfg), _selectivity(p.right, ndv, cfg)
        return a + b - a * b
    if isinstance(p, exp.Not):
        return 1.0 - _selectivity(p.this, ndv, cfg)
    if isinstance(p, (exp.EQ, exp.NullSafeEQ)):
        left, right = _column_of(p.left), _column_of(p.right)
        if left is not None and right is not None:
            return cfg.default_selectivity
        return _eq_selectivity(left or right, ndv, cfg)
    if isinstance(p, exp.NEQ):
        return 1.0 - _eq_selectivity(_column_of(p.left) or _column_of(p.right), ndv, cfg)
    if isinstance(p, exp.In):
        values = p.expressions
        if values:
            return min(1.0, len(values) * _eq_selectivity(_column_of(p.this), ndv, cfg))
        return cfg.default_selectivity
    if isinstance(p, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
        return cfg.range_selectivity
    if isinstance(p, exp.Between):
        return cfg.range_selectivity * cfg.range_selectivity * 2
    if isinstance(p, exp.Like):
        pattern = p.expression
        if isinstance(pattern, exp.Literal) and not any(c in pattern.this for c in "%_"):
            return _eq_selectivity(_column_of(p.this), ndv, cfg)
        return cfg.default_selectivity
    if isinstance(p, exp.Is):
        return 0.05
    return cfg.default_selectivity


def _round_memory(mb: float, cfg: CostConfig) -> float:
    step = cfg.memory_step_mb
    mb = math.ceil((mb - 1.0) / step) * step if step > 0 else mb  # up to a step, 1 MB slack
    return float(min(cfg.max_memory_mb, max(cfg.base_memory_mb, mb)))


def task_estimate(
    kind: str, input_bytes: float, bytes_out: float, cfg: CostConfig
) -> tuple[int, float]:
    """(tasks, seconds per task) of a stage reading ``input_bytes`` and writing ``bytes_out``."""
    rate = cfg.scan_mb_s if kind == "scan" else cfg.join_mb_s if kind == "join" else cfg.final_mb_s
    tasks = max(1, math.ceil(input_bytes / cfg.split_bytes))
    return tasks, cfg.task_overhead_s + (input_bytes + bytes_out) / tasks / (rate * MB)


def stage_work(
    kind: str,
    input_bytes: float,
    bytes_out: float,
    cfg: CostConfig,
    measured: StageMeasurement | None = None,
) -> float:
    """Task-seconds of a stage: ``stage_cost(...).work`` without building the StageCost."""
    if measured is not None:
        return max(1, int(measured.tasks)) * float(measured.task_s)
    tasks, task_s = task_estimate(kind, input_bytes, bytes_out, cfg)
    return tasks * task_s


def stage_cost(
    kind: str,
    input_bytes: float,
    rows_out: float,
    bytes_out: float,
    cfg: CostConfig,
    *,
    build_bytes: float = 0.0,
    extra_memory_bytes: float = 0.0,
    measured: StageMeasurement | None = None,
) -> StageCost:
    """The estimated (or measured) cost of one stage.

    ``kind`` picks the processing rate (``scan``, ``join``, ``final``); ``build_bytes`` is the
    hash-join build side (the smaller input) and sizes the tasks' memory.
    """
    tasks, task_s = task_estimate(kind, input_bytes, bytes_out, cfg)
    if build_bytes > cfg.broadcast_bytes:
        build_bytes /= tasks  # partitioned (shuffle) hash join: each task builds its share
    memory = cfg.base_memory_mb + (cfg.hash_overhead * build_bytes + extra_memory_bytes) / MB
    if measured is not None and measured.memory_mb is not None:
        memory = measured.memory_mb
    if measured is not None:
        tasks = max(1, int(measured.tasks))
        task_s = float(measured.task_s)
        if rows_out > 0:
            bytes_out *= measured.rows_out / rows_out
        else:
            bytes_out = measured.rows_out * 8.0
        rows_out = float(measured.rows_out)
    return StageCost(
        tasks=tasks,
        task_s=task_s,
        demand=Resources(vcores=1.0, memory_mb=_round_memory(memory, cfg)),
        rows_out=float(rows_out),
        bytes_out=float(bytes_out),
    )
