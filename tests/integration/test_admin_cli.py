"""Operator tools against a served arbiter over real sockets: ``yarn-arbiter admin`` (state,
apps, leases, a knob change, a drain, and the refusals: wrong credential, bad knob, unknown
machine, no arbiter, each leaving the arbiter unchanged) and the ``/metrics`` page."""

from __future__ import annotations

import json
import queue
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from support import free_port

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_arbiter.cli import main

ADMIN = "admin-cli-secret"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningArbiter, Path]]:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_POLICY": "las",
        "ARBITER_POLICY_INTERVAL_SECONDS": "0.3",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_LEASE_SECONDS": "120",
        "ARBITER_METRICS_PORT": "0",
    }
    arb = RunningArbiter(load_cluster("nodes:2:4"), load_config(environ=env), admin_token=ADMIN)
    arb.start()
    token = tmp_path / "admin-token"
    token.write_text(ADMIN + "\n")
    yield arb, token
    arb.stop(0)


class Session:
    """An app master holding a session open (the las policy leases it GPUs)."""

    def __init__(self, arb: RunningArbiter, demand: int) -> None:
        self.channel = grpc.insecure_channel(f"localhost:{arb.port}")
        stub = rpc.AppMasterStub(self.channel)
        reg = stub.RegisterApp(
            pb.RegisterAppRequest(app_name="train", user="ann", max_gpu_demand=demand)
        )
        self.app_id = reg.app_id
        self.out: queue.Queue = queue.Queue()
        self.out.put(pb.AgentMessage(hello=pb.SessionHello(app_id=reg.app_id)))
        self.stream = stub.Session(
            iter(self.out.get, None), metadata=[("x-app-token", reg.app_token)]
        )
        msg = next(iter(self.stream))
        assert msg.WhichOneof("kind") == "allocation"
        self.gpus = [g for lease in msg.allocation.leases for g in lease.gpu_ids]

    def close(self) -> None:
        self.out.put(None)
        self.stream.cancel()
        self.channel.close()


def admin(arb: RunningArbiter, token: Path, *argv: str) -> list[str]:
    return ["admin", "--address", f"localhost:{arb.port}", "--token-file", str(token), *argv]


def test_state_apps_leases_set_and_drain(
    served: tuple[RunningArbiter, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    arb, token = served
    s = Session(arb, 3)
    try:
        assert len(s.gpus) == 3
        assert main(admin(arb, token, "state")) == 0
        out = capsys.readouterr().out
        assert "policy las" in out and "GPUs 8: 5 free, 3 leased" in out
        machine = arb.core.cluster.gpu(s.gpus[0]).machine
        assert any(ln.startswith(machine) and " 3 " in ln for ln in out.splitlines())

        assert main(admin(arb, token, "apps")) == 0
        [row] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(s.app_id)]
        assert row.split()[1:5] == ["train", "ann", "default", "3"]

        assert main(admin(arb, token, "--json", "leases", "--app", s.app_id)) == 0
        leases = json.loads(capsys.readouterr().out)["leases"]
        assert sorted(g for lease in leases for g in lease["gpu_ids"]) == sorted(s.gpus)
        assert {lease["source"] for lease in leases} == {"LEASE_SOURCE_POLICY"}

        assert main(admin(arb, token, "set", "arbiter.themis.fairness-knob", "0.7")) == 0
        assert capsys.readouterr().out.strip() == "arbiter.themis.fairness-knob: 0.9 -> 0.7"
        assert arb.core.config["arbiter.themis.fairness-knob"] == 0.7

        assert main(admin(arb, token, "drain", machine, "--grace", "0")) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"draining {machine}: 1 lease(s) revoked")
        assert machine in arb.core.drained
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the drained GPUs leave the lease
            held = {g for lease in arb.core.state.leases for g in lease.gpus}
            if not any(arb.core.cluster.gpu(g).machine == machine for g in held):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the drained machine's GPUs are still leased")
        assert main(admin(arb, token, "state")) == 0
        assert "drained" in capsys.readouterr().out
        free = len(arb.core.snapshot().free)

        assert main(admin(arb, token, "undrain", machine)) == 0
        assert capsys.readouterr().out.strip() == f"{machine} offered again"
        assert machine not in arb.core.drained
        assert len(arb.core.snapshot().free) > free  # its GPUs are offerable again
        assert main(admin(arb, token, "undrain", machine)) == 0
        assert "was not drained: nothing changed" in capsys.readouterr().out
        assert main(admin(arb, token, "undrain", "no-such-machine")) != 0
        assert "unknown machine" in capsys.readouterr().err
    finally:
        s.close()


