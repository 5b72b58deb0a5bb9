"""What the YARN bridge needs of the arbiter: the typed port through which the watcher, the
enforcer and the bridge's runner (:mod:`yarn_bridge.watcher`, :mod:`yarn_bridge.enforcer`,
:mod:`yarn_bridge.bridge_cli`) read and change the live arbiter.

:class:`arbiter.core.ArbiterCore` satisfies it structurally; the bridge depends on this port,
never on the core's class, so the arbiter can be reorganised (and tested against fakes) without
the bridge noticing, and the composition root (:mod:`yarn_arbiter`) is the only place that hands
a real core to the bridge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.messages import ArbiterView
from arbiter.shares import Resources

__all__ = ["ArbiterPort"]


class ArbiterPort(Protocol):
    """The live arbiter as the YARN bridge sees it.

    Reads: the arbiter's ``clock``, its current ``cluster`` topology, its ``config`` (the
    revocation grace a lost node's leases get) and one consistent :meth:`snapshot`. Writes: an
    ML app that ended in YARN (:meth:`finish_app`), the topology the ResourceManager reports
    (:meth:`update_topology`), a node leaving (:meth:`drain`) and the analytics load QOOP's
    shares divide (:meth:`set_analytics`).
    """

    @property
    def clock(self) -> Callable[[], float]:
        """The arbiter's clock (seconds since the epoch)."""
        ...

    @property
    def cluster(self) -> Cluster:
        """The topology the arbiter schedules on now."""
        ...

    @property
    def config(self) -> Config:
        """The arbiter's effective configuration (knobs changed at run time included)."""
        ...

    def snapshot(self) -> ArbiterView:
        """One consistent view of the arbiter (apps, leases, cluster, ...), taken under its
        lock."""
        ...

    def finish_app(self, app_id: str, reason: str) -> frozenset[str]:
        """The app ended in YARN (for ``reason``): its leases end now, its record goes
        (idempotent); returns the GPUs it held."""
        ...

    def update_topology(self, cluster: Cluster) -> tuple[frozenset[str], frozenset[str]]:
        """Schedule on ``cluster`` from now on; returns the GPU ids added and removed."""
        ...

    def drain(self, machine: str, grace: float) -> list[str]:
        """Stop offering ``machine``'s GPUs and revoke its leases after ``grace`` seconds;
        returns the revoked lease ids."""
        ...

    def set_analytics(self, external_jobs: int, capacity: Resources | None = None) -> bool:
        """The analytics apps YARN runs beyond the arbiter's query jobs and the capacity to
        share; returns whether the query shares changed (and were pushed)."""
        ...
