"""A served arbiter as the socket tests see it: the test cluster and admin token, its leases
through the Admin API, and a successive-halving :class:`~arbiter.agent.Agent` to bid in it."""

from __future__ import annotations

import time

import grpc

from arbiter.agent import Agent, estimator_from_scheduler
from arbiter.cluster import load_cluster
from arbiter.fairness import SuccessiveHalving, t_id
from arbiter.server import RunningArbiter
from hive_hooks.share import ArbiterShare
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from support import wait_for

CLUSTER = load_cluster("themis-testbed")
ADMIN = "admin-secret-for-tests"


def channel(a: RunningArbiter) -> grpc.Channel:
    return grpc.insecure_channel(f"localhost:{a.port}")


def admin_md() -> list[tuple[str, str]]:
    return [("x-admin-token", ADMIN)]


def leases_of(a: RunningArbiter) -> list[pb.Lease]:
    admin = rpc.AdminStub(channel(a))
    return list(admin.ListLeases(pb.ListLeasesRequest(), metadata=admin_md()).leases)


def hyperband_agent(port: int, demand: int) -> Agent:
    """A successive-halving app (B.9's bracket) priced with Eq. 2."""
    scheduler = SuccessiveHalving((8, 16, 36), (80.0, 100.0, 100.0, 120.0))
    started = time.time()
    estimator = estimator_from_scheduler(
        scheduler,
        t_id=t_id(scheduler.budget, CLUSTER.num_gpus, demand, 4.0),
        job_demand_max=8,
        elapsed=lambda: time.time() - started,
    )
    return Agent(
        f"localhost:{port}", estimator=estimator, max_gpu_demand=demand, heartbeat_seconds=0.2
    ).start()


def halved_by_another_query(share: ArbiterShare, arbiter: RunningArbiter) -> None:
    """Another query registers at ``arbiter``: ``share`` must get the 1-over-2 share."""
    full = CLUSTER.vcores
    before = share.current()
    stub = rpc.QueryShareStub(grpc.insecure_channel(f"127.0.0.1:{arbiter.port}"))
    stub.RegisterQuery(pb.RegisterQueryRequest(query_name="other"))
    halved = wait_for(
        "the halved share",
        lambda: (s := share.wait_change(before.epoch, 1.0)).share.vcores == full / 2 and s,
        timeout=20,
    )
    assert halved.epoch > before.epoch and halved.active_jobs == 2
