"""``yarn-arbiter serve --rm-url`` as a child process, with an Admin client: what the real-YARN
demo, its tests and ``benchmarks/yarn_enforcement.py`` run beside a local cluster.

Its own work dir holds the journal (``journal.db``), the admin token file and the log
(``arbiter.log``); ``knobs`` are ``ARBITER_*`` settings for the child's environment and
``serve_args`` extra ``serve`` flags. :meth:`ServedArbiter.wait_ready` fails with the log's path
when the child exits or does not answer; :meth:`ServedArbiter.stop` sends SIGTERM (the journal
closes cleanly), then SIGKILL after 30 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from arbiter.journal import new_token
from arbiter.localhost import free_port, wait_until
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

__all__ = ["ServedArbiter", "gpus_by_machine"]


def gpus_by_machine(leases: Sequence[pb.Lease]) -> dict[str, int]:
    """Leased GPUs per arbiter machine (``<machine>/s<slot>/g<k>`` GPU ids)."""
    out: dict[str, int] = {}
    for x in leases:
        for g in x.gpu_ids:
            m = g.rsplit("/s", 1)[0]
            out[m] = out.get(m, 0) + 1
    return out


class ServedArbiter:
    """The arbiter serving the RM at ``rm_url`` from ``workdir`` (module docstring)."""

    def __init__(
        self,
        workdir: Path,
        rm_url: str,
        *serve_args: str,
        knobs: Mapping[str, str] | None = None,
        poll_s: float = 0.5,
        fresh: bool = True,
        admin_token: str = "local-admin",
        port: int | None = None,
    ) -> None:
        """``port``: the gRPC port (default a free one; give the old one to restart an arbiter
        where its Agents look for it, with ``fresh=False`` for its journal)."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.token = admin_token
        token_file = workdir / "admin-token"
        token_file.write_text(admin_token + "\n")
        # the credential HiveServer2's hooks register their users' queries with
        self.service_token_file = workdir / "service-token"
        if not self.service_token_file.is_file():
            self.service_token_file.write_text(new_token() + "\n")
        self.service_token_file.chmod(0o600)
        self.journal = workdir / "journal.db"
        if fresh:  # a new run starts from an empty journal
            for stale in workdir.glob("journal.db*"):
                stale.unlink()
        self.port = port or free_port()
        env = {**os.environ, "ARBITER_ADMIN_TOKEN_FILE": str(token_file),
               "ARBITER_QUERY_SERVICE_TOKEN_FILE": str(self.service_token_file),
               **(knobs or {})}  # fmt: skip
        cmd = [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--rm-url", rm_url,
               "--port", str(self.port), "--journal", str(self.journal),
               "--rm-poll-seconds", str(poll_s), *serve_args]  # fmt: skip
        self.log_path = workdir / "arbiter.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.admin = rpc.AdminStub(self.channel)

    def call(self, method: str, request: Any) -> Any:
        """An Admin RPC with the admin token (raises :class:`grpc.RpcError`)."""
        md = [("x-admin-token", self.token)]
        return getattr(self.admin, method)(request, metadata=md, timeout=5)

    def exited(self) -> str | None:
        """Why the child is gone (exit code and the log's tail), or ``None`` while it runs."""
        if self.proc.poll() is None:
            return None
        tail = self.log_path.read_text(errors="replace")[-2000:]
        return f"the arbiter exited ({self.proc.returncode}); {self.log_path}:\n{tail}"

    def state(self) -> pb.ClusterState | None:
        """The cluster state, or ``None`` while it does not answer yet (RuntimeError if it
        exited)."""
        if (why := self.exited()) is not None:
            raise RuntimeError(why)
        try:
            return self.call("GetClusterState", pb.ClusterStateRequest())
        except grpc.RpcError:
            return None

    def wait_ready(self, timeout: float = 90.0) -> pb.ClusterState:
        def error(msg: str) -> RuntimeError:
            return RuntimeError(f"the arbiter did not answer ({msg}); see {self.log_path}")

        return wait_until("its GetClusterState", self.state, timeout, 0.3, error=error)

    def leases(self, app_id: str = "") -> list[pb.Lease]:
        """The live leases (of ``app_id``, or all)."""
        now = time.time()
        reply = self.call("ListLeases", pb.ListLeasesRequest(app_id=app_id))
        return [x for x in reply.leases if x.start_unix_s <= now < x.end_unix_s]

    def stop(self) -> None:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
