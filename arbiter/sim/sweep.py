"""Sweeps: a grid of policy × trace × cluster × seed × knobs, one simulator run per cell.

Themis §6 (and every other seed's evaluation) compares policies over traces, seeds and knob
settings; each cell of such a grid is one independent :func:`arbiter.sim.run.run_policy`, so a
grid parallelises by cell. This module is the part that does not depend on where cells run:

* :class:`Cell` names one run; :attr:`Cell.key` is a stable hash of everything that determines
  its result, so a finished cell is recognised on a later run (resume) and two identical cells
  are one.
* :func:`grid` expands the command line's lists into cells (knob values are a grid too:
  ``themis:fairness_knob=0.8|0.9,lease_s=300|600`` is four settings of Themis).
* :func:`run_cell` runs one cell and returns its row: the cell's fields, the simulator's
  summary (:func:`arbiter.sim.metrics.summarize`) and the app with the largest ρ_app
  (``worst_app``). A cell may also filter its trace's jobs (:data:`LOAD_OPTIONS`, e.g. Themis's
  1-8 GPUs and 30 min to 1 day), which the reproduction benchmarks use
  (``benchmarks/repro_sweep.py``). The isolated denominators (per job and per
  app) depend only on the jobs and the cluster, so a process computes them once per job set and
  reuses them for every policy of that set (:func:`_denominators`).
* :class:`SweepStore` is the output folder: one JSON file per finished cell, written atomically
  (a killed sweep leaves no half-written cell), then ``summary.csv`` and figures.
* :class:`SweepCell` is what the engines and the store need of a cell, so other kinds of cell
  than the simulator's run on the same engines: a benchmark defines its cell class (its run,
  its JSON, the files and modules its run needs) in a module of its own, and the Spark engine
  rebuilds it on the executor from the class's import path and the cell's JSON (QOOP's share
  profile replays, ``benchmarks/qoop_replay.py``, are such a kind; ``arbiter`` itself does not
  import them).

The engines that run the cells are shells: serially in this process (:func:`run_serial`), or as
a Spark job (:mod:`arbiter.sim.sweep_spark`).

>>> cells = grid(["tiresias/60_job.csv"], ["fifo", "themis"], [0, 1],
...              knobs=parse_knob_grid("themis:fairness_knob=0.8|0.9"))
>>> [(c.policy, c.seed, dict(c.knobs)) for c in cells]  # doctest: +NORMALIZE_WHITESPACE
[('fifo', 0, {}), ('fifo', 1, {}),
 ('themis', 0, {'fairness_knob': 0.8}), ('themis', 1, {'fairness_knob': 0.8}),
 ('themis', 0, {'fairness_knob': 0.9}), ('themis', 1, {'fairness_knob': 0.9})]
>>> cells[0].cluster
'nodes:16:4'
>>> cells[0].key == grid(["tiresias/60_job.csv"], ["fifo"], [0])[0].key
True
"""

from __future__ import annotations

import csv
import functools
import hashlib
import itertools
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from arbiter.cluster import Cluster, load_cluster
from arbiter.config import parse_knobs
from arbiter.policies import POLICIES
from arbiter.sim.apps import APP_KINDS, group_into_apps
from arbiter.sim.engine import isolated_run
from arbiter.sim.metrics import app_results
from arbiter.sim.perf import SimJob
from arbiter.sim.run import Run, app_denominator, load_jobs, run_policy

__all__ = [
    "LOAD_OPTIONS",
    "SUMMARY_FIELDS",
    "Cell",
    "SweepCell",
    "SweepError",
    "SweepStore",
    "default_cluster",
    "grid",
    "parse_knob_grid",
    "run_cell",
    "run_serial",
]

# The summary metrics a sweep keeps per cell (the simulator's summary has a few more).
SUMMARY_FIELDS = (
    "jobs", "finished", "skipped", "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s",
    "avg_rho", "median_rho", "p99_rho", "max_rho", "apps", "avg_act_s", "avg_rho_app",
    "max_rho_app", "makespan_s", "gpu_time_s", "utilization", "placement_score",
    "avg_queueing_s", "preemptions", "num_gpus", "frac_rho_le_1", "apps_finished",
    "busy_gpu_time_s", "decisions",
)  # fmt: skip

# Trace-loading options a cell may set beyond window, load and job count (Themis's job filter:
# ``max_gpus=8, min_duration_s=1800, max_duration_s=86400``), as :func:`load_jobs` names them.
LOAD_OPTIONS = ("max_gpus", "min_duration_s", "max_duration_s")


ALL_POLICIES = (*sorted(POLICIES), "isolated")


class SweepError(ValueError):
    """A sweep that cannot start: an unknown policy, trace or cluster, a malformed knob."""


