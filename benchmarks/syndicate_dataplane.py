"""Comm-comm overlap on the CPU data plane, with and without rate-limited channels (spec §6.5,
§6.6 "Comm-comm overlap beats serial (S-Exec effect) ... relatively: in the simulator and on
rate-limited loopback"; thesis T:1764-1769).

Four rank processes on loopback run a job of two comm-ops per iteration, an all-reduce (ring)
and an all-to-all (1-way), sized so that the all-to-all on the ``cpu`` channel takes about as
long as the all-reduce on ``gpu``. Three plans, all installed by two-phase commit:

* ``fifo``: plan version 0, the comm-ops one at a time in submission order, both on ``gpu``
  (T:1674);
* ``one-channel``: an enforcer order interleaving the two ops' motifs, both on ``gpu``;
* ``two-channel``: the same order with the all-to-all on ``cpu`` (S-Exec's move: AR on
  NCCL/GPU, AA on UCC/CPU, disjoint channels).

each on a **paced** mesh (token buckets at the testbed's 12.5 : 3.125 scale-out ratio, scaled
down: :func:`syndicate.dataplane.pacing.scaled_rates`) and an **unpaced** one (loopback speed:
the channels contend for the same two cores). Reported: the median iteration (the slowest
rank's) once the plan is active, and each plan's speed-up over ``fifo`` in the same mesh.
Every collective is checked against the reference by the ranks themselves.

Usage: ``PYTHONPATH=. python benchmarks/syndicate_dataplane.py [--quick] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import sys
import time
from pathlib import Path

from arbiter.localhost import free_ports
from arbiter.tables import format_table
from syndicate.dataplane.node import Coordinator, RankConfig, run_rank
from syndicate.dataplane.pacing import scaled_rates
from syndicate.dataplane.protocol import InstalledPlan
from syndicate.motifs import CommOp, ExecOption, expand

RESULTS = Path(__file__).resolve().parent / "results"
N = 4
GPU_RATE = 10e6  # bytes/s per rank and direction on `gpu` (`cpu`: a quarter of it)


def _ops(scale: float) -> tuple[CommOp, ...]:
    # int64 elements. A ring AR moves 2(N-1)/N of its payload per rank; the AA 3 of its 4
    # rows. Sized so AR on gpu ~ AA on cpu (at a quarter of the rate): 2*(3/4)*ar/G = 3*aa/(G/4).
    aa = int(12_000 * scale)
    ar = 8 * aa
    return (CommOp("ar", "AR", ar, N, 8), CommOp("aa", "AA", aa, N, 8))


def _plan(ops: tuple[CommOp, ...], aa_channel: str) -> InstalledPlan:
    options = {"ar": ExecOption("ring"), "aa": ExecOption("aa", channel=aa_channel)}
    chains = [[m.id for m in expand(op, options[op.name])] for op in ops]
    order: list[str] = []
    while any(chains):
        for chain in chains:
            if chain:
                order.append(chain.pop(0))
    return InstalledPlan(1, options, tuple(order))


def run(plan: InstalledPlan | None, cfg: RankConfig) -> dict[str, object]:
    """One job: install ``plan`` (None: stay FIFO) at iteration 1, run, and time it."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    chosen = free_ports(2 * N)  # distinct: mesh and control listeners of every rank
    ports, ctl = chosen[:N], chosen[N:]
    procs = [
        ctx.Process(target=run_rank, args=(r, ports, ctl[r], cfg.to_dict(), out), daemon=True)
        for r in range(N)
    ]
    for p in procs:
        p.start()
    try:
        coord = Coordinator(ctl)
        while min(coord.status()) < 1:
            time.sleep(0.01)
        active = coord.propose(plan) if plan is not None else 0
        coord.close()
        reports = [out.get(timeout=600) for _ in range(N)]
    finally:
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.kill()
    bad = [(r["rank"], r["errors"][:2]) for r in reports if not r["ok"]]
    if bad or active is None:
        raise RuntimeError(f"the job failed: {bad or 'the plan was not committed'}")
    first = int(active) + 1
    slowest = [
        max(r["iter_s"][k] for r in reports) for k in range(first, cfg.iterations)
    ]  # fmt: skip
    return {"median_iter_ms": 1e3 * statistics.median(slowest), "iterations": len(slowest)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations, a third of the payload")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--scale", type=float, default=None, help="payload scale (default 3, quick 1)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    iterations = args.iterations or (12 if args.quick else 30)
    scale = args.scale or (1.0 if args.quick else 3.0)
    ops = _ops(scale)
    out_path = args.out or RESULTS / (
        "syndicate_dataplane_quick.json" if args.quick else "syndicate_dataplane.json"
    )
    plans = {"fifo": None, "one-channel": _plan(ops, "gpu"), "two-channel": _plan(ops, "cpu")}
    meshes = {"paced": scaled_rates(GPU_RATE), "unpaced": None}
    rows, records = [], []
    for mesh, rates in meshes.items():
        cfg = RankConfig(ops, iterations=iterations, compute_s=0.0, jitter_s=0.0, rates=rates)
        got = {}
        for name, plan in plans.items():
            t0 = time.perf_counter()
            got[name] = run(plan, cfg)
            print(f"{mesh} {name}: {got[name]['median_iter_ms']:.1f} ms/iteration "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)  # fmt: skip
        base = float(got["fifo"]["median_iter_ms"])  # type: ignore[arg-type]
        for name, r in got.items():
            ms = float(r["median_iter_ms"])  # type: ignore[arg-type]
            records.append({"mesh": mesh, "plan": name, "rates": rates, **r,
                            "speedup_vs_fifo": base / ms})  # fmt: skip
            rows.append([mesh, name, f"{ms:.1f}", f"{base / ms:.2f}x"])
    print(format_table(["mesh", "plan", "median iteration (ms)", "vs fifo"], rows))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({
        "ranks": N, "iterations": iterations,
        "ops": [{"name": o.name, "kind": o.kind, "size": o.size} for o in ops],
        "scale": scale, "gpu_rate_bytes_per_s": GPU_RATE, "machine": platform.machine(),
        "cpus": mp.cpu_count(), "records": records,
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
