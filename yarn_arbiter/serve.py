"""The ``yarn-arbiter serve`` process: the arbiter on a declared cluster, or, with the YARN
bridge's settings (``--rm-url``), on the cluster the ResourceManager reports, with the bridge
(watcher, enforcer) attached to the running arbiter and stopped before it."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.ha import HaArbiter, HaSettings
from arbiter.journal import Journal
from arbiter.server import RunningArbiter, StartAttachment, serve_forever, start_arbiter
from arbiter.signals import stop_on_signals
from yarn_bridge.bridge_cli import BridgeSettings, initial_cluster, start_bridge

__all__ = ["NO_GPUS", "serve", "serve_ha"]

log = logging.getLogger("yarn_arbiter.serve")

NO_GPUS = (
    "the ResourceManager at {urls} reports no RUNNING NodeManager with yarn.io/gpu: the "
    "arbiter serves 0 GPUs and no ML app gets a lease until one does. Declare the resource "
    "(resource-types.xml: yarn.resource-types = yarn.io/gpu) and each GPU node's count "
    "(node-resources.xml: yarn.nodemanager.resource-type.yarn.io/gpu, or the GPU plugin); "
    "GPU nodes that register later are picked up by the bridge"
)


def serve(cluster: Cluster | None, config: Config, bridge: BridgeSettings | None = None) -> int:
    """Serve until SIGTERM/SIGINT. With ``bridge`` the cluster is read from the
    ResourceManager and the YARN bridge runs beside the arbiter."""
    ha = HaSettings.from_config(config)
    if bridge is None:
        if cluster is None:
            raise ValueError("serve needs a cluster spec or --rm-url")
        if ha is not None:
            return serve_ha(cluster, config, ha)
        return serve_forever(cluster, config)
    cluster = initial_cluster(
        bridge.rm_urls,
        wait_s=bridge.wait_s,
        rm_user=bridge.kwargs.get("rm_user"),
        rm_options=bridge.kwargs.get("rm_options"),  # the auth hook, as for every poll
    )
    if cluster.num_gpus == 0:
        warning = NO_GPUS.format(urls=", ".join(bridge.rm_urls))
        log.warning("%s", warning)
        print(f"yarn-arbiter: warning: {warning}", file=sys.stderr, flush=True)
    attach: list[tuple[str, StartAttachment]] = [
        (
            f"YARN bridge to {', '.join(bridge.rm_urls)}",
            lambda core: start_bridge(core, bridge.rm_urls, **bridge.kwargs),
        )
    ]
    if ha is not None:
        return serve_ha(cluster, config, ha, topology_from_rm=True, attach=attach)
    return serve_forever(cluster, config, topology_from_rm=True, attach=attach)


def serve_ha(
    cluster: Cluster,
    config: Config,
    ha: HaSettings,
    *,
    topology_from_rm: bool = False,
    attach: Sequence[tuple[str, StartAttachment]] = (),
) -> int:
    """One arbiter of an active/standby pair (:mod:`arbiter.ha`) until SIGTERM/SIGINT: a
    standby until it wins the election, then the arbiter (with its attachments, the YARN
    bridge) on the ZooKeeper journal; it steps down to standby when it loses ZooKeeper."""
    done = threading.Event()
    stop_on_signals(done)

    def start_active(journal: Journal, ready: Callable[[], dict[str, Any]]) -> RunningArbiter:
        arbiter, _ = start_arbiter(
            cluster, config, topology_from_rm=topology_from_rm, attach=attach, journal=journal
        )
        arbiter.telemetry.add_source("ha", ready)
        print(f"yarn-arbiter: {ha.ha_id} is the ACTIVE arbiter of {cluster.name} "
              f"({cluster.num_gpus} GPUs) on port {arbiter.port}", flush=True)  # fmt: skip
        return arbiter

    def on_role(role: str) -> None:
        if role == "standby":
            print(f"yarn-arbiter: {ha.ha_id} is a STANDBY on {ha.advertise} (ZooKeeper "
                  f"{ha.zk_address}{ha.root})", flush=True)  # fmt: skip

    metrics_port = config["arbiter.metrics.port"]
    host = config["arbiter.grpc.bind-host"].strip()
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return HaArbiter(
        ha,
        start_active,
        grpc_address=f"{host}:{config['arbiter.grpc.port']}",
        http=(config["arbiter.metrics.bind-host"], metrics_port) if metrics_port >= 0 else None,
        on_role=on_role,
    ).run(done)
