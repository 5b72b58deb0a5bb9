"""Synergy's headline claims on the shipped Synergy trace, with our simulator.

Claim: Synergy-Tune improves average JCT over GPU-proportional allocation by up to 3.4x in
simulation (128-512 GPUs, L7, L379, L406) and by 1.4-1.5x on the 32-GPU physical cluster
(Table 5: makespan 16 / 11.6 h, average JCT 4.81 / 3.21 h; spec ``synergy.md`` §10).

What is run (5-minute rounds for both sides, L32; GPU-proportional = the ordering policy
alone, Synergy = ``synergy-tune`` layered under the same policy):

* **static**: the shipped trace itself (``synergy/static_100job_6_3_1100.0.csv``: the paper's
  physical static trace, 100 single-GPU jobs, split 60-30-10, all arriving in the first 6
  minutes) on its cluster (``static_trace.ini``: 4 servers x 8 GPUs, 24 CPUs, 500 GB), FIFO.
  Makespan is Table 5's metric; Synergy-Opt (the MILP upper bound) runs here too.
* **dynamic-32**: the same 100 jobs with Poisson arrivals at 10.8 jobs/h, the rate at which
  their GPU time equals the cluster's (load 1.0; the paper keeps its physical cluster "fully
  loaded", L341); ordering SRTF as in Table 5. Its
  dynamic physical trace (split 30-60-10) is not shipped, so ours is a re-timing of the static
  one (split 60-30-10).
* **dynamic-128**: the paper's headline simulation (Fig. 9 / §5.5: FIFO, single-GPU jobs,
  9 jobs/h on 128 GPUs = 16 x (8, 24, 500), CPU:GPU 3). The shipped jobs are cycled to
  ``n`` jobs and arrive Poisson at the paper's offered load: 9 jobs/h x 16.8 h mean duration
  (spec §12 fact 12) / 128 GPUs = 1.18, i.e. 50.9 of our 2.97-GPU-hour jobs per hour. Average
  JCT over the middle 60 % of jobs by arrival (the paper's steady-state subset, L310). The
  full run adds the CPU:GPU sweep (ratios 4, 5, 6: 3x / 2.2x / 1.8x in the paper). One more
  record re-draws each job's model to the paper's simulation split 20-70-10 (image, language,
  speech; uniform within a class, as the reference's model zoo), keeping its duration at the
  proportional point: it separates the effect of the workload mix from the rest.

Sensitivities are the reference implementation's profiles (:mod:`arbiter.sim.perf`). Each
record has ``our_ratio`` = baseline / Synergy (> 1: Synergy, the paper's winner, wins here).

Usage: ``python benchmarks/repro_synergy.py [--quick] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from arbiter.cluster import shorthand_cluster
from arbiter.policies import make_policy
from arbiter.sim.engine import SimResult, simulate
from arbiter.sim.perf import SimJob, synergy_perf
from arbiter.sim.run import load_jobs
from arbiter.tables import format_table

TRACE = "synergy/static_100job_6_3_1100.0.csv"
ROUND_S = 300.0
PAPER_MEAN_H = 16.77  # mean of 10^U minutes, U ~ U[1.5,3] (p .8) / U[3,4] (p .2): spec §12
RESULTS = Path(__file__).resolve().parent / "results"


def _jobs() -> list[SimJob]:
    return load_jobs(TRACE, "synergy", synergy_sensitivity=True)


def _retime(jobs: list[SimJob], n: int, per_hour: float, seed: int) -> list[SimJob]:
    """``n`` jobs cycling through ``jobs`` (trace order), Poisson arrivals at ``per_hour``."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for k in range(n):
        base = jobs[k % len(jobs)]
        out.append(replace(base, job_id=f"{base.job_id}#{k}", app_id="", arrival_s=t))
        t += rng.expovariate(per_hour / 3600.0)
    return out


_CLASSES = (  # the reference's model zoo by task (spec §15)
    ("alexnet", "res18", "res50", "mobilenet", "shufflenet"),
    ("gnmt", "transformer", "lstm"),
    ("m5", "deepspeech"),
)


def _redraw(jobs: list[SimJob], split: tuple[int, int, int], seed: int) -> list[SimJob]:
    """``jobs`` with models re-drawn to ``split`` (percent image, language, speech); each job
    keeps its work (seconds at the proportional point)."""
    rng = random.Random(seed)
    out = []
    for j in jobs:
        x = rng.uniform(0, sum(split))
        k = 0 if x < split[0] else 1 if x < split[0] + split[1] else 2
        model = rng.choice(_CLASSES[k])
        perf = synergy_perf(model)
        out.append(replace(j, perf=perf, sensitivity=perf.sensitivity, model=model))
    return out


