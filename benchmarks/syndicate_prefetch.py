"""Prefetch of the next batch's data-prep on the CPU data plane (spec §6.6 "prefetch shortens
the period ... relatively: in the simulator and on rate-limited loopback"; thesis T:1771,
T:1777; spec §3.7 fixture X3, Gap 4.3).

Four rank processes on a paced loopback mesh (:func:`syndicate.dataplane.pacing.scaled_rates`)
run a job whose iteration needs its batch before it computes (``RankConfig(data_wait=True)``):
an all-to-all ``data`` (the data-prep, 1-way), ``compute_s`` of compute, then a ring all-reduce
``ar``, all on ``gpu`` (so only the order differs from FIFO); the app's input pipeline submits
each batch's data-prep one iteration ahead. Three plans, installed by two-phase commit at
iteration 1:

* ``fifo``: plan version 0 (T:1674);
* ``plain``: data's motifs first, then ar's, each in its own iteration (δ = 0 everywhere);
* ``prefetch``: the same options and order with ``data`` at δ = +1: iteration k issues the
  next batch's data-prep, which then runs during iteration k's compute and all-reduce.

X3's arithmetic, scaled: data D, compute C, all-reduce A; plain ≈ D + C + A, prefetch ≈
max(D, C + A). Reported: the median iteration of the slowest rank once the plan runs, and the
speed-up over ``plain``. Every collective is checked against the reference by the ranks.

Usage: ``PYTHONPATH=. python benchmarks/syndicate_prefetch.py [--quick] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import sys
import time
from pathlib import Path

from arbiter.tables import format_table
from benchmarks.syndicate_dataplane import GPU_RATE, N, run
from syndicate.dataplane.node import RankConfig
from syndicate.dataplane.pacing import scaled_rates
from syndicate.dataplane.protocol import InstalledPlan
from syndicate.motifs import CommOp, ExecOption, expand

RESULTS = Path(__file__).resolve().parent / "results"


def _ops(scale: float) -> tuple[CommOp, ...]:
    # int64 elements; the AA sends 3 rows per rank: D = 0.1 s at scale 1; the ring AR moves
    # 2(N-1)/N of its payload: A = 0.05 s at scale 1 (both paced at GPU_RATE on `gpu`).
    aa = int(GPU_RATE * 0.1 / (3 * 8) * scale)
    ar = int(GPU_RATE * 0.05 / (1.5 * 8) * scale)
    return (CommOp("data", "AA", aa, N, 8), CommOp("ar", "AR", ar, N, 8))


def _plan(ops: tuple[CommOp, ...], prefetch: bool) -> InstalledPlan:
    options = {"data": ExecOption("aa"), "ar": ExecOption("ring")}
    order = tuple(m.id for op in ops for m in expand(op, options[op.name]))  # data first
    return InstalledPlan(1, options, order, frozenset({"data"} if prefetch else ()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations, half the work")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    iterations = args.iterations or (10 if args.quick else 24)
    scale = 0.5 if args.quick else 1.0
    compute_s = 0.1 * scale
    ops = _ops(scale)
    out_path = args.out or RESULTS / (
        "syndicate_prefetch_quick.json" if args.quick else "syndicate_prefetch.json"
    )
    plans = {"fifo": None, "plain": _plan(ops, False), "prefetch": _plan(ops, True)}
    rates = scaled_rates(GPU_RATE)
    cfg = RankConfig(ops, iterations=iterations, compute_s=compute_s, jitter_s=0.0, rates=rates,
                     prefetch=("data",), data_wait=True)  # fmt: skip
    got = {}
    for name, plan in plans.items():
        t0 = time.perf_counter()
        got[name] = run(plan, cfg)
        print(f"{name}: {got[name]['median_iter_ms']:.1f} ms/iteration "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)  # fmt: skip
    base = float(got["plain"]["median_iter_ms"])  # type: ignore[arg-type]
    rows, records = [], []
    for name, r in got.items():
        ms = float(r["median_iter_ms"])  # type: ignore[arg-type]
        records.append({"plan": name, **r, "speedup_vs_plain": base / ms})
        rows.append([name, f"{ms:.1f}", f"{base / ms:.2f}x"])
    print(format_table(["plan", "median iteration (ms)", "vs plain"], rows))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({
        "ranks": N, "iterations": iterations, "compute_s": compute_s,
        "ops": [{"name": o.name, "kind": o.kind, "size": o.size} for o in ops],
        "gpu_rate_bytes_per_s": GPU_RATE, "rates": rates, "machine": platform.machine(),
        "cpus": mp.cpu_count(), "records": records,
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
