"""Physical alternatives of a join stage: broadcast vs shuffle joins, partition counts (QOOP §2.2).

QOOP's plans differ in "structure and task-level resource requirements" (QOOP §2.2, seed 000
L431), and its a x b model contrasts a plan of few large tasks with one of many small ones
(§2.4, L551). Join order alone rarely gives such plans: every order of the same joins runs
1-vcore tasks over similar bytes. This module adds the physical choices an engine makes per
join, each a pure function of the stage's input and output sizes:

* **shuffle_hash**: both inputs are repartitioned on the join key into ``P`` partitions; each
  of the ``P`` tasks fetches one block from every task that wrote its inputs (``input_tasks``
  x ``shuffle_block_s``), reads its share of both inputs and builds a hash table of its share
  of the build side (memory ``hash_overhead x build / P``);
* **merge** (sort-merge): the same repartitioning, but each task sorts instead of hashing, with
  a bounded sort buffer; what exceeds the buffer spills (written and read again at
  ``spill_mb_s``). It is what a shuffle join becomes when the hash table of a partition would
  not fit the largest container (``max_memory_mb``);
* **broadcast** (map join): the build side is sent whole to every task of the probe side,
  which is read in splits without a shuffle (``map_join_mb_s``, faster than a shuffle join's
  rate); every task builds the whole hash table (``broadcast_build_mb_s``: replicated work) and
  holds it (memory ``hash_overhead x build``). Allowed only while that fits ``max_memory_mb``.

So a broadcast join does less work but asks for much more memory per task (at a small share
it runs few tasks at a time, or none); few partitions mean less per-task overhead and fewer
shuffle blocks but fewer, longer tasks (narrow); many partitions the opposite (wide, more
work). A :class:`PhysicalProfile` applies one policy to every join of a plan, which is what an
engine's settings pin (Hive ``hive.auto.convert.join`` and bytes per reducer; Spark
``spark.sql.autoBroadcastJoinThreshold``, join hints and ``spark.sql.shuffle.partitions``).
Rates and sizes are the knobs of :class:`~qoop_planner.cost.CostConfig`; measured stages
(:class:`~qoop_planner.cost.History`) replace the estimates where a run measured them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qoop_planner.cost import MB, CostConfig, StageMeasurement, _round_memory
from qoop_planner.model import Resources, StageCost

__all__ = [
    "BROADCAST",
    "MERGE",
    "PROFILES",
    "SHUFFLE_HASH",
    "PhysicalProfile",
    "join_method",
    "join_stage_cost",
    "partitions_for",
]

SHUFFLE_HASH = "shuffle_hash"
MERGE = "merge"
BROADCAST = "broadcast"


@dataclass(frozen=True)
class PhysicalProfile:
    """One physical policy for every join of a plan.

    ``broadcast``: broadcast every join whose build side fits (else shuffle);
    ``bytes_per_task``: input bytes per shuffle partition (or probe split of a broadcast);
    ``max_partitions``: a bound on the tasks of a join stage (0: none), Hive's
    ``hive.exec.reducers.max`` / a fixed ``spark.sql.shuffle.partitions``.
    """

    name: str
    broadcast: bool
    bytes_per_task: float
    max_partitions: int = 0

    def __post_init__(self) -> None:
        if not self.bytes_per_task > 0:
            raise ValueError(f"bytes_per_task must be > 0, got {self.bytes_per_task}")
        if self.max_partitions < 0:
            raise ValueError(f"max_partitions must be >= 0, got {self.max_partitions}")


# Input bytes per join task: Hive's default 256 MB per reducer, Spark AQE's advisory 64 MB
# (wide), 1 GB (coarse), and 256 MB bounded to 16 reducers; each with broadcast joins on and off.
PROFILES: tuple[PhysicalProfile, ...] = tuple(
    PhysicalProfile(f"{join}{suffix}", join == "broadcast", size * MB, bound)
    for join in ("shuffle", "broadcast")
    for suffix, size, bound in (("", 256, 0), ("_wide", 64, 0), ("_coarse", 1024, 0),
                                ("_bounded", 256, 16))
)  # fmt: skip


def partitions_for(input_bytes: float, profile: PhysicalProfile) -> int:
    """Tasks of a join stage reading ``input_bytes`` under ``profile`` (at least 1).

    >>> p = PhysicalProfile("x", False, 256 * MB, max_partitions=8)
    >>> partitions_for(1000 * MB, p), partitions_for(10_000 * MB, p), partitions_for(0, p)
    (4, 8, 1)
    """
    n = max(1, math.ceil(input_bytes / profile.bytes_per_task))
    return min(n, profile.max_partitions) if profile.max_partitions else n


def _broadcast_memory_mb(build_bytes: float, cfg: CostConfig) -> float:
    return cfg.base_memory_mb + cfg.hash_overhead * build_bytes / MB


def join_method(build_bytes: float, partitions: int, broadcast: bool, cfg: CostConfig) -> str:
    """The join method a profile gets: broadcast if asked for and the whole hash table fits the
    largest container, else a shuffle hash join if a partition's table fits, else sort-merge.

    >>> cfg = CostConfig()
    >>> join_method(1000 * MB, 4, True, cfg), join_method(100_000 * MB, 4, True, cfg)
    ('broadcast', 'merge')
    >>> join_method(100_000 * MB, 64, True, cfg)
    'shuffle_hash'
    """
    if broadcast and _broadcast_memory_mb(build_bytes, cfg) <= cfg.max_memory_mb:
        return BROADCAST
    per_task = cfg.base_memory_mb + cfg.hash_overhead * build_bytes / max(1, partitions) / MB
    return SHUFFLE_HASH if per_task <= cfg.max_memory_mb else MERGE


def join_stage_cost(
    method: str,
    probe_bytes: float,
    build_bytes: float,
    rows_out: float,
    bytes_out: float,
    partitions: int,
    cfg: CostConfig,
    *,
    input_tasks: int = 0,
    measured: StageMeasurement | None = None,
) -> StageCost:
    """The cost of one join stage run with ``method`` (module docstring).

    ``partitions`` is the stage's task count (shuffle partitions, or probe splits of a
    broadcast); ``input_tasks`` the tasks that wrote its inputs (one shuffle block each per
    partition). A measured stage's tasks, seconds, rows and (if measured) peak memory replace
    the estimate.

    >>> cfg = CostConfig()
    >>> bc = join_stage_cost("broadcast", 4096 * MB, 512 * MB, 1e6, 512 * MB, 16, cfg)
    >>> sh = join_stage_cost("shuffle_hash", 4096 * MB, 512 * MB, 1e6, 512 * MB, 16, cfg)
    >>> bc.work < sh.work, bc.demand.memory_mb > sh.demand.memory_mb
    (True, True)
    >>> bc.demand.memory_mb, sh.demand.memory_mb
    (2048.0, 1152.0)
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    if method not in (SHUFFLE_HASH, MERGE, BROADCAST):
        raise ValueError(f"unknown join method {method!r}")
    p = partitions
    if method == BROADCAST:
        memory = _broadcast_memory_mb(build_bytes, cfg)
        task_s = (
            cfg.task_overhead_s
            + build_bytes / (cfg.broadcast_build_mb_s * MB)
            + (probe_bytes + bytes_out) / p / (cfg.map_join_mb_s * MB)
        )
    else:
        fetch = input_tasks * cfg.shuffle_block_s
        work_bytes = (probe_bytes + build_bytes + bytes_out) / p
        task_s = cfg.task_overhead_s + fetch + work_bytes / (cfg.join_mb_s * MB)
        if method == SHUFFLE_HASH:
            memory = cfg.base_memory_mb + cfg.hash_overhead * build_bytes / p / MB
        else:
            in_task = (probe_bytes + build_bytes) / p
            buffer = min(in_task, cfg.sort_buffer_mb * MB)
            memory = cfg.base_memory_mb + buffer / MB
            spilled = in_task - buffer
            task_s += 2 * spilled / (cfg.spill_mb_s * MB)
    tasks = p
    if measured is not None and measured.memory_mb is not None:
        memory = measured.memory_mb
    if measured is not None:
        tasks = max(1, int(measured.tasks))
        task_s = float(measured.task_s)
        bytes_out = bytes_out * measured.rows_out / rows_out if rows_out > 0 else 0.0
        rows_out = float(measured.rows_out)
    return StageCost(
        tasks=tasks,
        task_s=task_s,
        demand=Resources(vcores=1.0, memory_mb=_round_memory(memory, cfg)),
        rows_out=float(rows_out),
        bytes_out=float(bytes_out),
    )
