"""AFS's headline claims in our simulator (seed 004, spec ``afs.md`` §9).

The paper (abstract L24, §5.2 L328) reports average-JCT reductions of AFS of up to 2.2x over
Themis, 2.7x over SRTF and 3.1x over Tiresias-L, in simulation of 11 Microsoft Philly
virtual-cluster traces on a 64-GPU cluster (16 servers x 4 GPUs, L311 and Fig. 13's caption),
each job given one of nine models with a measured throughput curve, trained BSP with a fixed
global batch (L313). In the paper SRTF is compared with AFS-L (length-aware) and Themis and
Tiresias-L with AFS-P (length-unaware, Fig. 5); the first three records pair AFS-L with each of
SRTF, Themis and Tiresias, two more pair AFS-P with Themis and Tiresias as Fig. 5 does, and one
pairs AFS-P with SRTF (the length-unaware AFS against a baseline that knows lengths; the paper
reports no such ratio, so its ``paper_ratio`` is None).

Closest shipped workload: Pollux's ``workloads*/workload-N.csv`` on ``nodes:16:4``, the same
cluster shape. Each has 160 jobs (240 at 1.5x load) sampled from the Philly trace, every job one
of six profiled models whose Pollux perf model gives its throughput on any GPU count at a fixed
global batch (:class:`arbiter.sim.perf.PolluxModel`): a measured throughput curve, which is
what AFS needs. The Philly trace itself is not used: its jobs are rated per whole gang (work =
seconds on the requested GPUs), so every throughput curve is flat and elasticity cannot be
modelled. Quick: workload-6 at load 1.0. Full: workloads 1-8 at loads 1.0 and 1.5.

* ``our_ratio`` = baseline average JCT / AFS average JCT on the trace where AFS gains most (the
  paper's "up to"); ``our_ratio_geomean`` and ``per_trace`` give the rest. > 1: AFS wins.
* AFS mode: elastic (the registry's default, ``arbiter/policies/afs.py``): a job runs on any
  share up to its gang at its measured rate. ``--mode gang`` runs the non-elastic ablation, in
  which Algorithm 1 degenerates to shortest-remaining-time first (AFS-L) and quantum-limited
  processor sharing (AFS-P) over whole gangs.
* AFS-P's counter unit: the paper's 2 h for full-scale Philly traces, scaled as its fn. 11 says
  to the workload's scale: Pollux jobs average 1.6k s alone on their GPUs against 13.1k s for
  Philly jobs, so 2 h / 8 = 900 s.
* Tiresias: one threshold of 16 GPU-hours (57,600 GPU-s), the setting of Pollux's own Tiresias
  baseline on these workloads (petuum/adaptdl osdi21-artifact ``simulator/tiresias.py``,
  ``queue_threshold = 3600 * 16``), whose published average JCT (3,470 s on workload-6, 4,038 s
  over workloads 1-8, shared data README) is our reference. The thesis's simulation default
  (2, 1 h) was chosen so that 1 GPU-h "can cover more than 60 % of all the jobs" (L1459) of its
  Philly trace; on these workloads it covers 34-46 % (39 % over workloads 1-8; the median job
  needs 1.6 GPU-h), so Q_2 holds most jobs FIFO by first start and the three long ImageNet gangs
  (24-48 GPUs, 16k-29k s) that start on arrival block every later job: 8,446 s on workload-6,
  8,339 s over workloads 1-8, worse than FIFO (6,109 s on workload-6). 16 GPU-h covers 97-100 %
  and gives 3,231 s / 3,519 s. Threshold sweep over workloads 1-8 (mean avg JCT): 1 h 8,339 s,
  2 h 6,758, 4 h 4,843, 8 h 4,474, 16 h 3,519, 32 h 3,687. Each record also carries the (2, 1 h)
  number (``tiresias_1h_avg_jct_s``).
* Baselines come from the registry (``make_policy``); a baseline that fails to build or run is
  an error, not a missing record.

Usage: ``python benchmarks/repro_afs.py [--quick] [--mode elastic|gang] [--out PATH]
[--engine serial|spark] [--master local[N]|yarn] [--sweep-out DIR]`` (the runs are sweep cells,
:mod:`repro_sweep`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from arbiter.sim.sweep import Cell, grid
from arbiter.tables import format_table

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_sweep import Rows, add_engine_args, row, run_cells

CLUSTER = "nodes:16:4"
QUANTUM_S = 900.0  # module docstring
POLLUX_TIRESIAS_W6 = 3469.7  # s, Pollux's published Tiresias on workload-6 (data README)
POLLUX_TIRESIAS_MEAN = 4038.0  # s, the same over workloads 1-8 at load 1.0 (data README)
TIRESIAS_KNOBS = {"thresholds": (3600.0 * 16,)}  # Pollux's Tiresias (module docstring)
CLAIMS = (  # claim, AFS policy, baseline, paper ratio (abstract L24, L38, §5.2 L328)
    ("afs-l vs themis avg JCT", "afs-l", "themis", 2.2),
    ("afs-l vs srtf avg JCT", "afs-l", "srtf", 2.7),
    ("afs-l vs tiresias avg JCT", "afs-l", "tiresias", 3.1),
    ("afs-p vs themis avg JCT", "afs-p", "themis", 2.2),
    ("afs-p vs tiresias avg JCT", "afs-p", "tiresias", 3.1),
    ("afs-p vs srtf avg JCT", "afs-p", "srtf", None),  # not in the paper
)


def traces(quick: bool) -> list[str]:
    if quick:
        return ["pollux/workloads/workload-6.csv"]
    return [f"pollux/{d}/workload-{k}.csv" for d in ("workloads", "workloads-1.5")
            for k in range(1, 9)]  # fmt: skip


def _knobs(name: str, elastic: bool) -> dict:
    if name.startswith("afs"):
        return {"elastic": elastic, **({"quantum_s": QUANTUM_S} if name == "afs-p" else {})}
    return dict(TIRESIAS_KNOBS) if name == "tiresias" else {}


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _cells(quick: bool, mode: str) -> dict[str, dict[str, Cell]]:
    """Trace -> label -> cell: every policy the claims need, and ``tiresias-1h`` (the thesis's
    (2, 1 h) default, for the record), seed 0 on ``CLUSTER``."""
    if mode not in ("gang", "elastic"):
        raise ValueError(f"mode must be elastic or gang, got {mode!r}")
    elastic = mode == "elastic"
    names = sorted({c[1] for c in CLAIMS} | {c[2] for c in CLAIMS})
    out: dict[str, dict[str, Cell]] = {}
    for trace in traces(quick):
        labelled = {
            name: grid([trace], [name], [0], [CLUSTER], knobs={name: [_knobs(name, elastic)]})[0]
            for name in names
        }  # fmt: skip
        labelled["tiresias-1h"] = grid([trace], ["tiresias"], [0], [CLUSTER])[0]
        out[trace] = labelled
    return out


def cells(quick: bool = False, mode: str = "elastic") -> list[Cell]:
    return [c for row in _cells(quick, mode).values() for c in row.values()]


def measure(rows: Rows, quick: bool = False, mode: str = "elastic") -> dict:
    """Average JCT of every policy the claims need, per trace, from the cells' rows."""
    return {
        "elastic": mode == "elastic",
        "traces": {
            trace: {label: row(rows, cell)["avg_jct_s"] for label, cell in labelled.items()}
            for trace, labelled in _cells(quick, mode).items()
        },
    }


