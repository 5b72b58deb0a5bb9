"""Tiresias's headline simulation claim in our simulator: Tiresias-L (and -G) vs YARN-CS avg JCT.

The claim (seed 002, Table 3.6, L1430-1439; spec/tiresias.md §5.6): on the Microsoft (Philly)
trace, Tiresias-L's average JCT is 2.41x better than YARN-CS's; Tiresias-G's is 0.97x of
Tiresias-L's, i.e. 2.41 / 0.97 = 2.48x better than YARN-CS. The median ratio (30.85x) comes from
the same runs and is reported too.

Setup (our choices; the thesis names neither the cluster size nor the replayed span):

* **Trace.** Philly (``philly/philly.csv``, the public version of the thesis's trace), the
  busiest fortnight, days 35-49 (26,691 jobs: 25,796 of 1 GPU, the largest 16), replayed at its
  own arrival times and durations: no resampling.
* **Cluster.** ``nodes:78:8`` (624 GPUs on 8-GPU servers, as Philly's 2017 servers; offered
  load 0.89). The size is calibrated on the *baseline*, not on the claim: with it ``yarn-cs``'s
  average queueing delay (3,593 s) is the closest, among the sizes measured, to the 4,102 s the
  thesis reports for the production cluster (L935): 576 GPUs gave 7,251 s, 608 gave 5,495 s,
  640 gave 2,751 s.
* **Model.** Each Philly job runs its measured duration on an ideal placement and gets the
  placement sensitivity of a Pollux-profiled model of its GPU-time class
  (:mod:`arbiter.sim.perf`); preemption is free, as in the thesis's simulator (L1423).
* **Policies.** ``yarn-cs`` (our Capacity-Scheduler model: one queue per Philly virtual cluster,
  containers granted one GPU at a time and hoarded; the thesis's baseline is non-preemptive FIFO
  with strict consolidation); ``tiresias`` and ``tiresias-gittins`` with the paper's simulation
  defaults (2 queues, 1 h GPU-time threshold, no promotion; 𝔻 = the reference simulator's
  ``yarn-gput1000.csv``); ``las`` (continuous least attained service, 360 s rounds) for context.
* ``quick`` replays the same fortnight sampled (seeded) to the same offered load on the reference
  simulator's cluster (``n32g4.csv``: ``nodes:32:4``, 128 GPUs): a smaller, noisier replica
  (about 30 s here).

``our_ratio`` = avg JCT of yarn-cs / avg JCT of the policy (> 1: Tiresias wins, as in the paper).

Measured here (full run, about 9 minutes on this shared 2-core machine): tiresias 1.23x,
tiresias-gittins 1.23x, median 2.26x; quick 1.36x / 1.36x / 2.98x. Tiresias wins, by much less
than the paper. The ratio depends mostly on contention: on days 35-42 alone it was 1.69x on
512 GPUs (yarn-cs queueing 12,950 s), 1.08x on 640 and 1.04x on 768.

Usage: ``python benchmarks/repro_tiresias.py [--quick] [--out PATH] [--engine serial|spark]
[--master local[N]|yarn] [--sweep-out DIR]`` (the runs are sweep cells, :mod:`repro_sweep`;
prints a table; ``--out`` also writes the records as JSON).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from arbiter.cluster import shorthand_cluster
from arbiter.sim.run import load_jobs
from arbiter.sim.sweep import Cell, grid
from arbiter.tables import format_table

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from repro_sweep import Rows, add_engine_args, row, run_cells

PAPER_AVG = {"tiresias": 2.41, "tiresias-gittins": round(2.41 / 0.97, 2)}  # Table 3.6
PAPER_MEDIAN = {"tiresias": 30.85}
POLICIES = ("yarn-cs", "tiresias", "tiresias-gittins", "las")
PRODUCTION_QUEUEING_S = 4102.0  # L935: average queueing delay of all jobs in production


@dataclass(frozen=True)
class Setup:
    cluster: str
    days: tuple[float, float]
    target_load: float | None = None  # None: the trace as it arrived
    max_gpus: int | None = None

    @property
    def trace(self) -> str:
        sampled = f", sampled to load {self.target_load}" if self.target_load else ""
        return f"philly days {self.days[0]:g}-{self.days[1]:g}{sampled}, {self.cluster}"


FULL = Setup("nodes:78:8", (35.0, 49.0))
QUICK = Setup("nodes:32:4", (35.0, 49.0), target_load=0.89)


def cells(quick: bool = False) -> list[Cell]:
    """One cell per policy: the setup's Philly span on its cluster, seed 0."""
    setup = QUICK if quick else FULL
    cluster = shorthand_cluster(setup.cluster)
    return grid(
        ["philly/philly.csv"], list(POLICIES), [0], [setup.cluster],
        window=(setup.days[0] * 86400.0, setup.days[1] * 86400.0),
        target_load=setup.target_load, load={"max_gpus": setup.max_gpus or cluster.num_gpus},
    )  # fmt: skip