class SweepCell(Protocol):
    """A kind of cell, as the engines and :class:`SweepStore` use it.

    ``key`` names the result (a stable hash of everything that determines it); ``to_json`` and
    the class's ``from_json`` carry the cell to an executor; ``run`` computes its row (with
    ``key`` and ``status``, a failure being a ``failed`` row) given the local paths of the files
    ``inputs`` names; ``header`` is the row's naming part (also of a row the engine writes when
    the run could not even start); ``ship`` names what an executor on another host must import
    beyond ``arbiter`` and ``protos`` (package folders or single modules); ``SUMMARY_HEADERS``
    are ``summary.csv``'s columns."""

    SUMMARY_HEADERS: ClassVar[tuple[str, ...]]

    @property
    def key(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...

    def describe(self) -> str: ...

    def header(self) -> dict[str, Any]: ...

    def inputs(self) -> list[str]: ...

    def ship(self) -> list[Path]: ...

    def run(self, inputs: Mapping[str, str] | None = None) -> dict[str, Any]: ...


# Each trace family's own cluster, as the reproduction benchmarks use them: Pollux's workloads
# and the Tiresias 60-job trace on 16 x 4 GPUs (AFS's and Pollux's testbed shape), Tiresias's
# simulator traces on 32 x 4, Synergy's static trace on its 4 x 8 physical cluster, Gavel's
# traces on its heterogeneous 36 V100 / 36 P100 / 36 K80 simulation, Philly on Themis's testbed.
_DEFAULT_CLUSTERS = (
    ("pollux/", "nodes:16:4"),
    ("tiresias/60_job", "nodes:16:4"),
    ("tiresias/", "nodes:32:4"),
    ("synergy/", "nodes:4:8:24:500"),
    ("gavel/", "gavel:36:36:36"),
    ("philly/", "themis-testbed"),
)


def default_cluster(trace: str) -> str:
    """The cluster a trace is swept on when ``--clusters`` is not given.

    >>> default_cluster("pollux/workloads/workload-6.csv"), default_cluster("philly/philly.csv")
    ('nodes:16:4', 'themis-testbed')
    """
    name = trace.replace(os.sep, "/")
    for prefix, cluster in _DEFAULT_CLUSTERS:
        if prefix in name:
            return cluster
    return "nodes:16:4"


@dataclass(frozen=True)
class Cell:
    """One simulator run. ``knobs`` are the policy's, as sorted (name, value) pairs."""

    trace: str
    policy: str
    seed: int
    cluster: str
    knobs: tuple[tuple[str, Any], ...] = ()
    window: tuple[float, float] | None = None
    target_load: float | None = None
    max_jobs: int | None = None
    app_kind: str = "single"
    jobs_per_app: tuple[int, int] = (1, 15)
    load: tuple[tuple[str, Any], ...] = ()  # LOAD_OPTIONS, sorted (name, value) pairs

    SUMMARY_HEADERS: ClassVar[tuple[str, ...]] = (
        "trace", "cluster", "policy", "knobs", "seed", "app_kind", "status",
        *SUMMARY_FIELDS, "wall_s", "key", "error",
    )  # fmt: skip

    @property
    def key(self) -> str:
        """A stable name for the cell's result (same fields, same key, in any process)."""
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def jobset(self) -> tuple:
        """What the jobs and the isolated denominators depend on (not the policy or knobs)."""
        return (self.trace, self.cluster, self.seed, self.window, self.target_load,
                self.max_jobs, self.app_kind, self.jobs_per_app, self.load)  # fmt: skip

    def knob_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.knobs)

    def describe(self) -> str:
        return f"{self.policy} on {self.trace}"

    def header(self) -> dict[str, Any]:
        return {
            "key": self.key, "trace": self.trace, "policy": self.policy, "seed": self.seed,
            "cluster": self.cluster, "knobs": self.knob_text(), "app_kind": self.app_kind,
            "cell": self.to_json(),
        }  # fmt: skip

    def inputs(self) -> list[str]:
        return [self.trace]

    def ship(self) -> list[Path]:
        return []  # the simulator is in arbiter, which every executor gets

    def run(self, inputs: Mapping[str, str] | None = None) -> dict[str, Any]:
        return run_cell(self, (inputs or {}).get(self.trace))

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["knobs"] = [list(kv) for kv in self.knobs]
        if self.load:
            doc["load"] = [list(kv) for kv in self.load]
        else:
            del doc["load"]  # cells without load options keep the keys they always had
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Cell:
        return cls(
            trace=doc["trace"], policy=doc["policy"], seed=int(doc["seed"]),
            cluster=doc["cluster"], knobs=tuple((str(k), _frozen(v)) for k, v in doc["knobs"]),
            window=tuple(doc["window"]) if doc.get("window") else None,
            target_load=doc.get("target_load"), max_jobs=doc.get("max_jobs"),
            app_kind=doc.get("app_kind", "single"),
            jobs_per_app=tuple(doc.get("jobs_per_app", (1, 15))),
            load=tuple((str(k), v) for k, v in doc.get("load", ())),
        )  # fmt: skip


