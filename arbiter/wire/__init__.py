"""Protobuf <-> domain conversions of the arbiter's gRPC services, one module per service.

The wire (``protos/yarnarbiter/v1/arbiter.proto``) is translated here and nowhere else: the
servicer (:mod:`arbiter.service`) and every client (the Agent, the share follower of
``hive_hooks``, ``yarn-arbiter submit`` and ``admin``) call the same functions, so the two ends
cannot drift apart.

* :mod:`arbiter.wire.appmaster`: the AppMaster service (GPUs, leases, jobs, bids, offers,
  allocations, revocations, session errors); its GPU and lease messages serve Admin too.
* :mod:`arbiter.wire.share`: the QueryShare service (resource vectors, share changes).
* :mod:`arbiter.wire.admin`: the Admin service (cluster state, app info).

Conversions come in ``x_to_pb`` / ``x_from_pb`` pairs where both ends need them;
``x_from_pb(x_to_pb(v)) == v`` for every valid ``v`` (``tests/unit/test_wire.py``).
"""

from __future__ import annotations

from arbiter.wire.admin import app_info_to_pb, cluster_state_to_pb
from arbiter.wire.appmaster import (
    allocation_to_pb,
    bid_from_pb,
    bid_to_pb,
    gpu_from_pb,
    gpu_to_pb,
    heartbeat_from_pb,
    job_from_pb,
    job_to_pb,
    lease_from_pb,
    lease_source_from_pb,
    lease_source_to_pb,
    lease_to_pb,
    offer_from_pb,
    offer_to_pb,
    progress_from_pb,
    revocation_to_pb,
    session_error_to_pb,
)
from arbiter.wire.share import (
    resources_from_pb,
    resources_to_pb,
    share_change_from_pb,
    share_change_to_pb,
)

__all__ = [
    "allocation_to_pb",
    "app_info_to_pb",
    "bid_from_pb",
    "bid_to_pb",
    "cluster_state_to_pb",
    "gpu_from_pb",
    "gpu_to_pb",
    "heartbeat_from_pb",
    "job_from_pb",
    "job_to_pb",
    "lease_from_pb",
    "lease_source_from_pb",
    "lease_source_to_pb",
    "lease_to_pb",
    "offer_from_pb",
    "offer_to_pb",
    "progress_from_pb",
    "resources_from_pb",
    "resources_to_pb",
    "revocation_to_pb",
    "session_error_to_pb",
    "share_change_from_pb",
    "share_change_to_pb",
]