def _facts(setup: Setup) -> dict:
    """Facts about the workload (no simulation: the trace as the cells load it)."""
    cluster = shorthand_cluster(setup.cluster)
    jobs = load_jobs(
        "philly/philly.csv", cluster=cluster,
        time_window=(setup.days[0] * 86400.0, setup.days[1] * 86400.0),
        target_load=setup.target_load, max_gpus=setup.max_gpus or cluster.num_gpus,
    )  # fmt: skip
    span = (setup.days[1] - setup.days[0]) * 86400.0
    return {
        "jobs": len(jobs),
        "gpus": cluster.num_gpus,
        "offered_load": sum(j.work * j.gang for j in jobs) / (span * cluster.num_gpus),
    }


def _note(runs: dict, facts: dict, policy: str) -> str:
    y, p, las = runs["yarn-cs"], runs[policy], runs["las"]
    text = (
        f"{facts['jobs']} Philly jobs on {facts['gpus']} GPUs, offered load "
        f"{facts['offered_load']:.2f}; yarn-cs queues jobs {y['avg_queueing_s']:,.0f} s on "
        f"average (production: {PRODUCTION_QUEUEING_S:,.0f} s, L935), {policy} "
        f"{p['avg_queueing_s']:,.0f} s with {p['preemptions']} preemptions (free, as in the "
        f"thesis's simulator). The gain grows with contention; the thesis names neither its "
        f"cluster size nor the span it replayed, and our yarn-cs hoards containers in capacity "
        f"queues where the thesis's baseline is FIFO with strict consolidation. Q_2 (jobs past "
        f"1 GPU-h) is FIFO by first start, so long jobs that started early hold GPUs: "
        f"continuous LAS reaches {y['avg_jct_s'] / las['avg_jct_s']:.2f}x here."
    )
    if policy == "tiresias-gittins":
        text += (
            f" Gittins only reorders Q_1, and new jobs start after {p['avg_queueing_s']:,.0f} s on "
            f"average: Q_1 is rarely contended, so it tracks tiresias "
            f"({runs['tiresias']['avg_jct_s']:,.0f} s vs {p['avg_jct_s']:,.0f} s avg JCT). "
            f"Paper ratio derived: 2.41 / 0.97 (Table 3.6)."
        )
    return text


def claims(quick: bool = False, args: argparse.Namespace | None = None) -> list[dict]:
    """The records, from the cells run on the engine ``args`` names (serial without)."""
    return claims_from_rows(run_cells(cells(quick), args), quick)


def claims_from_rows(rows: Rows, quick: bool = False) -> list[dict]:
    setup = QUICK if quick else FULL
    runs = {c.policy: row(rows, c) for c in cells(quick)}
    facts = _facts(setup)
    y = runs["yarn-cs"]
    out = []
    for policy, paper in PAPER_AVG.items():
        out.append(
            {
                "claim": f"{policy} vs yarn-cs avg JCT",
                "trace": setup.trace,
                "paper_ratio": paper,
                "our_ratio": y["avg_jct_s"] / runs[policy]["avg_jct_s"],
                "note": _note(runs, facts, policy),
            }
        )
    for policy, paper in PAPER_MEDIAN.items():
        out.append(
            {
                "claim": f"{policy} vs yarn-cs median JCT",
                "trace": setup.trace,
                "paper_ratio": paper,
                "our_ratio": y["median_jct_s"] / runs[policy]["median_jct_s"],
                "note": f"median JCT yarn-cs {y['median_jct_s']:,.0f} s, {policy} "
                f"{runs[policy]['median_jct_s']:,.0f} s; same runs as the avg JCT claim.",
            }
        )
    for rec in out:
        rec["runs"] = {
            name: {k: s[k] for k in ("avg_jct_s", "median_jct_s", "p95_jct_s",
                                     "avg_queueing_s", "preemptions")}
            for name, s in runs.items()
        }  # fmt: skip
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, help="also write the records as JSON here")
    add_engine_args(ap)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    records = claims(args.quick, args)
    print(
        format_table(
            ["claim", "paper", "ours", "trace"],
            [[r["claim"], f"{r['paper_ratio']:.2f}x", f"{r['our_ratio']:.2f}x", r["trace"]]
             for r in records],
        )
    )  # fmt: skip
    for r in records:
        print(f"- {r['claim']}: {r['note']}")
    runs = records[0]["runs"]
    print(
        format_table(
            ["policy", "avg JCT s", "median JCT s", "p95 JCT s", "avg queueing s",
             "preemptions"],
            [[name, f"{s['avg_jct_s']:,.0f}", f"{s['median_jct_s']:,.0f}",
              f"{s['p95_jct_s']:,.0f}", f"{s['avg_queueing_s']:,.0f}", str(s["preemptions"])]
             for name, s in runs.items()],
        )
    )  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "machine": platform.platform(),
            "wall_s": time.perf_counter() - t0,
            "claims": records,
        }
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
