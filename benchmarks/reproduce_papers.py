"""Reproduction report: each seed paper's headline comparison, rerun with our simulator.

Runs, on the shipped real traces and profiles, the claims below and prints our ratio beside the
paper's (a ratio > 1 means the paper's winner also wins here):

* Tiresias vs YARN-CS average JCT (paper: 2.41x in simulation) -- ``repro_tiresias.py``;
* AFS-L vs Themis / SRTF / Tiresias average JCT (2.2x / 2.7x / 3.1x), and AFS-P against the
  same three, with AFS elastic (its default) -- ``repro_afs.py``;
* Synergy-Tune vs GPU-proportional average JCT (up to 3.4x in simulation; 1.4-1.5x on the
  physical cluster) -- ``repro_synergy.py``;
* Themis max ρ vs Gandiva / Tiresias / Optimus (2.2x / 2.25x / 1.75x) --
  ``repro_themis_baselines.py``.

Each record names its trace and carries a ``note`` explaining a difference (model, trace, load).
Writes ``benchmarks/results/reproduce_papers.json``: a list of records with at least ``claim``,
``trace``, ``paper_ratio`` and ``our_ratio``.

**One sweep.** The simulator runs of the Tiresias, AFS and Themis parts are sweep cells
(:mod:`arbiter.sim.sweep`: trace x policy x cluster x window x seed x knobs, plus the trace's
job filter and app grouping); the report collects every part's cells, runs them as one sweep --
serially (``--engine serial``, the default) or as Spark tasks (``--engine spark``,
``--master local[N]`` or ``--master yarn``) -- into ``--sweep-out DIR`` (a rerun resumes it;
``summary.csv`` there), and computes each part's claims from the rows. The rows, and so the
records, are the same on every engine. Synergy's part stays outside the sweep: its runs replay
retimed and re-drawn copies of the static trace (``_retime``, ``_redraw``) with Synergy's
measured CPU/memory sensitivities, on ``simulate`` directly; no cell kind expresses those job
transforms, so it runs in this process as before.

Usage: ``python benchmarks/reproduce_papers.py [--quick] [--only tiresias,afs,...]
[--engine serial|spark] [--master local[N]|yarn] [--sweep-out DIR]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_sweep import add_engine_args, run_cells

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARTS = {
    "tiresias": "repro_tiresias",
    "afs": "repro_afs",
    "synergy": "repro_synergy",
    "themis": "repro_themis_baselines",
}


def report(parts: list[str], quick: bool, args: argparse.Namespace | None = None) -> list[dict]:
    """Every part's records: the sweep-able parts' cells run as one sweep on the engine ``args``
    names (serial without), their claims computed from its rows; the others run as before."""
    modules = {part: importlib.import_module(PARTS[part]) for part in parts}
    swept = [p for p in parts if hasattr(modules[p], "cells")]
    cells = [c for p in swept for c in modules[p].cells(quick)]
    t0 = time.perf_counter()
    rows = run_cells(cells, args) if cells else {}
    if cells:
        print(f"sweep: {len(cells)} cells ({', '.join(swept)}) in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)  # fmt: skip
    records: list[dict] = []
    for part in parts:
        t0 = time.perf_counter()
        if part in swept:
            got = modules[part].claims_from_rows(rows, quick)
        else:
            got = modules[part].claims(quick=quick)
        print(f"{part}: {len(got)} claims in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        records.extend({"part": part, **r} for r in got)
    return records


def _fmt(x: object) -> str:
    return "n/a" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small windows (each part < 60 s)")
    ap.add_argument("--only", help=f"comma-separated parts, from {', '.join(PARTS)}")
    ap.add_argument("--out", type=Path, default=RESULTS / "reproduce_papers.json")
    add_engine_args(ap)
    args = ap.parse_args(argv)
    parts = args.only.split(",") if args.only else list(PARTS)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown parts {unknown} (known: {', '.join(PARTS)})")
    from arbiter.tables import format_table

    records = report(parts, args.quick, args)
    rows = [
        [r["claim"], r["trace"], _fmt(r["paper_ratio"]), _fmt(r["our_ratio"]),
         "yes" if (r["our_ratio"] or 0) > 1 else "no"]
        for r in records
    ]  # fmt: skip
    print(format_table(["claim", "trace", "paper", "ours", "winner holds"], rows))
    for r in records:
        if r.get("note"):
            print(f"- {r['claim']}: {r['note']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
