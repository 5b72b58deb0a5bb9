"""The ``yarn-arbiter serve`` process: the arbiter on a declared cluster, or, with the YARN
bridge's settings (``--rm-url``), on the cluster the ResourceManager reports, with the bridge
(watcher, enforcer) attached to the running arbiter and stopped before it."""

from __future__ import annotations

import logging
import sys

from arbiter.cluster import Cluster
from arbiter.config import Config
from arbiter.server import serve_forever
from yarn_bridge.bridge_cli import BridgeSettings, initial_cluster, start_bridge

__all__ = ["NO_GPUS", "serve"]

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
    if bridge is None:
        if cluster is None:
            raise ValueError("serve needs a cluster spec or --rm-url")
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
    return serve_forever(
        cluster,
        config,
        topology_from_rm=True,
        attach=[
            (
                f"YARN bridge to {', '.join(bridge.rm_urls)}",
                lambda core: start_bridge(core, bridge.rm_urls, **bridge.kwargs),
            )
        ],
    )