def _frozen(value: Any) -> Any:
    """A knob value back from JSON: lists (``thresholds``) as the tuples they were."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def parse_knob_grid(text: str | None) -> dict[str, list[dict[str, Any]]]:
    """``'themis:fairness_knob=0.8|0.9,lease_s=600;tiresias:queues=2|3'`` -> each policy's
    list of knob settings (the product of the ``|`` alternatives).

    >>> parse_knob_grid("themis:fairness_knob=0.8|0.9,lease_s=600")
    {'themis': [{'fairness_knob': 0.8, 'lease_s': 600}, {'fairness_knob': 0.9, 'lease_s': 600}]}
    >>> parse_knob_grid("themis:f")
    Traceback (most recent call last):
    ...
    arbiter.sim.sweep.SweepError: --knobs: 'themis:f': knob 'f' is not name=value
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for item in filter(None, (x.strip() for x in (text or "").split(";"))):
        policy, sep, body = item.partition(":")
        policy = policy.strip()
        if not sep or policy not in ALL_POLICIES:
            raise SweepError(
                f"--knobs: {item!r} is not POLICY:name=v1|v2,... with POLICY one of "
                f"{', '.join(ALL_POLICIES)}"
            )
        names, choices = [], []
        for pair in filter(None, (x.strip() for x in body.split(","))):
            name, eq, values = pair.partition("=")
            if not eq:
                raise SweepError(f"--knobs: {item!r}: knob {pair!r} is not name=value")
            names.append(name.strip())
            choices.append([v.strip() for v in values.split("|")])
        settings = []
        for combo in itertools.product(*choices):
            text_ = ",".join(f"{n}={v}" for n, v in zip(names, combo, strict=True))
            try:
                settings.append(parse_knobs(text_))
            except ValueError as exc:
                raise SweepError(f"--knobs: {item!r}: {exc}") from None
        out.setdefault(policy, []).extend(settings)
    return out


def grid(
    traces: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    clusters: Sequence[str] | None = None,
    *,
    knobs: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    window: tuple[float, float] | None = None,
    target_load: float | None = None,
    max_jobs: int | None = None,
    app_kind: str = "single",
    jobs_per_app: tuple[int, int] = (1, 15),
    load: Mapping[str, Any] | None = None,
) -> list[Cell]:
    """Every cell of trace × cluster × policy × knob setting × seed, duplicates removed, in a
    stable order (traces, clusters, policies, knob settings, seeds). ``load``: options of
    :data:`LOAD_OPTIONS` for loading the trace."""
    bad = sorted(set(load or {}) - set(LOAD_OPTIONS))
    if bad:
        raise SweepError(f"unknown load options {bad} (known: {', '.join(LOAD_OPTIONS)})")
    load_pairs = tuple(sorted((load or {}).items()))
    unknown = [p for p in policies if p not in ALL_POLICIES]
    if unknown:
        raise SweepError(f"unknown policies {unknown} (known: {', '.join(ALL_POLICIES)})")
    if app_kind not in APP_KINDS:
        raise SweepError(f"unknown app kind {app_kind!r} (known: {', '.join(APP_KINDS)})")
    if not (traces and policies and seeds):
        raise SweepError("a sweep needs at least one trace, one policy and one seed")
    cells: dict[str, Cell] = {}
    for trace in traces:
        for cluster in clusters or [default_cluster(trace)]:
            for policy in policies:
                for setting in (knobs or {}).get(policy) or [{}]:
                    for seed in seeds:
                        cell = Cell(
                            trace, policy, int(seed), cluster,
                            knobs=tuple(sorted(setting.items())), window=window,
                            target_load=target_load, max_jobs=max_jobs, app_kind=app_kind,
                            jobs_per_app=jobs_per_app, load=load_pairs,
                        )  # fmt: skip
                        cells.setdefault(cell.key, cell)
    return list(cells.values())


# -- running one cell -------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _jobs_and_cluster(jobset: tuple, trace_path: str) -> tuple[tuple[SimJob, ...], Cluster]:
    trace, cluster_spec, seed, window, target_load, max_jobs, app_kind, jobs_per_app, load = jobset
    cluster = load_cluster(cluster_spec)
    jobs = load_jobs(
        trace_path, cluster=cluster, time_window=window, target_load=target_load,
        max_jobs=max_jobs, seed=seed, **dict(load),
    )  # fmt: skip
    if not jobs:
        raise SweepError(f"{trace}: no jobs (after window and sampling)")
    return tuple(group_into_apps(jobs, app_kind, jobs_per_app, seed=seed)), cluster


