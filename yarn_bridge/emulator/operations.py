"""The operations that change the cluster from outside, as the RM carries them out.

* NodeManagers: a node registers (RUNNING), is lost (stops heartbeating), decommissioned or
  marked UNHEALTHY, and comes back; the containers of a node that goes away are lost.
* Applications: ``POST /ws/v1/cluster/apps`` (an ``ApplicationSubmissionContext``, with the
  emulator's stand-in for a GPU-asking AM in its environment) and the Python equivalent
  :meth:`Operations.add_app`; the updates ``PUT /apps/{id}/state`` (kill), ``/queue`` (move),
  ``/priority`` and ``/timeout`` (LIFETIME), with the RM's 400 answers.
* The RM: time moving on, and a restart (new cluster timestamp; the apps survive only with
  work-preserving recovery).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from yarn_bridge.emulator.capacity import CapacityScheduler
from yarn_bridge.emulator.engine import Engine
from yarn_bridge.emulator.fair import FairScheduler
from yarn_bridge.emulator.shapes import EMULATOR_GPUS_ENV, EMULATOR_SECONDS_ENV, FINAL
from yarn_bridge.emulator.state import ClusterState, _App, _bad, _iso, _kv, _Node


class Operations:
    """Node, application and RM operations on one cluster; each takes the lock and brings
    the state up to date first."""

    def __init__(
        self,
        state: ClusterState,
        engine: Engine,
        capacity: CapacityScheduler,
        fair: FairScheduler,
    ) -> None:
        self.state = state
        self.engine = engine
        self.capacity = capacity
        self.fair = fair

    # -- NodeManagers ------------------------------------------------------------------------

    def add_node(self, host: str, *, gpus: int = 4, memory_mb: int = 65536, vcores: int = 32,
                 rack: str = "/default-rack", port: int = 8041) -> str:  # fmt: skip
        """Register a NodeManager (RUNNING); returns its node id ``host:port``."""
        s = self.state
        with s.lock:
            self.engine.tick()
            node = _Node(host, port, rack, memory_mb, vcores, gpus,
                         last_health_update=s.clock.now_ms())  # fmt: skip
            if node.id in s.nodes and s.nodes[node.id].active:
                raise ValueError(f"node {node.id} is already registered")
            s.nodes[node.id] = node
            self.engine.schedule(s.time_ms)
            return node.id

    def _deactivate(self, node_id: str, state: str, report: str) -> None:
        s = self.state
        with s.lock:
            self.engine.tick()
            node = s.find_node(node_id)
            node.state = state
            node.health_report = report
            node.last_health_update = s.time_ms
            self.engine.lose_containers(node.id, s.time_ms)
            self.engine.schedule(s.time_ms)

    def lose_node(self, node_id: str) -> None:
        """The NodeManager stops heartbeating: LOST, its containers are gone."""
        self._deactivate(node_id, "LOST", "")

    def remove_node(self, node_id: str) -> None:
        """Decommission the node (it stays listed as DECOMMISSIONED)."""
        self._deactivate(node_id, "DECOMMISSIONED", "")

    def set_unhealthy(self, node_id: str, report: str = "disk failure") -> None:
        self._deactivate(node_id, "UNHEALTHY", report)

    def recover_node(self, node_id: str) -> None:
        """A LOST / UNHEALTHY / DECOMMISSIONED node comes back RUNNING (empty)."""
        s = self.state
        with s.lock:
            self.engine.tick()
            node = s.find_node(node_id)
            node.state, node.health_report = "RUNNING", ""
            node.last_health_update = s.time_ms
            self.engine.schedule(s.time_ms)

    # -- applications ------------------------------------------------------------------------

    def add_app(
        self,
        *,
        name: str = "app",
        user: str = "emulator",
        queue: str = "default",
        gpus: int = 0,
        seconds: float | None = None,
        memory_mb: int = 1024,
        vcores: int = 1,
        tags: Iterable[str] = (),
        priority: int | None = None,
        app_type: str = "YARN",
        lifetime_seconds: float | None = None,
        max_attempts: int = 1,
    ) -> str:
        """Submit an application directly (as if through ``POST /apps``, but with the GPUs its
        AM will hold once RUNNING); returns its id."""
        s = self.state
        app_id = s.new_application_id()
        with s.lock:
            self.submit(
                app_id=app_id, name=name, user=user, queue=queue, gpus=gpus, seconds=seconds,
                memory_mb=memory_mb, vcores=vcores, tags=tuple(tags), priority=priority,
                app_type=app_type, max_attempts=max_attempts, unmanaged=False,
            )  # fmt: skip
            if lifetime_seconds is not None:
                s.apps[app_id].lifetime_ms = s.time_ms + int(lifetime_seconds * 1000)
            return app_id

    def app_state(self, app_id: str) -> str:
        s = self.state
        with s.lock:
            self.engine.tick()
            return s.apps[app_id].state

    # -- time and the RM ---------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the clock (and the cluster) forward."""
        s = self.state
        s.clock.advance(seconds)
        with s.lock:
            self.engine.tick()

    def restart(self, *, keep_apps: bool) -> None:
        """The RM restarts: new cluster timestamp; with ``keep_apps`` (work-preserving
        recovery from the state store) the apps and their containers survive, otherwise the
        new RM knows no apps (NodeManagers re-register, their containers are killed)."""
        s = self.state
        with s.lock:
            self.engine.tick()
            now = s.time_ms
            s.cluster_ts = now
            s.seq = 0
            s.issued.clear()
            if not keep_apps:
                s.apps.clear()
            for node in s.nodes.values():
                node.last_health_update = now

    # -- submission --------------------------------------------------------------------------

    def resolve_queue(self, name: str) -> str | None:
        """The leaf queue path a submission or move to ``name`` goes to (``None``: no such
        Capacity Scheduler leaf; the Fair Scheduler creates it)."""
        if self.state.scheduler == "fair":
            return self.fair.resolve(name)
        return self.capacity.resolve(name)

    def submit(self, *, app_id: str, name: str, user: str, queue: str, gpus: int,
               seconds: float | None, memory_mb: int, vcores: int, tags: tuple[str, ...],
               priority: int | None, app_type: str, max_attempts: int,
               unmanaged: bool) -> _App:  # fmt: skip
        """Admit an application (the caller holds the lock): ``FAILED`` at once for an unknown
        queue or a STOPPED Capacity Scheduler queue, else ``NEW`` (``ACCEPTED`` if
        ``new_seconds`` is 0). 400 for a duplicate id or a resource beyond the maximum
        allocation."""
        s = self.state
        self.engine.tick()
        if app_id in s.apps:
            raise _bad(f"Application with id '{app_id}' is already present! Cannot add a "
                       "duplicate!")  # fmt: skip
        max_mb, max_vc = s.max_allocation
        if memory_mb > max_mb or vcores > max_vc or memory_mb < 0 or vcores < 0:
            raise _bad(f"Invalid resource request, requested resource <memory:{memory_mb}, "
                       f"vCores:{vcores}> is outside the allowed range <memory:{max_mb}, "
                       f"vCores:{max_vc}>")  # fmt: skip
        if seconds is None:
            jitter = s.rng.uniform(-s.duration_jitter, s.duration_jitter)
            seconds = s.app_seconds * (1.0 + jitter)
        path = self.resolve_queue(queue)
        if priority is None or priority < 0:
            priority = self.capacity.default_priority(path) if path else 0
        app = _App(
            id=app_id, name=name, user=user, queue=path or queue, app_type=app_type,
            tags=tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip())),
            priority=min(priority, s.max_priority), am_memory_mb=memory_mb,
            am_vcores=vcores, gpus=max(0, gpus), duration_ms=max(1, int(seconds * 1000)),
            submitted_ms=s.time_ms, max_attempts=max(1, max_attempts), unmanaged=unmanaged,
        )  # fmt: skip
        s.apps[app_id] = app
        if path is None:
            self.engine.end(
                app,
                s.time_ms,
                "FAILED",
                "FAILED",
                f"Application {app_id} submitted by user {user} to unknown queue: {queue}",
            )
        elif s.scheduler == "capacity" and self.capacity.queue_state(path) != "RUNNING":
            self.engine.end(app, s.time_ms, "FAILED", "FAILED",
                            f"Queue {path} is STOPPED. Cannot accept submission of application: "
                            f"{app_id}")  # fmt: skip
        elif s.new_seconds <= 0:
            app.state, app.accepted_ms = "ACCEPTED", s.time_ms
            self.engine.schedule(s.time_ms)
        return app

    def submit_json(self, body: Any, user: str | None) -> str:
        """``POST /apps`` body -> application id (400 on a malformed context)."""
        if isinstance(body, dict) and "application-submission-context" in body:
            body = body["application-submission-context"]
        if not isinstance(body, dict):
            raise _bad("The request body must be an application-submission-context object")
        app_id = str(body.get("application-id") or "")
        if not re.fullmatch(r"application_\d+_\d+", app_id):
            raise _bad(f"Invalid ApplicationId: {app_id!r}")
        res = body.get("resource") or {}
        if not isinstance(res, dict):
            raise _bad("resource must be an object")
        spec = body.get("am-container-spec") or {}
        env = _kv(spec.get("environment"), "am-container-spec.environment") if isinstance(
            spec, dict) else {}  # fmt: skip
        tags_raw = body.get("application-tags") or {}
        tags = tags_raw.get("tag", []) if isinstance(tags_raw, dict) else tags_raw
        tags = [tags] if isinstance(tags, str) else list(tags or [])
        try:
            gpus = int(env.get(EMULATOR_GPUS_ENV, "0"))
            seconds = float(env[EMULATOR_SECONDS_ENV]) if EMULATOR_SECONDS_ENV in env else None
            memory = int(res.get("memory", 1024))
            cores = int(res.get("vCores", 1))
            prio = int(body["priority"]) if "priority" in body else None
            attempts = int(body.get("max-app-attempts") or 1)
        except (TypeError, ValueError) as exc:
            raise _bad(f"Malformed application-submission-context: {exc}") from None
        with self.state.lock:
            app = self.submit(
                app_id=app_id, name=str(body.get("application-name") or "N/A"),
                user=user or "dr.who", queue=str(body.get("queue") or "default"), gpus=gpus,
                seconds=seconds, memory_mb=memory, vcores=cores, tags=tuple(map(str, tags)),
                priority=prio, app_type=str(body.get("application-type") or "YARN"),
                max_attempts=attempts, unmanaged=bool(body.get("unmanaged-AM", False)),
            )  # fmt: skip
            return app.id

    # -- app operations ----------------------------------------------------------------------

    def kill(self, app_id: str, diagnostics: str | None = None) -> tuple[int, str]:
        """The kill half of ``PUT /apps/{id}/state``: (HTTP status, state to report)."""
        s = self.state
        with s.lock:
            self.engine.tick()
            app = s.find_app(app_id)
            if app.state in FINAL:
                return 200, app.state
            before = app.state
            self.engine.end(app, s.time_ms, "KILLED", "KILLED",
                            diagnostics or f"Application {app_id} was killed by user")  # fmt: skip
            self.engine.schedule(s.time_ms)
            return 202, before

    def move(self, app_id: str, queue: str) -> str:
        s = self.state
        with s.lock:
            self.engine.tick()
            app = s.find_app(app_id)
            if app.state in FINAL:
                raise _bad(f"App in {app.state} state cannot be moved.")
            path = self.resolve_queue(queue)
            if path is None:
                raise _bad(f"Failed to move app {app_id} to queue {queue}: queue does not exist")
            app.queue = path
            return s.queue_display(path)

    def set_priority(self, app_id: str, priority: int) -> int:
        s = self.state
        with s.lock:
            self.engine.tick()
            app = s.find_app(app_id)
            if s.scheduler != "capacity":
                raise _bad("Application priority is only supported by the CapacityScheduler")
            if app.state in FINAL:
                raise _bad(f"Application {app_id} is in {app.state} state; cannot update "
                           "its priority")  # fmt: skip
            app.priority = max(0, min(int(priority), s.max_priority))
            self.engine.schedule(s.time_ms)
            return app.priority

    def set_lifetime(self, app_id: str, expiry_ms: int) -> None:
        s = self.state
        with s.lock:
            self.engine.tick()
            app = s.find_app(app_id)
            if app.state in FINAL:
                raise _bad(f"Application {app_id} is in {app.state} state; cannot update its "
                           "timeout")  # fmt: skip
            if expiry_ms <= s.time_ms:
                raise _bad("Expire time is less than current time, current-time="
                           f"{_iso(s.time_ms)} expire-time={_iso(expiry_ms)}")  # fmt: skip
            app.lifetime_ms = expiry_ms
