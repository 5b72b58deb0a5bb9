"""An arbiter HA pair on this machine (:mod:`arbiter.ha`): ``yarn-arbiter serve --ha-zk``
processes on free loopback ports with shared credentials, their roles read from ``/readyz``.
What the failover tests and ``benchmarks/arbiter_failover.py`` start; ZooKeeper itself comes
from :meth:`yarn_bridge.local_hadoop.LocalHadoop.up_zookeeper`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from arbiter.journal import new_token
from arbiter.localhost import free_port

__all__ = [
    "ArbiterProcess",
    "HaPairFiles",
    "readyz_at",
    "role_at",
    "role_of",
    "start_arbiter_process",
]


def readyz_at(metrics_port: int) -> dict | None:
    """The ``/readyz`` JSON of the arbiter whose HTTP port is ``metrics_port`` (with the status
    code as ``"_code"``), None if unreachable."""
    try:
        r = httpx.get(f"http://127.0.0.1:{metrics_port}/readyz?format=json", timeout=1.0)
        return {**r.json(), "_code": r.status_code}
    except (httpx.HTTPError, ValueError):
        return None


def role_of(readyz: Mapping | None) -> str | None:
    """``active``, ``standby`` or None from a ``/readyz`` answer (:func:`readyz_at`).

    >>> role_of({"_code": 200, "checks": {"ha": {"ok": True}}})
    'active'
    >>> role_of({"_code": 503, "checks": {"ha": {"ok": False, "role": "standby"}}})
    'standby'
    >>> role_of(None) is None
    True
    """
    if readyz is None:
        return None
    ha = readyz.get("checks", {}).get("ha", {})
    if readyz["_code"] == 200 and ha.get("ok"):
        return "active"
    if ha.get("role") == "standby":
        return "standby"
    return None


def role_at(metrics_port: int) -> str | None:
    """The HA role of the arbiter whose HTTP port is ``metrics_port`` (None: not answering)."""
    return role_of(readyz_at(metrics_port))


@dataclass(frozen=True)
class HaPairFiles:
    """The credentials every member of a pair shares (written 0600 under ``workdir``)."""

    admin: Path
    submit: Path
    service: Path

    @classmethod
    def create(cls, workdir: Path) -> HaPairFiles:
        workdir.mkdir(parents=True, exist_ok=True)
        paths = []
        for name in ("admin", "submit", "service"):
            p = workdir / f"{name}-token"
            if not p.exists():
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(new_token() + "\n")
            paths.append(p)
        return cls(*paths)

    def token(self, which: str) -> str:
        return getattr(self, which).read_text().strip()


@dataclass
class ArbiterProcess:
    """One ``yarn-arbiter serve --ha-zk`` process."""

    ha_id: str
    port: int
    metrics_port: int
    proc: subprocess.Popen
    log: Path
    argv: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def readyz(self) -> dict | None:
        """The ``/readyz`` JSON (with the status code as ``"_code"``), None if unreachable."""
        return readyz_at(self.metrics_port)

    def role(self) -> str | None:
        """``active``, ``standby`` or None (not answering, or neither)."""
        return role_at(self.metrics_port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9 and reap."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 20 s), reaped; resumes a SIGSTOPped process first."""
        if not self.alive():
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, n: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        return ""