def _avg_jct(res: SimResult, ids: set[str] | None = None) -> float:
    rows = [r.jct_s for r in res.jobs if ids is None or r.job_id in ids]
    return sum(rows) / len(rows)


def _p99(res: SimResult) -> float:
    """Nearest-rank 99th percentile of the JCTs."""
    rows = sorted(r.jct_s for r in res.jobs)
    return rows[math.ceil(0.99 * len(rows)) - 1]


def _makespan(res: SimResult) -> float:
    return max(r.finish_s for r in res.jobs)


def _run(jobs, cluster, policy: str, **knobs) -> SimResult:
    return simulate(jobs, cluster, make_policy(policy, **knobs), round_s=ROUND_S)


def claims(quick: bool = False) -> list[dict]:
    """The records (module docstring); ``quick`` (< 60 s) skips the CPU:GPU sweep and uses
    300 instead of 1000 jobs at 128 GPUs and one arrival seed instead of three at 32."""
    jobs = _jobs()
    gpu_h = sum(j.work for j in jobs) / 3600.0  # at the proportional point
    out: list[dict] = []

    # --- static trace, FIFO (Table 5 rows 1-3) ---------------------------------------------
    c32 = shorthand_cluster("nodes:4:8:24:500")
    fifo, tune = _run(jobs, c32, "fifo"), _run(jobs, c32, "synergy-tune", order="fifo")
    opt = _run(jobs, c32, "synergy-opt", order="fifo")
    span = {k: _makespan(r) / 3600 for k, r in (("p", fifo), ("t", tune), ("o", opt))}
    out.append(
        {
            "claim": "makespan: synergy-tune vs gpu-proportional (FIFO, physical, Table 5)",
            "trace": "static, 100 jobs, 4 x (8, 24, 500)",
            "paper_ratio": round(15.67 / 11.33, 3),
            "our_ratio": round(span["p"] / span["t"], 3),
            "note": f"ours {span['p']:.2f} h -> {span['t']:.2f} h; paper simulated 15.67 -> "
            "11.33 h (deployed 16 -> 11.6, 1.38x). Same trace and cluster; our sensitivities "
            "are the reference code's profiles, not the deployed runs'.",
        }
    )
    out.append(
        {
            "claim": "makespan: synergy-opt vs synergy-tune (Tune within 4% of Opt, Table 5)",
            "trace": "static, 100 jobs, 4 x (8, 24, 500)",
            "paper_ratio": round(11.33 / 11.01, 3),
            "our_ratio": round(span["t"] / span["o"], 3),
            "note": f"ours Opt {span['o']:.2f} h vs Tune {span['t']:.2f} h; Opt is one MILP "
            "per round (LP-1 + LP-2 with integral GPUs), seeded with Tune.",
        }
    )
    avg = {k: _avg_jct(r) / 3600 for k, r in (("p", fifo), ("t", tune))}
    out.append(
        {
            "claim": "avg JCT: synergy-tune vs gpu-proportional (FIFO, static trace)",
            "trace": "static, 100 jobs, 4 x (8, 24, 500)",
            "paper_ratio": None,
            "our_ratio": round(avg["p"] / avg["t"], 3),
            "note": f"ours {avg['p']:.2f} h -> {avg['t']:.2f} h. The paper reports makespan "
            "only for the static trace; FIFO's average JCT is dominated by queueing behind "
            "jobs that started first, which Synergy speeds up only while they run.",
        }
    )

    # --- dynamic re-timing at load 1.0 on 32 GPUs, SRTF (Table 5 rows 4-9) -----------------
    order = "srtf"
    rate = c32.num_gpus / (gpu_h / len(jobs))  # jobs per hour for load 1.0
    seeds = range(1) if quick else range(3)
    ratios_avg, ratios_p99, detail = [], [], []
    for seed in seeds:
        dyn = _retime(jobs, len(jobs), rate, seed)
        base, syn = _run(dyn, c32, order), _run(dyn, c32, "synergy-tune", order=order)
        ratios_avg.append(_avg_jct(base) / _avg_jct(syn))
        ratios_p99.append(_p99(base) / _p99(syn))
        detail.append(f"{_avg_jct(base) / 3600:.2f} -> {_avg_jct(syn) / 3600:.2f} h")
    out.append(
        {
            "claim": f"avg JCT: synergy-tune vs gpu-proportional ({order.upper()}, physical)",
            "trace": f"shipped jobs, Poisson {rate:.1f}/h (load 1.0), 32 GPUs",
            "paper_ratio": round(4.81 / 3.21, 3),
            "our_ratio": round(sum(ratios_avg) / len(ratios_avg), 3),
            "note": f"mean over {len(seeds)} arrival seed(s) ({'; '.join(detail)}). Paper: "
            "4.81 -> 3.21 h on its own dynamic 30-60-10 trace, not shipped; ours re-times the "
            "60-30-10 static jobs.",
        }
    )
    out.append(
        {
            "claim": f"99p JCT: synergy-tune vs gpu-proportional ({order.upper()}, physical)",
            "trace": f"shipped jobs, Poisson {rate:.1f}/h (load 1.0), 32 GPUs",
            "paper_ratio": round(17.32 / 8.59, 3),
            "our_ratio": round(sum(ratios_p99) / len(ratios_p99), 3),
            "note": f"mean over {len(seeds)} arrival seed(s); 100 jobs, so the 99th percentile "
            "is the second-longest JCT.",
        }
    )

    # --- the headline simulation: 128 GPUs, FIFO, load of 9 jobs/h -------------------------
    n = 300 if quick else 1000
    per_hour = 9 * PAPER_MEAN_H / 128 * 128 / (gpu_h / len(jobs))
    dyn = _retime(jobs, n, per_hour, 0)
    middle = {j.job_id for j in dyn[n // 5 : n - n // 5]}
    paper = {3: 3.4, 4: 3.0, 5: 2.2, 6: 1.8}
    shipped_mix = math.nan
    for ratio in (3,) if quick else (3, 4, 5, 6):
        c128 = shorthand_cluster(f"nodes:16:8:{8 * ratio}:500")
        base, syn = _run(dyn, c128, "fifo"), _run(dyn, c128, "synergy-tune", order="fifo")
        b, s = _avg_jct(base, middle) / 3600, _avg_jct(syn, middle) / 3600
        shipped_mix = shipped_mix if ratio != 3 else b / s
        out.append(
            {
                "claim": f"avg JCT: synergy-tune vs gpu-proportional (FIFO, CPU:GPU {ratio}, "
                "simulation, 'up to 3.4x')",
                "trace": f"shipped jobs cycled to {n}, Poisson {per_hour:.1f}/h, 128 GPUs",
                "paper_ratio": paper[ratio],
                "our_ratio": round(b / s, 3),
                "note": f"ours {b:.1f} -> {s:.1f} h (middle 60 % of jobs). Paper (Fig. 9 / "
                "§5.5): 81 -> 22 h at ratio 3 on a 20-70-10 Gavel-like trace (3.68x by its own "
                "numbers); ours has 60 % image jobs, 3x shorter jobs at the same offered load "
                "(1.18), and a finite run of an overloaded queue, so the ratio depends on n.",
            }
        )
    c128 = shorthand_cluster("nodes:16:8:24:500")
    mixed = _redraw(dyn, (20, 70, 10), 1)
    base, syn = _run(mixed, c128, "fifo"), _run(mixed, c128, "synergy-tune", order="fifo")
    b, s = _avg_jct(base, middle) / 3600, _avg_jct(syn, middle) / 3600
    out.append(
        {
            "claim": "avg JCT: synergy-tune vs gpu-proportional (FIFO, CPU:GPU 3, simulation, "
            "'up to 3.4x'), paper's 20-70-10 split",
            "trace": f"shipped jobs cycled to {n}, models re-drawn 20-70-10, 128 GPUs",
            "paper_ratio": 3.4,
            "our_ratio": round(b / s, 3),
            "note": f"ours {b:.1f} -> {s:.1f} h (shipped mix, same arrivals and durations: "
            f"{shipped_mix:.2f}x). At full load Tune can only move CPUs and memory from jobs "
            "that do not need them to jobs that do (its worst case is everyone at proportional, "
            "L245; at 50-0-50 it equals proportional, L400), so the mix bounds the gain. The "
            "rest of the gap: 3x shorter jobs than the paper's, and a finite run (the paper's "
            "81 h average JCT is a queue that has grown for days).",
        }
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    records = claims(quick=args.quick)
    wall = time.perf_counter() - started
    rows = [
        [
            r["claim"],
            r["trace"],
            "-" if r["paper_ratio"] is None else f"{r['paper_ratio']:.2f}",
            f"{r['our_ratio']:.2f}",
        ]
        for r in records
    ]
    print(format_table(["claim", "trace", "paper", "ours"], rows))
    for r in records:
        print(f"- {r['claim']}: {r['note']}")
    print(f"({wall:.1f} s)", file=sys.stderr)
    out = args.out or RESULTS / ("repro_synergy_quick.json" if args.quick else "repro_synergy.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"quick": args.quick, "wall_s": wall, "claims": records}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