def claims(
    quick: bool = False, args: argparse.Namespace | None = None, *, mode: str = "elastic"
) -> list[dict]:
    """One record per claim (module docstring): claim, trace, paper_ratio, our_ratio, note, and
    mode, our_ratio_geomean, per_trace, afs_avg_jct_s, baseline_avg_jct_s; the runs are sweep
    cells on the engine ``args`` names (serial without)."""
    return claims_from_rows(run_cells(cells(quick, mode), args), quick, mode=mode)


def claims_from_rows(rows: Rows, quick: bool = False, *, mode: str = "elastic") -> list[dict]:
    m = measure(rows, quick, mode)
    elastic = m["elastic"]
    trace_label = ", ".join(m["traces"]) + f" on {CLUSTER}"
    records = []
    for claim, afs, base, paper in CLAIMS:
        rows = m["traces"]
        ratios = {t: r[base] / r[afs] for t, r in rows.items()}
        rec = {
            "claim": claim,
            "trace": trace_label,
            "paper_ratio": paper,
            "our_ratio": max(ratios.values()),
            "mode": "elastic" if elastic else "gang",
            "our_ratio_geomean": _geomean(list(ratios.values())),
            "per_trace": ratios,
            "afs_avg_jct_s": _mean([r[afs] for r in rows.values()]),
            "baseline_avg_jct_s": _mean([r[base] for r in rows.values()]),
            "note": _note(base, afs, elastic, len(ratios)),
        }
        if base == "tiresias":
            rec["tiresias_1h_avg_jct_s"] = _mean([r["tiresias-1h"] for r in rows.values()])
            rec["note"] += _tiresias_reference(rows)
        records.append(rec)
    return records


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _tiresias_reference(rows: dict) -> str:
    w6 = rows.get("pollux/workloads/workload-6.csv")
    base = [rows[t] for t in rows if t.startswith("pollux/workloads/")]
    text = (
        f" Reference: Pollux's published Tiresias (same 16 GPU-h threshold) averages "
        f"{POLLUX_TIRESIAS_W6:,.0f} s on workload-6 and {POLLUX_TIRESIAS_MEAN:,.0f} s over "
        "workloads 1-8 at load 1.0 (shared data README);"
    )
    if w6:
        text += f" ours {w6['tiresias']:,.0f} s on workload-6"
    if len(base) == 8:
        text += f", {_mean([r['tiresias'] for r in base]):,.0f} s over workloads 1-8"
    text += (
        " (Pollux schedules every 60 s and charges 30 s per (re)start, which we do not). With "
        "the thesis's simulation default (2, 1 h), which covers only 34-46 % of these jobs "
        "against its 'more than 60 %' of Philly's (L1459), tiresias averages "
        f"{_mean([r['tiresias-1h'] for r in rows.values()]):,.0f} s over these traces"
    )
    if w6:
        text += f" ({w6['tiresias-1h']:,.0f} s on workload-6)"
    return text + ": long gangs that started early block Q_2 (module docstring)."