def test_refusals_are_clear_and_change_nothing(
    served: tuple[RunningArbiter, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arb, token = served
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token\n")
    before = (arb.core.config["arbiter.themis.fairness-knob"], set(arb.core.drained))

    assert main(admin(arb, wrong, "set", "arbiter.themis.fairness-knob", "0.5")) == 2
    assert "PERMISSION_DENIED: wrong admin token" in capsys.readouterr().err
    assert main(admin(arb, token, "set", "arbiter.themis.fairness-knob", "nan")) == 2
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT" in err and "arbiter.themis.fairness-knob" in err
    assert main(admin(arb, token, "set", "arbiter.no-such-knob", "1")) == 2
    assert "arbiter.no-such-knob" in capsys.readouterr().err
    assert main(admin(arb, token, "drain", "no-such-machine")) == 2
    err = capsys.readouterr().err
    assert "NOT_FOUND" in err and "no-such-machine" in err
    machine = arb.core.cluster.machines[0].name
    assert main(admin(arb, token, "drain", machine, "--grace", "-1")) == 2
    assert "grace_seconds must be >= 0" in capsys.readouterr().err
    assert (arb.core.config["arbiter.themis.fairness-knob"], set(arb.core.drained)) == before

    # no credential at all, an empty token file, nobody listening
    assert main(["admin", "--address", f"localhost:{arb.port}", "state"]) == 2
    assert "no admin credential" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert main(admin(arb, empty, "state")) == 2
    assert "is empty" in capsys.readouterr().err
    port = free_port()
    argv = ["admin", "--address", f"localhost:{port}", "--token-file", str(token)]
    assert main([*argv, "--timeout", "2", "state"]) == 2
    assert f"no arbiter reachable at localhost:{port}" in capsys.readouterr().err


def scrape(arb: RunningArbiter) -> dict[str, float]:
    assert arb.metrics is not None
    r = httpx.get(arb.metrics.url, timeout=5)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=")
    out = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_page_follows_the_arbiter(served: tuple[RunningArbiter, Path]) -> None:
    arb, _ = served
    page = scrape(arb)
    assert page['yarn_arbiter_info{cluster="nodes:2:4",policy="las"}'] == 1
    assert page["yarn_arbiter_cluster_gpus"] == 8 and page['yarn_arbiter_gpus{state="free"}'] == 8
    assert page['yarn_arbiter_apps{connected="true"}'] == 0
    s = Session(arb, 3)
    try:
        page = scrape(arb)
        assert page['yarn_arbiter_gpus{state="leased"}'] == 3
        assert page['yarn_arbiter_gpus{state="free"}'] == 5
        assert page['yarn_arbiter_leases{source="policy"}'] == 1
        assert page['yarn_arbiter_apps{connected="true"}'] == 1
        machine = arb.core.cluster.gpu(s.gpus[0]).machine
        other = next(m.name for m in arb.core.cluster.machines if m.name != machine)
        arb.core.drain(other, 0.0)
        page = scrape(arb)
        assert page['yarn_arbiter_gpus{state="drained"}'] == 4
        assert page['yarn_arbiter_gpus{state="free"}'] == 1  # free = offerable
    finally:
        s.close()
    arb.core.register_query("q")
    wrong = rpc.AdminStub(grpc.insecure_channel(f"localhost:{arb.port}"))
    with pytest.raises(grpc.RpcError):
        wrong.ListApps(pb.ListAppsRequest(), metadata=[("x-admin-token", "nope")])
    page = scrape(arb)
    assert page['yarn_arbiter_rpc_calls_total{method="RegisterApp"}'] == 1
    assert page['yarn_arbiter_rpc_calls_total{method="ListApps"}'] == 1
    assert page['yarn_arbiter_rpc_refused_total{code="PERMISSION_DENIED"}'] == 1
    assert page["yarn_arbiter_query_jobs"] == 1 and page["yarn_arbiter_analytics_jobs"] == 1
    assert page["yarn_arbiter_rounds_total"] >= 1
    assert page['yarn_arbiter_rpc_duration_seconds_count{method="RegisterApp"}'] == 1
    assert page["yarn_arbiter_journal_commit_duration_seconds_count"] >= 1
    assert httpx.get(arb.metrics.url.replace("/metrics", "/healthz"), timeout=5).text == "ok\n"
    assert httpx.get(arb.metrics.url.replace("/metrics", "/x"), timeout=5).status_code == 404


def test_metrics_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {
            "ARBITER_GRPC_PORT": "0",
            "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
            "ARBITER_METRICS_PORT": str(port),
        }
        with pytest.raises(OSError, match=f"arbiter.metrics.port {port} on 127.0.0.1"):
            RunningArbiter(load_cluster("nodes:1:2"), load_config(environ=env), admin_token="a")
    # the journal was closed: a second arbiter opens it
    env["ARBITER_METRICS_PORT"] = "-1"
    RunningArbiter(
        load_cluster("nodes:1:2"), load_config(environ=env), admin_token="a"
    ).start().stop(0)


def test_serve_metrics_port_flag(tmp_path: Path) -> None:
    """``yarn-arbiter serve --metrics-port``: the daemon prints where its metrics are and
    serves them until SIGTERM."""
    import os
    import signal
    import subprocess
    import sys

    (tmp_path / "admin").write_text("adm\n")
    env = {**os.environ, "ARBITER_ADMIN_TOKEN_FILE": str(tmp_path / "admin"),
           "ARBITER_AUCTION_WORKER_PROCESS": "false"}  # fmt: skip
    cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "nodes:1:2",
           "--port", "0", "--journal", str(tmp_path / "j.db"), "--metrics-port", "0"]  # fmt: skip
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        assert "; metrics at http://127.0.0.1:" in line, line
        url = line.rsplit("metrics at ", 1)[1].split(";")[0].strip()
        page = httpx.get(url, timeout=5).text
        assert 'yarn_arbiter_gpus{state="free"} 2' in page
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        server.kill()
        server.wait()
