"""Themis vs LAS vs FIFO on a Philly-derived workload with placement-sensitive jobs.

The Themis paper's claim (P:412, spec B.11): Themis's max ρ is 2.25x better than Tiresias-style
LAS, with about the same GPU time on 1-2 GPU jobs and up to 250 % better efficiency on
placement-sensitive ones. This benchmark replays, on the Themis testbed cluster
(``themis-testbed``: 64 K80 GPUs on 20 machines, 1-4 GPUs each):

* Philly jobs arriving in days 40-42 (the busiest stretch), 30 min to 1 day long, 1-8 GPUs,
  sampled (seeded) to an offered load of 1.0;
* each job's placement sensitivity measured: the Pollux model of its GPU-time class
  (:mod:`arbiter.sim.perf`);
* ``fifo``, ``las`` (360 s rounds) and ``themis`` (10-minute leases) at the paper's f = 0.8,
  plus f = 0.9 and 0.95 to show the fairness knob's effect (the paper's own sensitivity study,
  T:1302).

Reported beside the paper: max ρ of LAS / max ρ of Themis (paper 2.25), GPU time of Themis /
LAS, avg ρ, avg JCT, placement score. All runs share one isolated run (the ρ denominator).

The runs are sweep cells (:mod:`repro_sweep`): ``--engine spark`` / ``--master local[N]|yarn``
run them as Spark tasks, ``--sweep-out DIR`` keeps them (a rerun resumes).

Usage: ``python benchmarks/sim_themis.py [--quick] [--out PATH] [--engine serial|spark]
[--master local[N]|yarn] [--sweep-out DIR]`` (``--quick``: a 12-hour window, f = 0.8 only).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from arbiter.cluster import load_cluster
from arbiter.sim.sweep import SUMMARY_FIELDS, grid
from arbiter.tables import format_table

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_sweep import add_engine_args, row, run_cells

RESULTS = Path(__file__).resolve().parent / "results"
PAPER_MAX_RHO_GAIN = 2.25
LOAD = {"max_gpus": 8, "min_duration_s": 1800, "max_duration_s": 86400}  # the jobs (docstring)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cluster", default="themis-testbed")
    ap.add_argument("--load", type=float, default=1.0, help="offered load (default 1.0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    add_engine_args(ap)
    args = ap.parse_args(argv)

    days = 0.5 if args.quick else 2.0
    window = (40 * 86400.0, (40 + days) * 86400.0)
    configs = [("fifo", {}), ("las", {})] + [
        (f"themis f={f}", {"fairness_knob": f})
        for f in ((0.8,) if args.quick else (0.8, 0.9, 0.95))
    ]
    # One sweep cell per configuration: the same jobs (seeded sample), one shared isolated run.
    labelled = {
        label: grid(
            ["philly/philly.csv"], [label.split()[0]], [args.seed], [args.cluster],
            knobs={label.split()[0]: [knobs]}, window=window, target_load=args.load, load=LOAD,
        )[0]
        for label, knobs in configs
    }  # fmt: skip
    got = run_cells(list(labelled.values()), args)
    cluster = load_cluster(args.cluster)
    rows = []
    for label, cell in labelled.items():
        r = row(got, cell)
        rows.append({"label": label, "policy": cell.policy, "cluster": cluster.name,
                     **{k: r[k] for k in SUMMARY_FIELDS}, "wall_s": r["wall_s"]})  # fmt: skip
    jobs = rows[0]["jobs"]
    print(f"{jobs} jobs on {cluster.name} ({cluster.num_gpus} GPUs)", file=sys.stderr)
    las = next(r for r in rows if r["label"] == "las")
    for r in rows:
        r["max_rho_gain_vs_las"] = las["max_rho"] / r["max_rho"]
        r["gpu_time_vs_las"] = r["gpu_time_s"] / las["gpu_time_s"]
    print(
        format_table(
            ["policy", "avg JCT s", "avg ρ", "max ρ", "LAS max ρ / max ρ", "GPU time / LAS",
             "placement", "wall s"],
            [
                [r["label"], f"{r['avg_jct_s']:,.0f}", f"{r['avg_rho']:.2f}",
                 f"{r['max_rho']:.2f}", f"{r['max_rho_gain_vs_las']:.2f}",
                 f"{r['gpu_time_vs_las']:.3f}", f"{r['placement_score']:.3f}",
                 f"{r['wall_s']:.0f}"]
                for r in rows
            ],
        )
    )  # fmt: skip
    print(f"paper: Themis's max ρ {PAPER_MAX_RHO_GAIN}x better than LAS (P:412)")
    out = args.out or RESULTS / ("sim_themis_quick.json" if args.quick else "sim_themis.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": platform.platform(),
        "cluster": cluster.name,
        "jobs": jobs,
        "window_s": window,
        "load": args.load,
        "paper_max_rho_gain": PAPER_MAX_RHO_GAIN,
        "runs": rows,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
