"""``yarn-arbiter serve --rm-url`` end to end: the cluster comes from the ResourceManager
(emulated over HTTP), the bridge runs beside the arbiter, a node lost while the arbiter was down
does not stop it from restarting on its journal, and a drained node only cuts its own GPUs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from support import free_port

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.core import ArbiterCore, Revocation
from arbiter.journal import JournalCorrupt, SQLiteJournal
from arbiter.rounds import ArbiterState, Lease, LeaseSource, check_invariants
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_bridge.emulator import RMEmulator


def cluster_state(port: int, token: str, timeout: float = 30.0) -> pb.ClusterState:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                return rpc.AdminStub(ch).GetClusterState(
                    pb.ClusterStateRequest(), metadata=[("x-admin-token", token)], timeout=2
                )
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def serve(tmp_path: Path, rm_url: str, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin"),
        "ARBITER_AUCTION_WORKER_PROCESS": "false",
    }
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--rm-url", rm_url,
           "--port", str(port), "--journal", str(tmp_path / "j.db"),
           "--rm-poll-seconds", "0.5"]  # fmt: skip
    return spawn(cmd, env, tmp_path)


def spawn(cmd: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.Popen:
    """Start ``serve`` with its log in a file (a pipe nobody reads fills up and blocks it)."""
    log = (tmp_path / "serve.log").open("ab")
    try:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    finally:
        log.close()  # the child keeps its own descriptor


def stop(server: subprocess.Popen, tmp_path: Path) -> int:
    """SIGTERM ``server``; its exit status (its log in the message if it does not stop)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(30)
    except subprocess.TimeoutExpired:
        log = (tmp_path / "serve.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"serve did not stop 30 s after SIGTERM; its log:\n{log}") from None


@pytest.mark.slow
def test_serve_takes_its_cluster_from_the_rm_and_follows_it(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("adm\n")
    rm = RMEmulator(nodes=2, gpus_per_node=4)
    url = rm.start()
    port = free_port()
    server = serve(tmp_path, url, port)
    try:
        state = cluster_state(port, "adm")
        assert len(state.gpus) == 8
        node = rm.add_node("gpu-new", gpus=2)
        deadline = time.monotonic() + 20
        while len(cluster_state(port, "adm").gpus) != 10:
            assert time.monotonic() < deadline, "the new node never reached the arbiter"
            time.sleep(0.3)
        assert stop(server, tmp_path) == 0
        rm.lose_node(node)  # lost while the arbiter is down
        server = serve(tmp_path, url, port)
        assert len(cluster_state(port, "adm").gpus) == 8
    finally:
        server.kill()
        server.wait()
        rm.stop()


def test_serve_without_a_reachable_rm_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("adm\n")
    port = free_port()
    dead = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin")}
    out = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--rm-url", dead, "--port", str(port),
         "--journal", str(tmp_path / "j.db"), "--rm-wait-seconds", "2"],
        env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert "yarn-arbiter: error:" in out.stderr and "Traceback" not in out.stderr


def test_journal_trims_leases_on_gpus_the_rm_no_longer_has(tmp_path: Path) -> None:
    big, small = load_cluster("nodes:2:2"), load_cluster("nodes:1:2")
    journal = SQLiteJournal(tmp_path / "j.db")
    core = ArbiterCore(big, load_config(environ={"ARBITER_POLICY": "fifo"}), journal,
                       admin_token="a")  # fmt: skip
    app, _ = core.register_app(app_name="x", user="u", queue_name="", max_gpu_demand=4)
    gpus = sorted(big.gpu_ids)
    now = time.time()
    lease = Lease(app, frozenset(gpus), now, now + 600, 1)
    core.book.commit(ArbiterState(big.gpu_ids, (lease,), 1), now=now)
    journal.close()
    with pytest.raises(JournalCorrupt, match="unknown"):
        SQLiteJournal(tmp_path / "j.db").load(small.gpu_ids)
    snap = SQLiteJournal(tmp_path / "j.db").load(small.gpu_ids, trim_unknown=True)
    [lease] = snap.state.leases
    assert lease.gpus == small.gpu_ids and lease.source == LeaseSource.AUCTION
    check_invariants(snap.state)


def test_drain_cuts_only_the_drained_machines_gpus(tmp_path: Path) -> None:
    cluster = load_cluster("nodes:2:2")
    core = ArbiterCore(cluster, load_config(environ={"ARBITER_POLICY": "fifo"}),
                       SQLiteJournal(tmp_path / "j.db"), admin_token="a")  # fmt: skip
    app, _ = core.register_app(app_name="x", user="u", queue_name="", max_gpu_demand=4)
    q = core.open_session(app)
    core.tick()
    assert len(core.held(app)) == 4
    machine = cluster.machines[1].name
    core.drain(machine, grace=30.0)
    msgs = []
    while not q.empty():
        msgs.append(q.get_nowait())
    [rev] = [m for m in msgs if isinstance(m, Revocation)]
    assert {cluster.gpu(g).machine for g in rev.lease.gpus} == {machine}
    assert len(rev.lease.gpus) == 2
    later = time.time() + 60
    assert {cluster.gpu(g).machine for g in core.held(app, later)} == {cluster.machines[0].name}
    check_invariants(core.state)


def test_serve_hands_the_auth_header_command_to_the_bridge(tmp_path: Path) -> None:
    """``serve --rm-auth-header-command``: every RM call carries its Negotiate header."""
    (tmp_path / "admin").write_text("adm\n")
    script = tmp_path / "negotiate.py"
    script.write_text("print('Negotiate c2VydmUtdGlja2V0')\n")
    rm = RMEmulator(nodes=1, gpus_per_node=2)
    url = rm.start()
    port = free_port()
    env = {**os.environ, "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin"),
           "ARBITER_AUCTION_WORKER_PROCESS": "false"}  # fmt: skip
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--rm-url", url, "--port", str(port),
           "--journal", str(tmp_path / "j.db"), "--rm-poll-seconds", "0.2",
           "--rm-auth-header-command", f"{sys.executable} {script}"]  # fmt: skip
    server = spawn(cmd, env, tmp_path)
    try:
        assert len(cluster_state(port, "adm").gpus) == 2
        deadline = time.monotonic() + 20
        while not any(
            r.headers.get("authorization") == "Negotiate c2VydmUtdGlja2V0" for r in rm.requests
        ):
            assert time.monotonic() < deadline, "no RM call carried the hook's header"
            time.sleep(0.2)
        # every call, the start-up read of the nodes (the cluster above) included
        assert all(
            r.headers.get("authorization") == "Negotiate c2VydmUtdGlja2V0" for r in rm.requests
        )
        assert stop(server, tmp_path) == 0
    finally:
        server.kill()
        server.wait()
        rm.stop()
