"""The ResourceManager REST client: :class:`RMClient` maps each YARN REST resource under
``/ws/v1/cluster`` to a typed method (``/info``, ``/metrics``, ``/scheduler``, ``/nodes``,
``/apps`` and its ``state`` / ``queue`` / ``priority`` / ``timeouts`` sub-resources,
``/apps/new-application``, ``/scheduler-conf``), sending requests through the HA-aware
transport of :mod:`yarn_bridge.rm.http` and parsing answers with :mod:`yarn_bridge.rm.parse`.
:class:`AsyncRMClient` runs the same calls in a worker thread (``asyncio.to_thread``) for the
asyncio arbiter: one code path, no second HA state machine.

Kill is asynchronous in YARN: ``PUT /apps/{id}/state`` first answers 202 with the current
state; :meth:`RMClient.kill_app` repeats the PUT until the RM answers 200 (or the deadline).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import httpx

from yarn_bridge.env import ENV_RM_URL
from yarn_bridge.rm.bodies import AppSubmission, SchedConfUpdate
from yarn_bridge.rm.errors import RMResponseError
from yarn_bridge.rm.http import RMTransport, _Standby
from yarn_bridge.rm.model import (
    WS_PATH,
    App,
    AppTimeout,
    ClusterInfo,
    ClusterMetrics,
    NewApplication,
    Node,
    SchedulerInfo,
)
from yarn_bridge.rm.parse import (
    _Obj,
    parse_app,
    parse_apps,
    parse_cluster_info,
    parse_cluster_metrics,
    parse_new_application,
    parse_node,
    parse_nodes,
    parse_scheduler,
    parse_scheduler_conf,
    parse_timeout,
    parse_timeouts,
)
from yarn_bridge.rm.times import format_expiry

__all__ = ["AsyncRMClient", "RMClient"]


class RMClient(RMTransport):
    """A typed, HA-aware client for the RM REST API. Thread-safe; one instance per process.

    ``urls``: every RM web address (``"http://rm1:8088,http://rm2:8088"`` or a list);
    ``user``: simple-auth user name; ``auth``: a header hook (SPNEGO); ``timeout``: per
    request; ``deadline``: per call, retries included; ``max_attempts``: rounds over the RMs;
    ``backoff`` / ``max_backoff``: seconds between rounds.
    """

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> RMClient:
        """Build from ``YARN_ARBITER_RM_URL`` (comma-separated, ``yarn_bridge.env``)."""
        env = os.environ if environ is None else environ
        if not env.get(ENV_RM_URL):
            raise ValueError(f"{ENV_RM_URL} is not set (comma-separated RM web URLs)")
        return cls(env[ENV_RM_URL], **kwargs)

    # -- cluster -----------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        """``GET /info`` of the *active* RM (a standby's own answer, ``haState: STANDBY``,
        sends the client on to the next RM)."""
        path = f"{WS_PATH}/info"

        def check(resp: httpx.Response) -> None:
            if resp.status_code != 200:
                return
            try:
                info = parse_cluster_info(self._decode(resp, f"GET {path}"), f"GET {path}")
            except RMResponseError:
                return  # reported by the caller's parse below
            if info.ha_state == "STANDBY":
                raise _Standby(None)

        return parse_cluster_info(self._get(path, check=check), f"GET {path}")

    def cluster_metrics(self) -> ClusterMetrics:
        path = f"{WS_PATH}/metrics"
        return parse_cluster_metrics(self._get(path), f"GET {path}")

    def scheduler(self) -> SchedulerInfo:
        path = f"{WS_PATH}/scheduler"
        return parse_scheduler(self._get(path), f"GET {path}")

    def nodes(self, states: Iterable[str] | None = None) -> list[Node]:
        path = f"{WS_PATH}/nodes"
        params = {"states": ",".join(states)} if states else None
        return parse_nodes(self._get(path, params), f"GET {path}")

    def node(self, node_id: str) -> Node:
        path = f"{WS_PATH}/nodes/{node_id}"
        return parse_node(self._get(path), f"GET {path}")

    def gpu_capacity(self) -> tuple[int, int]:
        """(GPUs on RUNNING nodes, GPUs in use on them): the sum over :meth:`nodes`."""
        running = [n for n in self.nodes() if n.usable]
        return sum(n.gpus_total for n in running), sum(n.gpus_used for n in running)

    # -- apps --------------------------------------------------------------------------------

    def apps(
        self,
        *,
        states: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        queue: str | None = None,
        user: str | None = None,
        application_types: Iterable[str] | None = None,
        final_status: str | None = None,
        name: str | None = None,
        limit: int | None = None,
        started_time_begin: int | None = None,
        deselects: Iterable[str] | None = None,
    ) -> list[App]:
        """``GET /apps`` with the RM's own filters (tags match *any*; ``queue`` matches only
        unfinished apps, as in Hadoop)."""
        params = {
            "states": ",".join(states) if states else None,
            "applicationTags": ",".join(tags) if tags else None,
            "queue": queue,
            "user": user,
            "applicationTypes": ",".join(application_types) if application_types else None,
            "finalStatus": final_status,
            "name": name,
            "limit": limit,
            "startedTimeBegin": started_time_begin,
            "deSelects": ",".join(deselects) if deselects else None,
        }
        path = f"{WS_PATH}/apps"
        return parse_apps(self._get(path, params), f"GET {path}")

    def app(self, app_id: str) -> App:
        path = f"{WS_PATH}/apps/{app_id}"
        return parse_app(self._get(path), f"GET {path}")

    def app_state(self, app_id: str) -> str:
        path = f"{WS_PATH}/apps/{app_id}/state"
        return _Obj(self._get(path), f"GET {path}", "response").str("state")

    def kill_app(self, app_id: str, *, wait: bool = True, poll: float = 0.1) -> str:
        """``PUT /apps/{id}/state {"state":"KILLED"}``. YARN answers 202 (with the state at the
        time) while the kill is in flight; with ``wait`` the PUT is repeated until a 200 or the
        deadline. Returns the last state the RM reported (``KILLED``, or the final state of an
        app that had already ended)."""
        path = f"{WS_PATH}/apps/{app_id}/state"
        end = time.monotonic() + self.deadline
        while True:
            resp = self._call("PUT", path, body={"state": "KILLED"}, ok=(200, 202))
            state = _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").str("state")
            if resp.status_code == 200 or not wait or time.monotonic() + poll > end:
                return state
            time.sleep(poll)

    def app_queue(self, app_id: str) -> str:
        path = f"{WS_PATH}/apps/{app_id}/queue"
        return _Obj(self._get(path), f"GET {path}", "response").str("queue")

    def move_app(self, app_id: str, queue: str) -> str:
        """``PUT /apps/{id}/queue``; returns the queue the RM reports afterwards."""
        path = f"{WS_PATH}/apps/{app_id}/queue"
        resp = self._call("PUT", path, body={"queue": queue})
        return _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").str("queue")

    def app_priority(self, app_id: str) -> int:
        path = f"{WS_PATH}/apps/{app_id}/priority"
        return _Obj(self._get(path), f"GET {path}", "response").int("priority")

    def set_app_priority(self, app_id: str, priority: int) -> int:
        """``PUT /apps/{id}/priority`` (Capacity Scheduler only); returns the priority the RM
        applied (capped at ``yarn.cluster.max-application-priority``)."""
        path = f"{WS_PATH}/apps/{app_id}/priority"
        resp = self._call("PUT", path, body={"priority": int(priority)})
        return _Obj(self._decode(resp, f"PUT {path}"), f"PUT {path}", "response").int("priority")

    def app_timeouts(self, app_id: str) -> tuple[AppTimeout, ...]:
        path = f"{WS_PATH}/apps/{app_id}/timeouts"
        return parse_timeouts(self._get(path), f"GET {path}")

    def app_timeout(self, app_id: str, kind: str = "LIFETIME") -> AppTimeout:
        path = f"{WS_PATH}/apps/{app_id}/timeouts/{kind}"
        return parse_timeout(self._get(path), f"GET {path}")

    def set_app_lifetime(self, app_id: str, expiry: datetime | float) -> AppTimeout:
        """``PUT /apps/{id}/timeout`` with ``LIFETIME`` ending at ``expiry`` (a datetime or epoch
        seconds): YARN kills the app then. Returns the timeout as the RM now reports it."""
        path = f"{WS_PATH}/apps/{app_id}/timeout"
        body = {"timeout": {"type": "LIFETIME", "expiryTime": format_expiry(expiry)}}
        resp = self._call("PUT", path, body=body)
        return parse_timeout(self._decode(resp, f"PUT {path}"), f"PUT {path}")

    def new_application(self) -> NewApplication:
        path = f"{WS_PATH}/apps/new-application"
        resp = self._call("POST", path)
        return parse_new_application(self._decode(resp, f"POST {path}"), f"POST {path}")

    def submit_app(self, submission: AppSubmission | Mapping[str, Any]) -> str:
        """``POST /apps`` (202 + ``Location``); returns the application id. A submission that
        timed out or lost its connection after being sent is not re-sent
        (:class:`RMUnavailable` says so; look the id up with :meth:`app`)."""
        body = submission.to_json() if isinstance(submission, AppSubmission) else dict(submission)
        path = f"{WS_PATH}/apps"
        resp = self._call("POST", path, body=body, ok=(200, 202), idempotent=False)
        location = resp.headers.get("location", "")
        app_id = location.rstrip("/").rsplit("/", 1)[-1] if location else ""
        app_id = app_id or str(body.get("application-id", ""))
        if not app_id:
            raise RMResponseError(
                "no Location header and no application-id", endpoint=f"POST {path}"
            )
        return app_id

    # -- scheduler configuration -------------------------------------------------------------

    def scheduler_conf(self) -> dict[str, str]:
        """``GET /scheduler-conf``: the mutable scheduler configuration (name -> value)."""
        path = f"{WS_PATH}/scheduler-conf"
        return parse_scheduler_conf(self._get(path), f"GET {path}")

    def update_scheduler_conf(self, update: SchedConfUpdate | Mapping[str, Any]) -> str:
        """``PUT /scheduler-conf``. Needs a mutable conf store and YARN admin rights; an invalid
        resulting configuration is an :class:`RMBadRequest` carrying the RM's reason."""
        body = update.to_json() if isinstance(update, SchedConfUpdate) else dict(update)
        path = f"{WS_PATH}/scheduler-conf"
        resp = self._call("PUT", path, body=body)
        return resp.text.strip()


