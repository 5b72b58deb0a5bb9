"""The arbiter's gRPC API as an outsider uses it: a served arbiter on a small cluster with a
manual clock, and thin clients for its three services (sync stubs over a real socket).

Used by the reliability tests (faults and attacks over the real interface) and the stateful
property test of the API.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from arbiter.cluster import Cluster, load_cluster
from arbiter.config import Config, load_config
from arbiter.decider import Decider
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

from . import Clock, wait_for

ADMIN = "admin-secret-for-tests"
SERVICE = "service-secret-for-tests"
SUBMIT = "submit-secret-for-tests"
SMALL = load_cluster("nodes:2:2")  # node-000 and node-001, 2 GPUs each


def small_config(journal: Path, **keys: object) -> Config:
    """A configuration for a test arbiter (fifo, 60 s leases, 5 s grace, no batch window);
    ``keys`` as ``ARBITER_...`` variable names in lower case (``arbiter_policy="las"``)."""
    env = {
        "ARBITER_POLICY": "fifo",
        "ARBITER_LEASE_SECONDS": "60",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "1000000",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        "ARBITER_REVOCATION_GRACE_SECONDS": "5",
        "ARBITER_AUCTION_WORKER_PROCESS": "false",
        "ARBITER_JOURNAL_PATH": str(journal),
        "ARBITER_GRPC_PORT": "0",
    }
    for key, value in keys.items():
        env[key.upper().replace(".", "_").replace("-", "_")] = str(value)
    return load_config(environ=env)


def serve(
    journal: Path,
    clock: Clock,
    cluster: Cluster = SMALL,
    decider: Decider | None = None,
    **keys: object,
) -> RunningArbiter:
    """An arbiter on ``cluster`` with a manual ``clock`` (the scheduler thread ticks; time moves
    only when the test moves it). ``keys``: configuration as ``ARBITER_...`` variable names."""
    return RunningArbiter(
        cluster,
        small_config(journal, **keys),
        admin_token=ADMIN,
        service_token=SERVICE,
        submit_token=SUBMIT,
        clock=clock,
        tick_seconds=0.01,
        decider=decider,
    ).start()


def md(**tokens: str) -> list[tuple[str, str]]:
    """gRPC metadata: ``md(admin=..., app=..., service=..., submit=...)``."""
    return [(f"x-{k}-token", v) for k, v in tokens.items()]


@dataclass
class Api:
    """Clients of a served arbiter's three services on one channel."""

    port: int
    channel: grpc.Channel = field(init=False)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.am = rpc.AppMasterStub(self.channel)
        self.share = rpc.QueryShareStub(self.channel)
        self.admin = rpc.AdminStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def register(
        self, demand: int = 1, *, token: str | None = SUBMIT, **fields: object
    ) -> tuple[str, str]:
        """RegisterApp with the submitters' credential (``token=None``: anonymous)."""
        reply = self.am.RegisterApp(
            pb.RegisterAppRequest(
                **{"app_name": "ml", "user": "u", "max_gpu_demand": demand, **fields}
            ),
            metadata=md(submit=token) if token is not None else None,
            timeout=10,
        )
        return reply.app_id, reply.app_token

    def leases(self, app_id: str = "") -> list[pb.Lease]:
        reply = self.admin.ListLeases(
            pb.ListLeasesRequest(app_id=app_id), metadata=md(admin=ADMIN), timeout=10
        )
        return list(reply.leases)

    def state(self) -> pb.ClusterState:
        return self.admin.GetClusterState(
            pb.ClusterStateRequest(), metadata=md(admin=ADMIN), timeout=10
        )

    def renew(self, token: str, lease_id: str) -> pb.Lease:
        return self.am.RenewLease(
            pb.RenewLeaseRequest(lease_id=lease_id), metadata=md(app=token), timeout=10
        ).lease

    def release(self, token: str, lease_id: str) -> list[str]:
        reply = self.am.ReleaseLease(
            pb.ReleaseLeaseRequest(lease_id=lease_id), metadata=md(app=token), timeout=10
        )
        return list(reply.released_gpu_ids)

    def drain(self, machine: str, grace: float) -> list[str]:
        reply = self.admin.DrainNode(
            pb.DrainNodeRequest(machine=machine, grace_seconds=grace),
            metadata=md(admin=ADMIN),
            timeout=10,
        )
        return list(reply.revoked_lease_ids)

    def session(self, app_id: str, token: str) -> Session:
        return Session(self.am, app_id, token)


class Session:
    """An open Session stream: what the arbiter sends lands in :attr:`inbox`."""

    def __init__(self, stub: rpc.AppMasterStub, app_id: str, token: str) -> None:
        self._out: queue.Queue[pb.AgentMessage | None] = queue.Queue()
        self._out.put(pb.AgentMessage(hello=pb.SessionHello(app_id=app_id)))
        self.inbox: queue.Queue[pb.ArbiterMessage] = queue.Queue()
        self._call = stub.Session(self._requests(), metadata=md(app=token))
        self.ended = threading.Event()
        self.code: grpc.StatusCode | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _requests(self) -> Iterator[pb.AgentMessage]:
        while True:
            item = self._out.get()
            if item is None:
                return
            yield item

    def _read(self) -> None:
        try:
            for msg in self._call:
                self.inbox.put(msg)
        except grpc.RpcError as err:
            self.code = err.code()
        finally:
            self.ended.set()

    def send(self, msg: pb.AgentMessage) -> None:
        self._out.put(msg)

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self.ended.wait(10)


def held_by(api: Api, app_id: str, now: float) -> set[str]:
    return {
        g for x in api.leases(app_id) if x.start_unix_s <= now < x.end_unix_s for g in x.gpu_ids
    }


def wait_held(api: Api, app_id: str, n: int, now: float) -> set[str]:
    return wait_for(f"{app_id} to hold {n} GPUs", lambda: len(held_by(api, app_id, now)) == n
                    and held_by(api, app_id, now), timeout=30)  # fmt: skip


def by_machine(leases: list[pb.Lease]) -> Mapping[str, list[pb.Lease]]:
    out: dict[str, list[pb.Lease]] = {}
    for x in leases:
        for g in x.gpu_ids:
            out.setdefault(g.split("/")[0], []).append(x)
    return out
