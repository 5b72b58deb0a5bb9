"""``yarn-arbiter sweep``: a grid of simulator runs as a Spark job (or serially), resumable.

The shell around :mod:`arbiter.sim.sweep` (cells, results folder) and
:mod:`arbiter.sim.sweep_spark` (the Spark engine): argument parsing, progress, the summary
table and the figures.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arbiter.sim.apps import APP_KINDS
from arbiter.sim.cli import jobs_per_app_arg, window_arg
from arbiter.sim.sweep import (
    SweepCell,
    SweepError,
    SweepStore,
    grid,
    parse_knob_grid,
    run_serial,
)
from arbiter.tables import format_table

__all__ = ["add_parser", "load_options"]

_EPILOG = """\
a cell is one simulator run: trace x cluster x policy x knob setting x seed. Cells already in
--out are skipped (a killed sweep resumes where it stopped; a failed cell runs again).

output (in --out):
  cells/<key>.json   one row per finished cell (the cell and the simulator's summary)
  summary.csv        one row per cell of this sweep: trace, cluster, policy, knobs, seed, metrics
  cells.parquet/     the same rows as Parquet (Spark engine)
  figures/           per trace: max rho per app, avg JCT and max rho per job, by policy

examples:
  yarn-arbiter sweep --traces pollux/workloads/workload-6.csv,tiresias/60_job.csv \\
      --policies fifo,las,themis,tiresias --seeds 0,1,2 --out sweeps/w6
  yarn-arbiter sweep --traces philly/philly.csv --window 3456000:3628800 --target-load 1 \\
      --app-kind hyperparameter --policies themis --knobs 'themis:fairness_knob=0.8|0.9' \\
      --seeds 0 --out sweeps/f
  HADOOP_CONF_DIR=.yarn-local/etc/client yarn-arbiter sweep --master yarn ... (on YARN)

clusters default per trace: pollux/* and tiresias/60_job on nodes:16:4, other tiresias/*
on nodes:32:4, synergy/* on nodes:4:8:24:500, gavel/* on gavel:36:36:36, philly/* on
themis-testbed.
"""

_FIGURE_METRICS = (
    ("max_rho_app", "max ρ per app"),
    ("avg_jct_s", "average JCT (s)"),
    ("max_rho", "max ρ per job"),
)


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _seeds(text: str) -> list[int]:
    """``0,1,2`` or ``0-4``."""
    out: list[int] = []
    for item in _csv(text):
        low, sep, high = item.partition("-")
        try:
            out += list(range(int(low), int(high) + 1)) if sep else [int(item)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"seeds: {item!r} is not N or A-B") from None
    if not out:
        raise argparse.ArgumentTypeError("seeds: give at least one")
    return out


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: a positive, finite ``kind`` (int or float)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text!r} must be positive")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its errors
    return parse


def load_options(args: argparse.Namespace) -> dict[str, Any]:
    """The trace filters given on the command line, named as :data:`LOAD_OPTIONS` (cells
    without them keep the keys they always had)."""
    given = {
        "max_gpus": args.max_gpus,
        "min_duration_s": args.min_duration,
        "max_duration_s": args.max_duration,
    }
    return {k: v for k, v in given.items() if v is not None}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of simulations (policies x traces x seeds x knobs) on Spark",
        description="Replay traces under policies, seeds, clusters and knob settings: every "
        "combination is one simulator run (a cell), run as Spark tasks (local by default, "
        "--master yarn on a cluster) or one after another (--engine serial). Results go to "
        "--out as they finish; running the same command again skips finished cells.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--traces", required=True, type=_csv, help="comma-separated trace files")
    p.add_argument("--policies", required=True, type=_csv, help="comma-separated policies")
    p.add_argument("--seeds", type=_seeds, default=[0], help="e.g. 0,1,2 or 0-4 (default 0)")
    p.add_argument("--clusters", type=_csv, help="comma-separated clusters (default per trace)")
    p.add_argument(
        "--knobs",
        help="knob settings per policy, alternatives with |: "
        "'themis:fairness_knob=0.8|0.9,lease_s=600;tiresias:queues=2|3'",
    )
    p.add_argument("--window", type=window_arg, help="philly: arrivals in START:END seconds")
    p.add_argument("--target-load", type=float, help="philly: sample jobs to this load")
    p.add_argument("--max-jobs", type=int, help="keep only the first N jobs of each trace")
    p.add_argument(
        "--max-gpus", type=_positive(int), help="drop jobs asking for more GPUs than this"
    )
    p.add_argument(
        "--min-duration",
        type=_positive(float),
        metavar="S",
        help="philly: drop jobs shorter than S seconds",
    )
    p.add_argument(
        "--max-duration",
        type=_positive(float),
        metavar="S",
        help="philly: drop jobs longer than S seconds (Themis's filter: --max-gpus 8 "
        "--min-duration 1800 --max-duration 86400)",
    )
    p.add_argument("--app-kind", choices=APP_KINDS, default="single", help="default single")
    p.add_argument("--jobs-per-app", type=jobs_per_app_arg, default=(1, 15), metavar="A-B")
    p.add_argument("--out", required=True, type=Path, help="results folder (resumable)")
    p.add_argument(
        "--engine",
        choices=("spark", "serial"),
        default="spark",
        help="spark (default; needs pyspark) or serial (one cell after another, here)",
    )
    p.add_argument(
        "--master", default="local[*]", help="Spark master: local[*] (default), local[N], yarn"
    )
    p.add_argument("--queue", default="default", help="YARN queue for --master yarn")
    p.add_argument("--executors", type=int, help="executors for --master yarn (default 2)")
    p.add_argument(
        "--hadoop-conf-dir",
        type=Path,
        help="the cluster's client configuration for --master yarn (else $HADOOP_CONF_DIR)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    try:
        cells = grid(
            args.traces, args.policies, args.seeds, args.clusters,
            knobs=parse_knob_grid(args.knobs), window=args.window,
            target_load=args.target_load, max_jobs=args.max_jobs, app_kind=args.app_kind,
            jobs_per_app=args.jobs_per_app, load=load_options(args),
        )  # fmt: skip
        store = SweepStore(args.out)
    except SweepError as exc:
        print(f"yarn-arbiter sweep: {exc}", file=sys.stderr)
        return 2
    todo = [c for c in cells if not store.done(c)]
    print(
        f"{len(cells)} cells ({len(cells) - len(todo)} already done in {args.out}); "
        f"engine {args.engine}" + (f" on {args.master}" if args.engine == "spark" else ""),
        file=sys.stderr,
    )
    bar = _progress(len(todo), disabled=args.no_progress or not sys.stderr.isatty())

    def on_row(row: dict[str, Any]) -> None:
        bar.update(1)
        if row.get("status") != "ok":
            bar.write(f"cell {row['key']} ({row['policy']} on {row['trace']}) failed: "
                      f"{row.get('error')}", file=sys.stderr)  # fmt: skip

    try:
        parquet = execute(
            todo, store, args.out, engine=args.engine, master=args.master, queue=args.queue,
            executors=args.executors, hadoop_conf_dir=args.hadoop_conf_dir, on_row=on_row,
            all_cells=cells,
        )  # fmt: skip
    except SweepError as exc:
        bar.close()
        print(f"yarn-arbiter sweep: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        bar.close()
        print(f"interrupted; finished cells are kept in {args.out} (run again to resume)",
              file=sys.stderr)  # fmt: skip
        return 130
    bar.close()
    rows = store.rows(cells)
    print(summary_table(rows))
    print(f"wrote {store.write_summary(cells)}", file=sys.stderr)
    if parquet is not None:
        print(f"wrote {parquet}", file=sys.stderr)
    for path in plot_sweep(rows, args.out / "figures"):
        print(f"wrote {path}", file=sys.stderr)
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        print(f"{len(failed)} of {len(cells)} cells failed (see summary.csv's error column); "
              "run again to retry them", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def execute(
    cells: Sequence[SweepCell],
    store: SweepStore,
    out: Path,
    *,
    engine: str = "serial",
    master: str = "local[*]",
    queue: str = "default",
    executors: int | None = None,
    hadoop_conf_dir: Path | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    all_cells: Sequence[SweepCell] | None = None,
) -> Path | None:
    """Run the ``cells`` ``store`` has not finished on ``engine`` ("serial" or "spark" on
    ``master``); the Spark engine also writes every row of ``all_cells`` (default: ``cells``)
    as ``out/cells.parquet`` and returns its path. Raises SweepError for a bad engine setup."""
    if engine == "serial":
        run_serial(cells, store, on_row=on_row)
        return None
    if engine != "spark":
        raise SweepError(f"unknown engine {engine!r} (serial or spark)")
    if hadoop_conf_dir:
        os.environ["HADOOP_CONF_DIR"] = str(Path(hadoop_conf_dir).resolve())
    from arbiter.sim.sweep_spark import SparkSweep

    with SparkSweep(master, workdir=out / ".spark", queue_name=queue, executors=executors) as spark:
        spark.run(cells, store, on_row=on_row)
        return spark.write_parquet(store.rows(all_cells or cells), out / "cells.parquet")


def _progress(total: int, disabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="cell", disable=disabled, file=sys.stderr)


def _groups(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str, str], list[dict]]:
    """(trace, cluster, policy, knobs) -> the finished rows over seeds."""
    out: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok":
            out[(r["trace"], r["cluster"], r["policy"], r.get("knobs", ""))].append(r)
    return out


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.fmean(values) if values else math.nan


def summary_table(rows: Sequence[dict[str, Any]]) -> str:
    """One line per (trace, cluster, policy, knobs): means over the seeds."""
    headers = ["trace", "cluster", "policy", "knobs", "seeds", "avg JCT s", "max ρ",
               "max ρ (app)", "avg ACT s", "util"]  # fmt: skip
    body = []
    for (trace, cluster, policy, knobs), group in _groups(rows).items():
        body.append([
            trace, cluster, policy, knobs or "-", str(len(group)),
            _fmt(_mean(group, "avg_jct_s")), _fmt(_mean(group, "max_rho"), 2),
            _fmt(_mean(group, "max_rho_app"), 2), _fmt(_mean(group, "avg_act_s")),
            _fmt(_mean(group, "utilization"), 3),
        ])  # fmt: skip
    return format_table(headers, body)


def _fmt(value: float, digits: int = 0) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def plot_sweep(rows: Sequence[dict[str, Any]], folder: Path) -> list[Path]:
    """Per trace and metric, a bar per (policy, knobs): the mean over seeds, the range as an
    error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_trace: dict[str, list[tuple[str, list[dict]]]] = defaultdict(list)
    for (trace, cluster, policy, knobs), group in _groups(rows).items():
        label = policy + (f"\n{knobs}" if knobs else "") + f"\n{cluster}"
        by_trace[trace].append((label, group))
    if not by_trace:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace, bars in by_trace.items():
        fig, axes = plt.subplots(1, len(_FIGURE_METRICS), figsize=(5 * len(_FIGURE_METRICS), 4))
        for ax, (metric, title) in zip(axes, _FIGURE_METRICS, strict=True):
            means, lows, highs = [], [], []
            for _, group in bars:
                values = [r[metric] for r in group if r.get(metric) is not None] or [math.nan]
                m = statistics.fmean(values)
                means.append(m)
                lows.append(m - min(values))
                highs.append(max(values) - m)
            ax.bar(range(len(bars)), means, yerr=[lows, highs], capsize=3, color="#4477aa")
            ax.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=7)
            ax.set_title(title)
        fig.suptitle(trace)
        fig.tight_layout()
        name = trace.replace("/", "_").replace(os.sep, "_").rsplit(".", 1)[0]
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
