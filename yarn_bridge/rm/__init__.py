"""Typed client for the YARN ResourceManager REST API (``/ws/v1/cluster``), Hadoop 3.3 / 3.4.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1 (endpoint table §1.1, node and GPU shapes
§1.2, scheduler shapes §1.3, app shapes §1.4, submission §1.5, scheduler-conf mutation §1.6,
GPU configuration §1.8) and §2.1 (why a thin typed httpx client rather than yarn-api-client:
its two useful ideas, active-RM probing and simple auth, are re-done here).

Layout: a functional core and a thin shell, one module per responsibility.

* **Core** (pure, no I/O), unit-testable with plain dicts:

  - :mod:`yarn_bridge.rm.model`: frozen dataclasses of the RM's answers (:class:`App`,
    :class:`Node`, :class:`Resource`, :class:`ClusterMetrics`, :class:`CapacityQueue`,
    :class:`FairQueue`, ...) and the constants they share (:data:`GPU`, :data:`WS_PATH`);
  - :mod:`yarn_bridge.rm.parse`: tolerant ``parse_*`` functions from a decoded JSON document
    to them;
  - :mod:`yarn_bridge.rm.bodies`: the request builders :class:`AppSubmission` and
    :class:`SchedConfUpdate` (``to_json``);
  - :mod:`yarn_bridge.rm.times`: Hadoop's timeout timestamps (:func:`parse_expiry`,
    :func:`format_expiry`);
  - :mod:`yarn_bridge.rm.errors`: the :class:`RMError` hierarchy.

* **Shell**: :mod:`yarn_bridge.rm.http` (``RMTransport``: RM HA, retries, auth and error
  mapping) and :mod:`yarn_bridge.rm.client` (:class:`RMClient`, one typed method per REST
  resource, then the core; :class:`AsyncRMClient` runs the same calls in a worker thread,
  ``asyncio.to_thread``, for the asyncio arbiter: one code path, no second HA state machine).

Each module's docstring gives the decisions it implements (where Hadoop or the spec leaves a
choice): GPU accounting in ``model``, tolerant parsing in ``parse``, HA / retries / auth in
``http``, the asynchronous kill in ``client``, scheduler-conf bodies and tag case in ``bodies``.

Example (the watcher / enforcer / submit side)::

    from yarn_bridge.rm import AppSubmission, RMClient, SchedConfUpdate

    with RMClient("http://rm1:8088,http://rm2:8088", user="yarn") as rm:
        free = {n.id: n.gpus_available for n in rm.nodes(states=["RUNNING"])}
        ml = rm.apps(states=["ACCEPTED", "RUNNING"], tags=["yarn-arbiter-ml"])
        rm.kill_app(ml[0].id)                          # waits for KILLED
        rm.set_app_lifetime(ml[1].id, time.time() + 600)
        rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.ml": {"capacity": 60},
                                                               "root.hive": {"capacity": 20}}))
        app_id = rm.new_application().application_id
        rm.submit_app(AppSubmission(app_id, "trainer", "<AM command>", queue="ml",
                                    tags=("yarn-arbiter-ml",)))

Errors: :class:`RMUnavailable` (no active RM in time), :class:`RMResponseError` (answer not in
the documented shape), :class:`RMHTTPError` and its :class:`RMBadRequest` /
:class:`RMAuthError` / :class:`RMNotFound` (the RM refused); all are :class:`RMError`.
"""

from yarn_bridge.rm.bodies import AppSubmission, LocalResource, SchedConfUpdate
from yarn_bridge.rm.client import AsyncRMClient, RMClient
from yarn_bridge.rm.errors import (
    RMAuthError,
    RMBadRequest,
    RMError,
    RMHTTPError,
    RMNotFound,
    RMResponseError,
    RMUnavailable,
)
from yarn_bridge.rm.http import STANDBY_MARKER, AuthHook
from yarn_bridge.rm.model import (
    FINAL_STATES,
    GPU,
    MEMORY,
    VCORES,
    WS_PATH,
    App,
    AppTimeout,
    CapacityQueue,
    ClusterInfo,
    ClusterMetrics,
    FairQueue,
    NewApplication,
    Node,
    Queue,
    Resource,
    SchedulerInfo,
)
from yarn_bridge.rm.parse import (
    parse_app,
    parse_apps,
    parse_cluster_info,
    parse_cluster_metrics,
    parse_new_application,
    parse_node,
    parse_nodes,
    parse_resource,
    parse_scheduler,
    parse_scheduler_conf,
    parse_timeout,
    parse_timeouts,
)
from yarn_bridge.rm.times import format_expiry, parse_expiry

__all__ = [
    "FINAL_STATES",
    "GPU",
    "MEMORY",
    "STANDBY_MARKER",
    "VCORES",
    "WS_PATH",
    "App",
    "AppSubmission",
    "AppTimeout",
    "AsyncRMClient",
    "AuthHook",
    "CapacityQueue",
    "ClusterInfo",
    "ClusterMetrics",
    "FairQueue",
    "LocalResource",
    "NewApplication",
    "Node",
    "Queue",
    "RMAuthError",
    "RMBadRequest",
    "RMClient",
    "RMError",
    "RMHTTPError",
    "RMNotFound",
    "RMResponseError",
    "RMUnavailable",
    "Resource",
    "SchedConfUpdate",
    "SchedulerInfo",
    "format_expiry",
    "parse_app",
    "parse_apps",
    "parse_cluster_info",
    "parse_cluster_metrics",
    "parse_expiry",
    "parse_new_application",
    "parse_node",
    "parse_nodes",
    "parse_resource",
    "parse_scheduler",
    "parse_scheduler_conf",
    "parse_timeout",
    "parse_timeouts",
]
