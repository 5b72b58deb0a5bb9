"""kill -9 the arbiter process at random points of a busy run; restart on the same journal.

No lease is lost or duplicated (the invariant holds for what the restarted server reports, and
every lease it had reported before the kill that has not yet expired is still there), and the
Agents reconnect and keep bidding under the same app ids.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from support import free_port, wait_for
from support.arbiter import CLUSTER, hyperband_agent

from arbiter.rounds import ArbiterState, Lease, check_invariants
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc


def launch(tmp_path: Path, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "ARBITER_LEASE_SECONDS": "3",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "20",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "0.5",
        "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin-token"),
    }
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--demo", "--port", str(port)]
    cmd += ["--journal", str(tmp_path / "journal.db")]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def leases(port: int, token: str) -> list[pb.Lease] | None:
    stub = rpc.AdminStub(grpc.insecure_channel(f"localhost:{port}"))
    try:
        reply = stub.ListLeases(
            pb.ListLeasesRequest(), metadata=[("x-admin-token", token)], timeout=1
        )
    except grpc.RpcError:
        return None
    return list(reply.leases)


@pytest.mark.slow
def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    (tmp_path / "admin-token").write_text("crash-test-admin\n")
    token = "crash-test-admin"
    port = free_port()
    rng = random.Random(5)
    server = launch(tmp_path, port)
    wait_for("the server up", lambda: leases(port, token) is not None, timeout=20)
    agents = [hyperband_agent(port, d) for d in (4, 8, 16, 32)]
    granted = 0
    try:
        for _ in range(4):
            time.sleep(rng.uniform(0.5, 2.0))  # a busy run: rounds every few hundred ms
            before = leases(port, token) or []
            granted += len(before)
            server.send_signal(signal.SIGKILL)
            server.wait()
            killed_at = time.time()
            server = launch(tmp_path, port)
            wait_for("the server up", lambda: leases(port, token) is not None, timeout=20)
            after = leases(port, token)
            assert after is not None
            domain = tuple(
                Lease(x.app_id, frozenset(x.gpu_ids), x.start_unix_s, x.end_unix_s, x.round)
                for x in after
            )
            check_invariants(ArbiterState(CLUSTER.gpu_ids, domain))  # none duplicated
            alive = {x.lease_id for x in before if x.end_unix_s > time.time() + 0.2}
            survived = {x.lease_id for x in after}
            # none lost: every lease reported before the kill and still running is there
            # (a lease may have ended, or been extended by a round committed after `before`)
            lost = {
                x.lease_id
                for x in before
                if x.lease_id in alive - survived
                and not any(set(x.gpu_ids) & set(y.gpu_ids) and y.app_id == x.app_id for y in after)
            }
            assert not lost, (lost, killed_at)
        assert granted > 0, "no auction granted a lease (the auction worker process failed?)"
        rounds = [len(a.rounds_bid) for a in agents]
        wait_for("new bids", lambda: sum(len(a.rounds_bid) for a in agents) > sum(rounds), 20)
        assert all(not a.errors for a in agents), [a.errors for a in agents]
    finally:
        for a in agents:
            a.stop()
        server.send_signal(signal.SIGKILL)
        server.wait()