def _note(base: str, afs: str, elastic: bool, n: int) -> str:
    parts = [
        f"our_ratio is the best of {n} trace(s) (the paper's 'up to' is the best of 11 Philly "
        "traces at full scale, average JCTs of days); Pollux workloads are 8-hour, 160-240-job "
        "samples at load 1.0-1.5, so contention, and what elasticity can win, is smaller.",
        "Shares are capped at the requested GPUs (the gang); the paper lets a job grow to its "
        "model's peak (Table 4). Reconfiguration is free in both (CoDDL: 4 ms, L279).",
    ]
    if not elastic:
        parts.append(
            "GANG MODE (--mode gang, the non-elastic ablation): AFS's rule (3) never fires: "
            "afs-l is preemptive SRTF with backfilling, afs-p processor sharing with a quantum."
        )
    if base == "themis":
        parts.append(
            "Themis: our auction with 10-minute leases, f = 0.8; the paper does not say how it "
            "ran Themis (spec §11). Its leftover GPUs go to whole gangs only (no elasticity)."
        )
    elif base == "srtf":
        parts.append("SRTF: the registry's srtf (non-elastic, whole gangs).")
        if afs == "afs-p":
            parts.append(
                "The paper compares SRTF with AFS-L only (2.7x); AFS-P does not know job "
                "lengths, SRTF does, so no paper ratio."
            )
    else:
        parts.append(
            "Tiresias: the registry's tiresias (discretised 2D-LAS, non-elastic, 2 queues, "
            "threshold 16 GPU-h as in Pollux's Tiresias on these workloads), standing in for "
            "Tiresias-L."
        )
    if afs == "afs-p":
        parts.append(f"AFS-P counter unit {QUANTUM_S:.0f} s (2 h scaled to the workload).")
    return " ".join(parts)


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one workload (< 60 s)")
    ap.add_argument("--mode", default="elastic", choices=("elastic", "gang"))
    ap.add_argument("--out", type=Path, help="also write the records as JSON here")
    add_engine_args(ap)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    records = claims(args.quick, args, mode=args.mode)
    print(
        format_table(
            ["claim", "paper", "ours (best)", "ours (geomean)", "AFS avg JCT s",
             "baseline avg JCT s", "mode"],
            [
                [r["claim"], _fmt(r["paper_ratio"]), _fmt(r["our_ratio"]),
                 _fmt(r["our_ratio_geomean"]), f"{r['afs_avg_jct_s']:,.0f}",
                 "-" if r["baseline_avg_jct_s"] is None else f"{r['baseline_avg_jct_s']:,.0f}",
                 r["mode"]]
                for r in records
            ],
        )
    )  # fmt: skip
    print(f"\ntraces: {records[0]['trace']}")
    for r in records:
        print(f"- {r['claim']}: {r['note']}")
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
