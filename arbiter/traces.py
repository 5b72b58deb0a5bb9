"""Readers for the public GPU-cluster traces in ``../shared/data`` (one internal job type).

Formats (see ``../shared/data/README.md``):

* ``philly``: Microsoft Philly job CSV ``timestamp,duration,num_gpus,gpu_time,cluster``. Arrival
  is seconds since the first job; the virtual cluster becomes the queue. ``time_window`` keeps
  jobs arriving in ``[start, end)`` seconds; ``target_load`` keeps jobs taken in a seeded random
  order, skipping any that would overshoot, until GPU-time / (window x cluster GPUs) reaches the
  target: the simulator's way to replay a production trace on a smaller cluster. (A plain
  Bernoulli sample misses the target badly: a few month-long 8-GPU jobs dominate GPU time.)
* ``pollux``: ``name,time,application,num_replicas,batch_size`` (arrival second, model, GPUs).
* ``gavel``: 10 TAB-separated fields ``job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time``; the GPU
  count is ``scale_factor``. :func:`gavel_throughput` reads ``simulation_throughputs.json``.
* ``synergy``: ``job_id,model,arrival_hours,num_iters,gpu_demand`` (no header).
* ``tiresias``: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``.

A malformed row raises :class:`TraceError` naming the file and line; nothing is half-read.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

__all__ = [
    "FORMATS",
    "TraceError",
    "TraceJob",
    "gavel_throughput",
    "load_gavel_throughputs",
    "read_gavel",
    "read_philly",
    "read_pollux",
    "read_synergy",
    "read_tiresias",
    "read_trace",
]


class TraceError(ValueError):
    """A trace file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace, whatever its format."""

    job_id: str
    arrival_s: float
    num_gpus: int
    model: str = ""
    duration_s: float | None = None  # measured run time on num_gpus GPUs, if the trace has it
    total_steps: float | None = None  # iterations / steps, if the trace has them
    batch_size: int | None = None
    queue: str = "default"
    source: str = ""
    extra: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def gpu_time_s(self) -> float | None:
        return None if self.duration_s is None else self.duration_s * self.num_gpus


def _rows(path: Path, header: list[str] | None, delimiter: str = ","):
    """(line number, row dict) pairs; ``header`` None means the file has its own header."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        if header is None:
            try:
                header = next(reader)
            except StopIteration:
                raise TraceError(f"{path}: empty file") from None
            start = 2
        else:
            start = 1
        for lineno, row in enumerate(reader, start=start):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise TraceError(
                    f"{path}:{lineno}: expected {len(header)} fields ({','.join(header)}), "
                    f"got {len(row)}"
                )
            yield lineno, dict(zip(header, (c.strip() for c in row), strict=True))


def _num(path: Path, lineno: int, row: Mapping[str, str], key: str, kind=float):
    try:
        value = kind(float(row[key])) if kind is int else kind(row[key])
    except (KeyError, ValueError):
        raise TraceError(
            f"{path}:{lineno}: field {key!r} = {row.get(key)!r} is not a number"
        ) from None
    if value < 0:
        raise TraceError(f"{path}:{lineno}: field {key!r} = {value} is negative")
    return value


def _gpus(path: Path, lineno: int, row: Mapping[str, str], key: str) -> int:
    n = _num(path, lineno, row, key, int)
    if n < 1:
        raise TraceError(f"{path}:{lineno}: field {key!r} must be >= 1 GPU, got {n}")
    return n


def read_philly(
    path: str | Path,
    *,
    time_window: tuple[float, float] | None = None,
    target_load: float | None = None,
    cluster_gpus: int | None = None,
    seed: int = 0,
    max_gpus: int | None = None,
    max_duration_s: float | None = None,
    min_duration_s: float | None = None,
) -> list[TraceJob]:
    path = Path(path)
    raw = []
    for lineno, row in _rows(path, None):
        try:
            ts = datetime.fromisoformat(row["timestamp"])
        except (KeyError, ValueError):
            raise TraceError(f"{path}:{lineno}: bad timestamp {row.get('timestamp')!r}") from None
        raw.append((ts, lineno, row))
    if not raw:
        raise TraceError(f"{path}: no jobs")
    raw.sort(key=lambda r: (r[0], r[1]))
    t0 = raw[0][0]
    jobs = [
        TraceJob(
            job_id=f"philly-{lineno}",
            arrival_s=(ts - t0).total_seconds(),
            num_gpus=_gpus(path, lineno, row, "num_gpus"),
            duration_s=_num(path, lineno, row, "duration"),
            queue=row["cluster"],
            source="philly",
        )
        for ts, lineno, row in raw
    ]
    if time_window is not None:
        start, end = time_window
        if not start < end:
            raise TraceError(f"time_window must have start < end, got {time_window}")
        jobs = [j for j in jobs if start <= j.arrival_s < end]
        jobs = [TraceJob(**{**j.__dict__, "arrival_s": j.arrival_s - start}) for j in jobs]
    if max_gpus is not None:
        jobs = [j for j in jobs if j.num_gpus <= max_gpus]
    if max_duration_s is not None:
        jobs = [j for j in jobs if (j.duration_s or 0.0) <= max_duration_s]
    if min_duration_s is not None:
        jobs = [j for j in jobs if (j.duration_s or 0.0) >= min_duration_s]
    if target_load is not None:
        if cluster_gpus is None or cluster_gpus < 1 or not target_load > 0:
            raise TraceError("target_load needs a positive load and cluster_gpus >= 1")
        span = (
            (time_window[1] - time_window[0])
            if time_window
            else max((j.arrival_s for j in jobs), default=0.0)
        )
        budget = target_load * span * cluster_gpus
        order = list(range(len(jobs)))
        random.Random(seed).shuffle(order)
        kept, used = [], 0.0
        for k in order:  # seeded random order, skipping jobs that would overshoot the target
            gpu_time = jobs[k].gpu_time_s or 0.0
            if used + gpu_time <= budget:
                kept.append(k)
                used += gpu_time
        jobs = [jobs[k] for k in sorted(kept)]
    return jobs


