"""The event loop and the placement of containers: how applications move through their life.

Time is the cluster's :class:`~yarn_bridge.emulator.state.Clock`; the state is brought up to it
lazily, event by event, whenever it is read (:meth:`Engine.tick`), so that an app that finishes
frees its GPUs at the moment it finishes, even after a large ``advance``. The events imitate
the RM's application life cycle: ``NEW`` for ``new_seconds`` -> ``ACCEPTED`` -> ``RUNNING``
once ``start_seconds`` have passed and its AM container plus one container per requested GPU
fit on RUNNING nodes (first fit, all or nothing, by priority then submission order; under the
Capacity Scheduler also within the queue's effective maximum resources) -> ``FINISHED`` /
``SUCCEEDED`` after its duration, or ``KILLED`` when its LIFETIME timeout expires. A lost node
takes its containers: the app whose AM was there starts a new attempt or ``FAILED``, lost GPU
containers are placed again.
"""

from __future__ import annotations

import math

from yarn_bridge.emulator.capacity import CapacityScheduler
from yarn_bridge.emulator.shapes import AM_WAITING_DIAGNOSTICS, LIFETIME_DIAGNOSTICS, LIVE
from yarn_bridge.emulator.state import ClusterState, _App, _Container


class Engine:
    """Advances one cluster's state in time and places its containers."""

    def __init__(self, state: ClusterState, capacity: CapacityScheduler) -> None:
        self.state = state
        self.capacity = capacity

    # -- the event loop ----------------------------------------------------------------------

    def tick(self) -> None:
        """Bring the state up to the clock's now, one event at a time (so that a finished
        app frees its GPUs at the moment it finishes, even after a large ``advance``)."""
        s = self.state
        with s.lock:
            now = s.clock.now_ms()
            while True:
                t = self._next_event(now)
                if t is None:
                    break
                self._accrue(t)
                self._process(t)
            self._accrue(max(now, s.time_ms))
            self._process(s.time_ms)

    def _next_event(self, now: int) -> int | None:
        s = self.state
        best: int | None = None
        for app in s.apps.values():
            times: list[int] = []
            if app.state == "NEW":
                times.append(app.submitted_ms + int(s.new_seconds * 1000))
            elif app.state == "ACCEPTED" and app.accepted_ms is not None:
                times.append(app.accepted_ms + int(s.start_seconds * 1000))
            elif app.state == "RUNNING" and app.launched_ms is not None:
                times.append(app.launched_ms + app.duration_ms)
            if app.state in LIVE and app.lifetime_ms is not None:
                times.append(app.lifetime_ms)
            for t in times:
                if s.time_ms < t <= now and (best is None or t < best):
                    best = t
        return best

    def _accrue(self, t: int) -> None:
        s = self.state
        dt = t - s.time_ms
        if dt <= 0:
            return
        for app in s.apps.values():
            for c in app.containers:
                app.memory_ms += c.memory_mb * dt
                app.vcore_ms += c.vcores * dt
                app.gpu_ms += c.gpus * dt
        s.time_ms = t

    def _process(self, t: int) -> None:
        s = self.state
        for app in s.apps.values():
            if app.state in LIVE and app.lifetime_ms is not None and app.lifetime_ms <= t:
                self.end(app, t, "KILLED", "KILLED", LIFETIME_DIAGNOSTICS)
            elif (app.state == "RUNNING" and app.launched_ms is not None
                  and app.launched_ms + app.duration_ms <= t):  # fmt: skip
                app.progress = 1.0
                self.end(app, t, "FINISHED", "SUCCEEDED", "")
            elif app.state == "NEW" and app.submitted_ms + int(s.new_seconds * 1000) <= t:
                app.state, app.accepted_ms = "ACCEPTED", t
        self.schedule(t)

    def end(self, app: _App, t: int, state: str, final: str, diagnostics: str) -> None:
        """``app`` ends at ``t`` in ``state`` / ``final`` status; its containers are released."""
        if app.state == "RUNNING" and app.launched_ms is not None:
            app.progress = min(1.0, (t - app.launched_ms) / app.duration_ms)
        if state == "FINISHED":
            app.progress = 1.0
        app.state, app.final_status, app.finished_ms = state, final, t
        if diagnostics:
            app.diagnostics = diagnostics
        app.containers.clear()

    # -- placement ---------------------------------------------------------------------------

    def _free(self) -> dict[str, list[int]]:
        """Node id -> [memory, vcores, GPUs] free on each RUNNING node."""
        s = self.state
        free = {
            n.id: [n.memory_mb, n.vcores, n.gpus] for n in s.nodes.values() if n.state == "RUNNING"
        }
        for app in s.apps.values():
            for c in app.containers:
                if c.node in free:
                    f = free[c.node]
                    f[0] -= c.memory_mb
                    f[1] -= c.vcores
                    f[2] -= c.gpus
        return free

    @staticmethod
    def _fit(free: dict[str, list[int]], mem: int, vc: int, gpus: int) -> str | None:
        """First fit: the first node with room (taken from ``free``), or ``None``."""
        for node_id, f in free.items():
            if f[0] >= mem and f[1] >= vc and f[2] >= gpus:
                f[0] -= mem
                f[1] -= vc
                f[2] -= gpus
                return node_id
        return None

    def _new_container(self, app: _App, node: str, mem: int, vc: int, gpus: int,
                       is_am: bool) -> _Container:  # fmt: skip
        app.container_seq += 1
        cid = (f"container_{self.state.cluster_ts}_{app.id.rsplit('_', 1)[-1]}_"
               f"{app.attempt:02d}_{app.container_seq:06d}")  # fmt: skip
        return _Container(cid, node, mem, vc, gpus, is_am)

    def _queue_room(self, path: str, mem: int, vc: int, gpus: int) -> bool:
        """Whether queue ``path`` stays within its effective maximum resources (Capacity
        Scheduler; the Fair Scheduler sets no limit here)."""
        s = self.state
        if s.scheduler != "capacity":
            return True
        eff = self.capacity.effective()
        if path not in eff:
            return True
        room = eff[path][1]
        used = s.used_in(path)
        return (
            used[0] + mem <= room[0] + 1e-6
            and used[1] + vc <= room[1] + 1e-6
            and (gpus == 0 or used[2] + gpus <= math.floor(room[2] + 1e-6))
        )

    def schedule(self, t: int) -> None:
        """Place containers at ``t``: GPU containers a RUNNING app lost come back first, then
        waiting ACCEPTED apps start (priority, then submission order), all or nothing."""
        s = self.state
        free = self._free()
        gmb, gvc = s.gpu_container
        # running apps that lost GPU containers on a lost node take them back first
        for app in s.apps.values():
            if app.state != "RUNNING":
                continue
            have = sum(c.gpus for c in app.containers)
            for _ in range(app.gpus - have):
                node = self._fit(free, gmb, gvc, 1)
                if node is None:
                    break
                app.containers.append(self._new_container(app, node, gmb, gvc, 1, False))
        start_ms = int(s.start_seconds * 1000)
        waiting = sorted(
            (a for a in s.apps.values()
             if a.state == "ACCEPTED" and a.accepted_ms is not None and not a.containers
             and a.accepted_ms + start_ms <= t),
            key=lambda a: (-a.priority, a.submitted_ms, a.id),
        )  # fmt: skip
        for app in waiting:
            # an AM that never registers never asks for its GPU containers
            gpus = app.gpus if s.am_registers else 0
            mem = app.am_memory_mb + gpus * gmb
            vc = app.am_vcores + gpus * gvc
            if not self._queue_room(app.queue, mem, vc, gpus):
                continue
            trial = {k: list(v) for k, v in free.items()}
            am_node = self._fit(trial, app.am_memory_mb, app.am_vcores, 0)
            gpu_nodes = [self._fit(trial, gmb, gvc, 1) for _ in range(gpus)]
            if am_node is None or any(n is None for n in gpu_nodes):
                continue
            free = trial
            app.containers = [
                self._new_container(app, am_node, app.am_memory_mb, app.am_vcores, 0, True)
            ]
            for node in gpu_nodes:
                assert node is not None
                app.containers.append(self._new_container(app, node, gmb, gvc, 1, False))
            app.launched_ms, app.am_node = t, am_node
            if s.am_registers:
                app.state = "RUNNING"
            else:
                app.diagnostics = AM_WAITING_DIAGNOSTICS

    def lose_containers(self, node_id: str, t: int) -> None:
        """Node ``node_id`` is gone at ``t`` with its containers: an app whose AM ran there
        starts a new attempt, or fails when its attempts are spent."""
        for app in self.state.apps.values():
            if not any(c.node == node_id for c in app.containers):
                continue
            am_lost = any(c.node == node_id and c.is_am for c in app.containers)
            app.containers = [c for c in app.containers if c.node != node_id]
            if not am_lost:
                continue
            if app.attempt < app.max_attempts:
                app.attempt += 1
                app.containers.clear()
                app.state, app.accepted_ms, app.launched_ms = "ACCEPTED", t, None
                app.progress = 0.0
            else:
                self.end(app, t, "FAILED", "FAILED",
                         f"Application {app.id} failed {app.max_attempts} times due to AM "
                         f"Container exited with exitCode: -100. Container released on a "
                         f"*lost* node {node_id}")  # fmt: skip