@functools.lru_cache(maxsize=8)
def _denominators(jobset: tuple, trace_path: str) -> tuple[dict[str, float], dict[str, float]]:
    """The isolated run's JCT per job and ACT per app: once per job set in a process (a Spark
    Python worker is reused across tasks, so the cache serves every policy of the set)."""
    jobs, cluster = _jobs_and_cluster(jobset, trace_path)
    isolated = isolated_run(jobs, cluster)
    return isolated, app_denominator(jobs, cluster, isolated)


def run_cell(cell: Cell, trace_path: str | None = None) -> dict[str, Any]:
    """Simulate one cell; its row: the cell's fields, ``key``, ``status`` ("ok" or "failed"
    with ``error``), the summary metrics and ``wall_s``. A cell that fails (a policy that raises
    on this trace, say) is a failed row, not a failed sweep."""
    start = time.perf_counter()
    row = cell.header()
    try:
        path = trace_path or cell.trace
        jobs, cluster = _jobs_and_cluster(cell.jobset, path)
        isolated, isolated_apps = _denominators(cell.jobset, path)
        knobs = dict(cell.knobs)
        run = run_policy(
            jobs, cluster, cell.policy, isolated=isolated, isolated_apps=isolated_apps,
            seed=cell.seed, **knobs,
        )  # fmt: skip
    except Exception as exc:  # broad: any failure of one cell is that cell's result
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    else:
        row["status"] = "ok"
        row.update({k: _plain(run.summary.get(k)) for k in SUMMARY_FIELDS})
        row["worst_app"] = _worst_app(run)
    row["wall_s"] = time.perf_counter() - start
    return row


def _worst_app(run: Run) -> dict[str, Any] | None:
    """The app with the largest ρ_app (what the Themis reproduction names), or None."""
    rated = [(a.rho, a) for a in app_results(run.result) if a.rho is not None]
    if not rated:
        return None
    top = max(rho for rho, _ in rated)
    a = next(app for rho, app in rated if rho == top)  # the first, as max() would pick
    return {"app_id": a.app_id, "jobs": a.jobs, "rho": _plain(a.rho), "act_s": _plain(a.act_s),
            "isolated_act_s": _plain(a.isolated_act_s)}  # fmt: skip


def _plain(value: Any) -> Any:
    """JSON- and CSV-safe: NaN and infinities as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- the output folder ------------------------------------------------------------------------


@dataclass
class SweepStore:
    """``DIR/cells/<key>.json`` per finished cell, ``DIR/summary.csv``, ``DIR/figures/``."""

    root: Path
    _done: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        try:
            (self.root / "cells").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"--out {self.root}: cannot create it ({exc.strerror})") from None
        self._done = {r["key"] for r in self.rows() if r.get("status") == "ok"}

    def done(self, cell: SweepCell) -> bool:
        """Finished before (a failed cell runs again)."""
        return cell.key in self._done

    def put(self, row: Mapping[str, Any]) -> None:
        path = self.root / "cells" / f"{row['key']}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(row, sort_keys=True, allow_nan=False))
        os.replace(tmp, path)
        if row.get("status") == "ok":
            self._done.add(str(row["key"]))

    def rows(self, cells: Iterable[SweepCell] | None = None) -> list[dict[str, Any]]:
        """Every stored row (or those of ``cells``, in their order)."""
        folder = self.root / "cells"
        if cells is None:
            paths = sorted(folder.glob("*.json"))
        else:
            paths = [folder / f"{c.key}.json" for c in cells]
        rows = []
        for path in paths:
            try:
                rows.append(json.loads(path.read_text()))
            except FileNotFoundError:
                continue
            except (OSError, json.JSONDecodeError):
                continue  # a damaged cell file is a cell to run again
        return rows

    def write_summary(self, cells: Sequence[SweepCell]) -> Path:
        """``summary.csv``: one row per cell of this sweep, in grid order, with the columns
        of the (first) cell's kind."""
        path = self.root / "summary.csv"
        headers = list(type(cells[0]).SUMMARY_HEADERS if cells else Cell.SUMMARY_HEADERS)
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, headers, extrasaction="ignore")
            writer.writeheader()
            for row in self.rows(cells):
                writer.writerow(row)
        return path


def run_serial(
    cells: Sequence[SweepCell],
    store: SweepStore,
    *,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """The cells not yet done, one after another in this process (the baseline engine); each
    row is stored as it finishes, then handed to ``on_row``."""
    rows = []
    for cell in cells:
        if store.done(cell):
            continue
        row = cell.run()
        store.put(row)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