def read_pollux(path: str | Path) -> list[TraceJob]:
    path = Path(path)
    return [
        TraceJob(
            job_id=row["name"],
            arrival_s=_num(path, lineno, row, "time"),
            num_gpus=_gpus(path, lineno, row, "num_replicas"),
            model=row["application"],
            batch_size=_num(path, lineno, row, "batch_size", int),
            source="pollux",
        )
        for lineno, row in _rows(path, None)
    ]


_GAVEL_FIELDS = [
    "job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
    "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time",
]  # fmt: skip


def read_gavel(path: str | Path) -> list[TraceJob]:
    path = Path(path)
    return [
        TraceJob(
            job_id=f"gavel-{k}",
            arrival_s=_num(path, lineno, row, "arrival_time"),
            num_gpus=_gpus(path, lineno, row, "scale_factor"),
            model=row["job_type"],
            total_steps=_num(path, lineno, row, "total_steps"),
            source="gavel",
            extra={"priority_weight": row["priority_weight"], "SLO": row["SLO"]},
        )
        for k, (lineno, row) in enumerate(_rows(path, _GAVEL_FIELDS, delimiter="\t"))
    ]


def gavel_throughput(
    throughputs: Mapping, worker_type: str, job_type: str, scale_factor: int
) -> float:
    """Steps per second of ``job_type`` alone on ``scale_factor`` GPUs of ``worker_type``."""
    try:
        return float(throughputs[worker_type][f"('{job_type}', {scale_factor})"]["null"])
    except KeyError:
        raise TraceError(
            f"no throughput for {job_type!r} x{scale_factor} on {worker_type!r}"
        ) from None


def load_gavel_throughputs(path: str | Path) -> Mapping:
    return json.loads(Path(path).read_text())


def read_synergy(path: str | Path) -> list[TraceJob]:
    path = Path(path)
    header = ["job_id", "model", "arrival_hours", "num_iters", "gpu_demand"]
    return [
        TraceJob(
            job_id=f"synergy-{row['job_id']}",
            arrival_s=_num(path, lineno, row, "arrival_hours") * 3600.0,
            num_gpus=_gpus(path, lineno, row, "gpu_demand"),
            model=row["model"],
            total_steps=_num(path, lineno, row, "num_iters"),
            source="synergy",
        )
        for lineno, row in _rows(path, header)
    ]


def read_tiresias(path: str | Path) -> list[TraceJob]:
    path = Path(path)
    return [
        TraceJob(
            job_id=f"tiresias-{row['job_id']}",
            arrival_s=_num(path, lineno, row, "submit_time"),
            num_gpus=_gpus(path, lineno, row, "num_gpu"),
            model=row["model_name"],
            duration_s=_num(path, lineno, row, "duration"),
            total_steps=_num(path, lineno, row, "iterations"),
            source="tiresias",
        )
        for lineno, row in _rows(path, None)
    ]


FORMATS: Mapping[str, Callable[..., list[TraceJob]]] = {
    "philly": read_philly,
    "pollux": read_pollux,
    "gavel": read_gavel,
    "synergy": read_synergy,
    "tiresias": read_tiresias,
}


def read_trace(path: str | Path, fmt: str, **options) -> list[TraceJob]:
    """Read ``path`` in format ``fmt`` (one of :data:`FORMATS`), sorted by arrival."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r} (known: {', '.join(sorted(FORMATS))})")
    if not Path(path).is_file():
        raise TraceError(f"trace file {path} does not exist")
    jobs = FORMATS[fmt](path, **options)
    return sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
