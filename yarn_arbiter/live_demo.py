"""``yarn-arbiter demo``: the arbiter served standalone with example application masters.

Starts the gRPC arbiter in-process on a free port (a temporary journal, short leases so that
many rounds happen in half a minute), launches several :class:`HyperbandAM` example AMs with
different GPU demands, each bidding through the Agent library over a real socket, shows
progress, and ends with a table: rounds bid, leases won (auction / leftover), GPU-seconds held,
completion time, realised finish-time fairness ρ and best validation loss.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from arbiter.cluster import Cluster
from arbiter.config import load_config
from arbiter.examples.hyperband_am import HyperbandAM
from arbiter.server import RunningArbiter
from arbiter.tables import format_table

__all__ = ["run_live_demo"]

DEMANDS = (2, 4, 4, 8, 8, 16, 16, 32)


def run_live_demo(
    cluster: Cluster, *, apps: int, seconds: float, lease_seconds: float, out=sys.stdout
) -> list[HyperbandAM]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "ARBITER_GRPC_PORT": "0",
            "ARBITER_JOURNAL_PATH": str(Path(tmp) / "journal.db"),
            "ARBITER_LEASE_SECONDS": str(lease_seconds),
            "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "5",
            "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.1",
            "ARBITER_BID_DEADLINE_SECONDS": "0.5",
        }
        arbiter = RunningArbiter(cluster, load_config(environ=env), admin_token="demo").start()
        print(
            f"arbiter serving {cluster.name} ({cluster.num_gpus} GPUs) on port {arbiter.port}; "
            f"{apps} Hyperband AMs bidding for {lease_seconds:g}-second leases",
            file=out,
        )
        ams = [
            HyperbandAM(
                f"localhost:{arbiter.port}",
                name=f"hyperband-{k}",
                max_gpu_demand=DEMANDS[k % len(DEMANDS)],
                cluster_gpus=cluster.num_gpus,
                n_avg=float(apps),
                iters_per_phase=(40 * (1 + k % 3), 80 * (1 + k % 3), 160 * (1 + k % 3)),
                seed=k,
            ).start()
            for k in range(apps)
        ]
        start = time.time()
        try:
            while time.time() - start < seconds and not all(a.finished for a in ams):
                time.sleep(1.0)
                done = sum(a.finished for a in ams)
                held = sum(len(a.agent.held()) for a in ams)
                bar = "#" * int(30 * done / len(ams))
                rnd = arbiter.core.state.round
                print(
                    f"\r[{bar:<30}] t={time.time() - start:4.0f}s round {rnd:4d}"
                    f"  finished {done}/{len(ams)}  GPUs leased {held:3d}",
                    end="",
                    file=out,
                    flush=True,
                )
            print(file=out)
        finally:
            for a in ams:
                a.stop()
            arbiter.stop(0)
    rows = []
    for a in ams:
        hist = a.agent.history
        gpu_s = sum(len(x.gpus) * (x.end - x.start) for x in hist)
        won = sum(x.source == "auction" for x in hist)
        rows.append(
            [
                a.name,
                str(a.agent.max_gpu_demand),
                str(len(a.agent.rounds_bid)),
                f"{won} / {len(hist) - won}",
                f"{gpu_s:.0f}",
                f"{a.finished_at - a.started:.1f}" if a.finished_at else "running",
                f"{a.final_rho:.2f}" if a.final_rho is not None else "-",
                f"{a.best_loss:.3f}" if a.best_loss is not None else "-",
            ]
        )
    print(
        format_table(
            [
                "app",
                "demand",
                "rounds bid",
                "leases auction/leftover",
                "GPU-s leased",
                "finished (s)",
                "rho",
                "best val loss",
            ],
            rows,
        ),
        file=out,
    )
    return ams