def _async_method(name: str) -> Any:
    async def method(self: AsyncRMClient, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"AsyncRMClient.{name}"
    method.__doc__ = f"Awaitable :meth:`RMClient.{name}` (runs in a worker thread)."
    return method


class AsyncRMClient:
    """The same calls as :class:`RMClient`, awaitable. Each call runs the sync client in a
    worker thread (``asyncio.to_thread``): same HA state, retries and errors, no second
    implementation to keep in step. Construct with the same arguments as :class:`RMClient`."""

    def __init__(self, urls: str | Iterable[str], **kwargs: Any) -> None:
        self.sync = RMClient(urls, **kwargs)

    @property
    def active_url(self) -> str:
        return self.sync.active_url

    async def aclose(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> AsyncRMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    cluster_info = _async_method("cluster_info")
    cluster_metrics = _async_method("cluster_metrics")
    scheduler = _async_method("scheduler")
    nodes = _async_method("nodes")
    node = _async_method("node")
    gpu_capacity = _async_method("gpu_capacity")
    apps = _async_method("apps")
    app = _async_method("app")
    app_state = _async_method("app_state")
    kill_app = _async_method("kill_app")
    app_queue = _async_method("app_queue")
    move_app = _async_method("move_app")
    app_priority = _async_method("app_priority")
    set_app_priority = _async_method("set_app_priority")
    app_timeouts = _async_method("app_timeouts")
    app_timeout = _async_method("app_timeout")
    set_app_lifetime = _async_method("set_app_lifetime")
    new_application = _async_method("new_application")
    submit_app = _async_method("submit_app")
    scheduler_conf = _async_method("scheduler_conf")
    update_scheduler_conf = _async_method("update_scheduler_conf")
