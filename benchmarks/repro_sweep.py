"""The reproduction benchmarks' simulator runs as sweep cells (Themis §6's grids).

A reproduction part (``repro_tiresias.py``, ``repro_afs.py``, ``repro_themis_baselines.py``,
``sim_themis.py``) names its runs as :class:`arbiter.sim.sweep.Cell` s (``cells(quick)``) and
computes its claims from their rows (``claims_from_rows``); this module runs the cells, on the
serial engine or Spark (``local[*]`` or ``--master yarn``), into a sweep folder that a later run
resumes. The rows are the same whichever engine ran them, so the report is too. Any
:class:`arbiter.sim.sweep.SweepCell` kind runs here (QOOP's profile replays,
``qoop_profiles.py``, are another).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from arbiter.sim.sweep import SweepCell, SweepError, SweepStore
from arbiter.sim.sweep_cli import execute

Rows = Mapping[str, dict[str, Any]]


def add_engine_args(ap: argparse.ArgumentParser) -> None:
    """``--engine``, ``--master``, ``--executors``, ``--queue``, ``--hadoop-conf-dir``,
    ``--sweep-out``: where the cells run and where their rows are kept."""
    ap.add_argument("--engine", choices=("serial", "spark"), default="serial",
                    help="run the cells in this process (default) or as Spark tasks")  # fmt: skip
    ap.add_argument("--master", help="Spark master (implies --engine spark): local[N] or yarn")
    ap.add_argument("--executors", type=int, help="executors for --master yarn (default 2)")
    ap.add_argument("--queue", default="default", help="YARN queue for --master yarn")
    ap.add_argument("--hadoop-conf-dir", type=Path, help="yarn-site.xml folder for --master yarn")
    ap.add_argument("--sweep-out", type=Path,
                    help="sweep folder (cells/*.json, summary.csv): a rerun resumes it "
                         "(default: a temporary folder)")  # fmt: skip


def run_cells(
    cells: Sequence[SweepCell], args: argparse.Namespace | None = None
) -> dict[str, dict]:
    """Every cell's row by key, run on the engine ``args`` names (serial without ``args``).
    Raises SweepError naming the failed cells when any failed."""
    if args is None or (args.engine == "serial" and not args.master and not args.sweep_out):
        rows = {c.key: c.run() for c in dict.fromkeys(cells)}
    elif args.sweep_out:  # resumable, on either engine
        rows = _sweep(cells, args, Path(args.sweep_out))
    else:
        with tempfile.TemporaryDirectory(prefix="repro-sweep-") as tmp:
            rows = _sweep(cells, args, Path(tmp))
    named = {c.key: c for c in cells}
    failed = [r for r in rows.values() if r.get("status") != "ok"]
    if failed:
        raise SweepError("; ".join(f"{named[r['key']].describe()}: {r.get('error')}"
                                   for r in failed))  # fmt: skip
    return rows


def _sweep(cells: Sequence[SweepCell], args: argparse.Namespace, out: Path) -> dict[str, dict]:
    store = SweepStore(out)
    todo = [c for c in cells if not store.done(c)]
    engine = "spark" if args.master else args.engine
    master = args.master or "local[*]"
    print(f"sweep: {len(cells)} cells ({len(cells) - len(todo)} already done in {out}), "
          f"engine {engine}" + (f" on {master}" if engine == "spark" else ""),
          file=sys.stderr)  # fmt: skip
    if not todo:  # all done before: no engine to start
        return {r["key"]: r for r in store.rows(cells)}
    execute(
        todo, store, out, engine=engine, master=master, queue=args.queue,
        executors=args.executors, hadoop_conf_dir=args.hadoop_conf_dir, all_cells=cells,
    )  # fmt: skip
    store.write_summary(cells)
    return {r["key"]: r for r in store.rows(cells)}


def row(rows: Rows, cell: SweepCell) -> dict[str, Any]:
    """The cell's row (KeyError naming the cell when the sweep lacks it)."""
    try:
        return rows[cell.key]
    except KeyError:
        raise KeyError(f"no row for {cell.describe()} ({cell.key})") from None