def start_arbiter_process(
    workdir: Path,
    ha_id: str,
    zk_address: str,
    files: HaPairFiles,
    *,
    cluster: str = "themis-testbed",
    zk_root: str = "/yarn-arbiter/test",
    session_timeout_s: float = 2.0,
    port: int | None = None,
    metrics_port: int | None = None,
    settings: Mapping[str, object] | None = None,
    rm_urls: Sequence[str] = (),
    log: Path | None = None,
) -> ArbiterProcess:
    """Start one member of a pair (not waiting for its role); ``settings`` go to its config.
    ``rm_urls``: serve the cluster these ResourceManagers report, with the YARN bridge
    (``--rm-url``; ``cluster`` is then unused). ``log``: default ``workdir/ha_id/serve.log``."""
    port = port or free_port()
    metrics_port = metrics_port or free_port()
    here = workdir / ha_id
    here.mkdir(parents=True, exist_ok=True)
    conf = {
        "arbiter.admin.token-file": files.admin,
        "arbiter.admission.submit-token-file": files.submit,
        "arbiter.query.service-token-file": files.service,
        "arbiter.ha.zk-root": zk_root,
        "arbiter.ha.session-timeout.seconds": session_timeout_s,
        "arbiter.journal.path": here / "unused-journal.db",
        **(settings or {}),
    }
    (here / "arbiter.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    where = ["--rm-url", ",".join(rm_urls)] if rm_urls else ["--cluster", cluster]
    argv = [sys.executable, "-m", "yarn_arbiter.cli", "serve", *where,
            "--port", str(port), "--metrics-port", str(metrics_port), "--ha-zk", zk_address,
            "--ha-id", ha_id, "--config", str(here / "arbiter.conf")]  # fmt: skip
    log = log or here / "serve.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))}  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    return ArbiterProcess(ha_id, port, metrics_port, proc, log, argv)


def roles(arbiters: list[ArbiterProcess]) -> dict[str, str | None]:
    return {a.ha_id: a.role() for a in arbiters}


def dump(arbiters: list[ArbiterProcess]) -> str:
    return json.dumps({a.ha_id: a.tail() for a in arbiters}, indent=1)


# -- clients of the pair (Admin reads, lease-bidding Agents) -----------------------------------


def admin_call(address: str, token: str, method: str, request: object) -> object | None:
    """One Admin RPC to ``address``; None if it fails (a standby, a dead arbiter)."""
    import grpc

    from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

    # a channel of its own: gRPC shares connections (and their reconnect backoff) between the
    # channels of a process, so one to an address just refused would fail at once
    with grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
        try:
            return getattr(rpc.AdminStub(ch), method)(
                request, metadata=[("x-admin-token", token)], timeout=5
            )
        except grpc.RpcError:
            return None


def leases_at(address: str, token: str) -> list | None:
    """The live leases the arbiter at ``address`` reports (None if it does not serve)."""
    from protos.yarnarbiter.v1 import arbiter_pb2 as pb

    reply = admin_call(address, token, "ListLeases", pb.ListLeasesRequest())
    return None if reply is None else list(reply.leases)  # type: ignore[attr-defined]


def apps_at(address: str, token: str) -> list | None:
    from protos.yarnarbiter.v1 import arbiter_pb2 as pb

    reply = admin_call(address, token, "ListApps", pb.ListAppsRequest())
    return None if reply is None else list(reply.apps)  # type: ignore[attr-defined]


def bidding_agent(addresses: str, submit_token: str, demand: int, num_gpus: int = 64):
    """A successive-halving app (spec B.9's bracket, Eq. 2) bidding at ``addresses``
    (``a:1,b:2``), registered with the submitters' credential, started."""
    from arbiter.agent import Agent, estimator_from_scheduler
    from arbiter.fairness import SuccessiveHalving, t_id

    scheduler = SuccessiveHalving((8, 16, 36), (80.0, 100.0, 100.0, 120.0))
    started = time.time()
    estimator = estimator_from_scheduler(
        scheduler,
        t_id=t_id(scheduler.budget, num_gpus, demand, 4.0),
        job_demand_max=8,
        elapsed=lambda: time.time() - started,
    )
    return Agent(addresses, estimator=estimator, max_gpu_demand=demand, heartbeat_seconds=0.5,
                 register_token=submit_token).start()  # fmt: skip


# Settings that keep a failover observable: leases outlive the test, Agents are not expired
# while they move from one arbiter to the other, rounds are quick.
FAILOVER_SETTINGS: Mapping[str, object] = {
    "arbiter.lease.seconds": 120,
    "arbiter.heartbeat.timeout.seconds": 60,
    "arbiter.offer.batch-window.seconds": 0.1,
    "arbiter.bid.deadline.seconds": 1,
    "arbiter.admission.app-idle-expiry.seconds": 600,
}
