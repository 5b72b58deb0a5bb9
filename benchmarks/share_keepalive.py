"""A query's share stream whose arbiter froze with its connection up: how long until the
follower (:class:`hive_hooks.share.ArbiterShare`) follows the next arbiter, with the clients'
keepalive pings (:mod:`arbiter.channels`) against without them.

Two ``yarn-arbiter serve`` processes (themis-testbed) on loopback, A and B; a follower with the
addresses ``A,B`` begins a query on A; then A is stopped with SIGSTOP (a long pause, a host
gone without closing its connections) and the time is taken until the follower has registered
the query at B. **Ours:** the production pings (every ``CLIENT_KEEPALIVE_S``, answered within
as long again), K freezes. **Baseline:** no pings (the client before), one freeze, given up
after ``--cap`` seconds. A is resumed and started again between runs.

Writes ``benchmarks/results/share_keepalive.json``. Usage:
``python benchmarks/share_keepalive.py [--runs K] [--cap SECONDS]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from arbiter.channels import CLIENT_KEEPALIVE_S, MIN_PING_INTERVAL_MS
from arbiter.localhost import free_port
from arbiter.tables import format_table
from hive_hooks.share import ArbiterShare

RESULTS = Path(__file__).resolve().parent / "results"
NO_PINGS_S = 24 * 3600.0  # a ping interval no run lives to see: the client without pings


class Served:
    """``yarn-arbiter serve`` on ``port`` (a fresh journal in ``workdir``)."""

    def __init__(self, workdir: Path, port: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        for stale in workdir.glob("journal.db*"):
            stale.unlink()
        env = {**os.environ, "ARBITER_ADMIN_TOKEN": "bench-admin-token-0123456789abcdef"}
        cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "themis-testbed",
               "--port", str(port), "--metrics-port", "-1",
               "--journal", str(workdir / "journal.db")]  # fmt: skip
        self.port = port
        self.log = open(workdir / "arbiter.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_serving(self) -> None:
        with grpc.insecure_channel(self.address) as ch:
            grpc.channel_ready_future(ch).result(timeout=60)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def one_freeze(tmp: Path, b: Served, keepalive_s: float, cap_s: float) -> float | None:
    """Seconds from A's SIGSTOP until the follower registered the query at B (``None``: not
    within ``cap_s``)."""
    a = Served(tmp / "a", free_port())
    share = ArbiterShare(f"{a.address},{b.address}", user="bench", first_update_timeout=60.0)
    share.keepalive_s = keepalive_s
    try:
        a.wait_serving()
        share.begin("bench-q")
        assert share.target == a.address, share.target
        t0 = time.monotonic()
        a.proc.send_signal(signal.SIGSTOP)
        deadline = t0 + cap_s
        while time.monotonic() < deadline:
            if share.target == b.address and share.reregistrations >= 1:
                return time.monotonic() - t0
            time.sleep(0.05)
        return None
    finally:
        a.stop()  # resumed first: the follower's UnregisterQuery is answered or refused
        share.end("bench-q")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="freezes with pings (default 5)")
    ap.add_argument("--cap", type=float, default=90.0,
                    help="seconds the run without pings is given (default 90)")  # fmt: skip
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="share-keepalive-") as d:
        tmp = Path(d)
        b = Served(tmp / "b", free_port())
        try:
            print(f"without pings: 1 freeze, given up after {args.cap:g} s ...", flush=True)
            base = one_freeze(tmp, b, NO_PINGS_S, args.cap)
            print(f"  {'not moved' if base is None else f'moved after {base:.2f} s'}")
            print(f"with pings every {CLIENT_KEEPALIVE_S:g} s: {args.runs} freezes ...", flush=True)
            ours: list[float | None] = []
            for k in range(args.runs):
                ours.append(one_freeze(tmp, b, CLIENT_KEEPALIVE_S, args.cap))
                print(f"  freeze {k + 1}: "
                      f"{'not moved' if ours[-1] is None else f'moved after {ours[-1]:.2f} s'}",
                      flush=True)  # fmt: skip
        finally:
            b.stop()
    moved = sorted(x for x in ours if x is not None)

    def cell(x: float | None) -> str:
        return f"> {args.cap:g} s (not moved)" if x is None else f"{x:.2f} s"

    rows = [
        ["without pings (before)", "1", cell(base), cell(base)],
        [f"pings every {CLIENT_KEEPALIVE_S:g} s, {CLIENT_KEEPALIVE_S:g} s to answer",
         str(len(ours)), cell(moved[0] if len(moved) == len(ours) else None),
         cell(moved[-1] if len(moved) == len(ours) else None)],
    ]  # fmt: skip
    print()
    print(format_table(["share follower, its arbiter frozen", "freezes", "moved: min", "max"],
                       rows))  # fmt: skip
    out = {
        "keepalive_s": CLIENT_KEEPALIVE_S,
        "server_min_ping_interval_ms": MIN_PING_INTERVAL_MS,
        "cap_s": args.cap,
        "without_pings_moved_s": base,
        "with_pings_moved_s": ours,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "share_keepalive.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
