"""The Admin service's wire format: the cluster state and the registered apps as the servicer
(:mod:`arbiter.service`) reports them. Its leases are AppMaster ``Lease`` messages
(:func:`arbiter.wire.appmaster.lease_to_pb`); ``yarn-arbiter admin`` reads their source with
:func:`arbiter.wire.appmaster.lease_source_from_pb` and renders the rest as it comes.
"""

from __future__ import annotations

from arbiter.journal import AppRecord
from arbiter.messages import ArbiterView
from arbiter.wire.appmaster import gpu_to_pb
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

__all__ = ["app_info_to_pb", "cluster_state_to_pb"]


def cluster_state_to_pb(view: ArbiterView, policy: str) -> pb.ClusterState:
    """The cluster of ``view``, its free GPUs, drained machines and round, under ``policy``."""
    return pb.ClusterState(
        cluster_name=view.cluster.name,
        gpus=[gpu_to_pb(g) for g in view.cluster.gpus],
        free_gpu_ids=sorted(view.free),
        drained_machines=sorted(view.drained),
        round=view.round,
        policy=policy,
    )


def app_info_to_pb(
    app: AppRecord, *, rho: float, held: frozenset[str], connected: bool
) -> pb.AppInfo:
    """A registered app with its current ρ, the GPUs it holds and whether its Agent is in."""
    return pb.AppInfo(
        app_id=app.app_id,
        app_name=app.app_name,
        user=app.user,
        queue=app.queue,
        max_gpu_demand=app.max_gpu_demand,
        rho=rho,
        held_gpu_ids=sorted(held),
        connected=connected,
    )
