"""kill -9 the served arbiter at random points under load from clients doing everything the API
allows (registering, sessions, releases, renewals, drains); after each kill, the journal left on
disk and the restarted server keep the invariants of the stateful API test: it loads (no lease
of an unknown app), no GPU is in two overlapping leases, no lease on a drained machine outlasts
its grace, drains survive, and every GPU is free, leased or drained-and-idle exactly once."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from support import REPO, free_port, wait_for
from support.api import ADMIN, SMALL, Api, md

from arbiter.journal import SQLiteJournal
from protos.yarnarbiter.v1 import arbiter_pb2 as pb


def launch(tmp_path: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "ARBITER_POLICY": "fifo",
        "ARBITER_LEASE_SECONDS": "2",
        "ARBITER_REVOCATION_GRACE_SECONDS": "0.5",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "3",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        "ARBITER_POLICY_INTERVAL_SECONDS": "0.2",
        "ARBITER_AUCTION_WORKER_PROCESS": "false",
        "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin-token"),
    }
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "nodes:2:2",
           "--port", str(port), "--journal", str(tmp_path / "journal.db")]  # fmt: skip
    return subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


def _up(port: int) -> bool:
    try:
        api = Api(port)
        api.state()
        api.close()
        return True
    except grpc.RpcError:
        return False


SEEN = {"leases": 0, "drains": 0}  # what the load did (that it did something)


def _load(port: int, stop: threading.Event, seed: int) -> None:
    """One client: registers, keeps a session, releases and renews, drains now and then."""
    rng = random.Random(seed)
    while not stop.is_set():
        api = Api(port)
        try:
            app, tok = api.register(rng.randint(1, 3), token=None)
            s = api.session(app, tok)
            for _ in range(20):
                if stop.is_set() or s.ended.is_set():
                    break
                s.send(pb.AgentMessage(heartbeat=pb.Heartbeat()))
                mine = api.leases(app)
                if mine and rng.random() < 0.5:
                    x = rng.choice(mine)
                    call = api.renew if rng.random() < 0.5 else api.release
                    SEEN["leases"] += 1
                    with contextlib.suppress(grpc.RpcError):
                        call(tok, x.lease_id)
                if rng.random() < 0.03:
                    SEEN["drains"] += 1
                    api.drain(rng.choice(["node-000", "node-001"]), rng.choice([0.0, 0.5]))
                time.sleep(rng.uniform(0.01, 0.05))
            s.close()
        except grpc.RpcError:
            time.sleep(0.05)  # the server is being killed or restarts
        finally:
            api.close()


def _check(tmp_path: Path, port: int, drained_before: set[str]) -> set[str]:
    """The journal on disk (before the restart) and the restarted server keep the invariants."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    got = journal.load(SMALL.gpu_ids)  # refuses leases of unknown apps or doubled GPUs
    journal.close()
    assert drained_before <= set(got.drained)  # a drain is never forgotten
    leases = got.state.leases
    for i, x in enumerate(leases):
        for y in leases[i + 1 :]:
            assert not (x.gpus & y.gpus and x.overlaps(y)), (x, y)
    return set(got.drained)


@pytest.mark.slow
def test_sigkill_under_load_keeps_the_invariants(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text(ADMIN + "\n")
    port = free_port()
    rng = random.Random(19)
    server = launch(tmp_path, port)
    wait_for("the server up", lambda: _up(port), timeout=30)
    stop = threading.Event()
    clients = [threading.Thread(target=_load, args=(port, stop, k), daemon=True) for k in range(4)]
    for c in clients:
        c.start()
    drained: set[str] = set()
    kills = 0
    try:
        for _ in range(6):
            time.sleep(rng.uniform(0.3, 1.5))
            server.send_signal(signal.SIGKILL)
            server.wait()
            kills += 1
            drained = _check(tmp_path, port, drained)
            server = launch(tmp_path, port)
            wait_for("the server up", lambda: _up(port), timeout=30)
            api = Api(port)
            state = api.state()
            leases = api.admin.ListLeases(pb.ListLeasesRequest(), metadata=md(admin=ADMIN)).leases
            listed = api.admin.ListApps(pb.ListAppsRequest(), metadata=md(admin=ADMIN))
            apps = {a.app_id for a in listed.apps}
            api.close()
            assert set(state.drained_machines) >= drained
            assert {x.app_id for x in leases} <= apps
            now = time.time()
            busy = {g for x in leases if x.end_unix_s > now for g in x.gpu_ids}
            free = set(state.free_gpu_ids)
            assert not free & busy
            assert not {g for g in free if g.split("/")[0] in state.drained_machines}
        assert kills == 6 and SEEN["leases"] > 0 and SEEN["drains"] > 0, SEEN
    finally:
        stop.set()
        for c in clients:
            c.join(10)
        server.send_signal(signal.SIGKILL)
        server.wait()
