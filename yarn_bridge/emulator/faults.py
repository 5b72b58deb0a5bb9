"""Fault injection for one emulated RM, and the fault-control endpoint ``/emulator/faults``.

The faults a client of a real ResourceManager meets, on demand: an outage (connection refused,
``503``, or connections accepted then dropped without an answer), slow answers, and injected
answers for a path (a raw body, the real answer transformed or truncated, or a connection cut
half-way through the body), plus timed outages and RM restarts. :class:`Faults` keeps them;
the RM's port itself (a ``refused`` outage, a restart) is :class:`RMEmulator`'s.

:data:`FAULTS_PATH` serves the same faults over HTTP so that ``yarn-arbiter emulate-rm`` can be
driven from outside the process: ``GET`` shows the faults in force, ``POST`` a JSON object
changes them (keys in ``yarn_bridge.cli.FAULTS_HELP``). The endpoint is outside ``/ws/v1`` so it
can never be mistaken for a Hadoop endpoint, and is never delayed, never in a 503/drop outage,
not in :attr:`RMEmulator.requests`. A body is checked whole before anything changes.

:class:`RMEmulator` is :class:`yarn_bridge.emulator.server.RMEmulator`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from yarn_bridge.emulator.replies import _json_reply, _Reply
from yarn_bridge.emulator.shapes import WS

if TYPE_CHECKING:
    from yarn_bridge.emulator.server import RMEmulator

#: The emulator's own fault-control endpoint (outside Hadoop's ``/ws/v1``).
FAULTS_PATH: Final = "/emulator/faults"
_FAULT_KEYS: Final = frozenset({"clear", "delay", "outage", "outage_after", "outage_seconds",
                                "inject", "restart", "nodes"})  # fmt: skip
_INJECT_KEYS: Final = frozenset({"path", "body", "status", "truncate", "disconnect",
                                 "content_type", "method", "times"})  # fmt: skip
_UNSET: Any = object()


@dataclass
class _Injection:
    path: str
    method: str | None
    status: int
    body: bytes | None
    transform: Callable[[Any], Any] | None
    truncate: float | None
    disconnect: bool
    content_type: str
    times: int


class Faults:
    """The faults in force on one :class:`RMEmulator` (``rm``): ``outage``, ``delay``
    (seconds every answer waits), ``injections`` and the ``timers`` of faults to come. Actions
    on the RM itself (outage, restart, node changes) go through its public API."""

    def __init__(self, rm: RMEmulator) -> None:
        self.rm = rm
        self.outage: Literal["refused", "503", "drop"] | None = None
        self.delay = 0.0
        self.injections: list[_Injection] = []
        self.lock = threading.Lock()
        self.timers: list[threading.Timer] = []

    # -- changing the faults -----------------------------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Every answer waits this long first (slow RM); 0 to stop."""
        self.delay = max(0.0, seconds)

    def inject(
        self,
        path: str,
        *,
        body: str | bytes | None = None,
        status: int = 200,
        transform: Callable[[Any], Any] | None = None,
        truncate: float | None = None,
        disconnect: bool = False,
        content_type: str = "application/json",
        method: str | None = None,
        times: int = 1,
    ) -> None:
        """Add an injected answer for ``path`` (:meth:`RMEmulator.inject`)."""
        if not path.startswith("/ws/"):
            path = WS + (path if path.startswith("/") else "/" + path)
        full = path
        raw = body.encode() if isinstance(body, str) else body
        with self.lock:
            self.injections.append(
                _Injection(
                    full.rstrip("/"),
                    method,
                    status,
                    raw,
                    transform,
                    truncate,
                    disconnect,
                    content_type,
                    times,
                )
            )

    def clear(self) -> None:
        """No injections, no timers, no delay, no outage."""
        with self.lock:
            self.injections.clear()
            timers, self.timers = self.timers, []
        for t in timers:
            t.cancel()
        self.delay = 0.0
        self.rm.set_outage(None)

    def after(self, seconds: float, action: Callable[[], None]) -> threading.Timer:
        """Run ``action`` in ``seconds`` on a timer thread (cancelled by :meth:`RMEmulator.stop`
        and :meth:`clear`)."""
        timer = threading.Timer(max(0.0, seconds), action)
        timer.daemon = True
        with self.lock:
            self.timers = [t for t in self.timers if t.is_alive()] + [timer]
        timer.start()
        return timer

    def cancel_timers(self) -> None:
        """Cancel the faults still to come (the RM stops)."""
        with self.lock:
            timers, self.timers = self.timers, []
        for t in timers:
            t.cancel()

    def schedule_outage(self, mode: Literal["refused", "503", "drop"], *, after: float = 0.0,
                        seconds: float | None = None) -> None:  # fmt: skip
        """An outage of ``mode`` starting in ``after`` seconds and lasting ``seconds`` (``None``:
        until :meth:`RMEmulator.set_outage` ``(None)`` or :meth:`clear`)."""
        if mode not in ("refused", "503", "drop"):
            raise ValueError(f"unknown outage mode {mode!r}")
        if seconds is not None and seconds <= 0:
            raise ValueError(f"outage seconds must be > 0, got {seconds}")

        def begin() -> None:
            self.rm.set_outage(mode)
            if seconds is not None:
                self.rm.after(seconds, lambda: self.rm.set_outage(None))

        if after <= 0:
            begin()
        else:
            self.rm.after(after, begin)

    # -- the fault-control endpoint ----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The faults in force (``GET`` :data:`FAULTS_PATH`)."""
        with self.lock:
            injections = [{"path": i.path, "method": i.method, "status": i.status,
                           "times": i.times} for i in self.injections]  # fmt: skip
            pending = sum(1 for t in self.timers if t.is_alive())
        return {
            "outage": self.outage,
            "delay": self.delay,
            "injections": injections,
            "scheduled": pending,
            "clusterId": self.rm.cluster.cluster_ts,
            "hadoopVersion": self.rm.cluster.version,
        }

    def apply(self, doc: Any) -> None:
        """Apply a ``POST`` :data:`FAULTS_PATH` body (package docstring); ``ValueError`` if
        malformed, before anything changes."""
        if not isinstance(doc, dict):
            raise ValueError("the body must be a JSON object")
        unknown = set(doc) - _FAULT_KEYS
        if unknown:
            raise ValueError(f"unknown fault keys {sorted(unknown)}; known: {sorted(_FAULT_KEYS)}")

        def number(key: str, where: Mapping[str, Any], default: float | None) -> float | None:
            raw = where.get(key, default)
            if raw is None:
                return None
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
                raise ValueError(f"{key} must be a number >= 0, got {raw!r}")
            return float(raw)

        delay = number("delay", doc, None)
        outage = doc.get("outage", _UNSET)
        if outage is not _UNSET and outage not in (None, "refused", "503", "drop"):
            raise ValueError(f"outage must be refused, 503, drop or null, got {outage!r}")
        outage_after = number("outage_after", doc, 0.0) or 0.0
        outage_seconds = number("outage_seconds", doc, None)
        if outage == "refused" and outage_seconds is None:
            raise ValueError("outage 'refused' closes this endpoint too: give outage_seconds")
        if outage_seconds == 0:
            raise ValueError("outage_seconds must be > 0")
        raw_inj = doc.get("inject") or []
        injections = raw_inj if isinstance(raw_inj, list) else [raw_inj]
        checked: list[dict[str, Any]] = []
        for inj in injections:
            if not isinstance(inj, dict) or not isinstance(inj.get("path"), str):
                raise ValueError("every inject entry needs a 'path'")
            extra = set(inj) - _INJECT_KEYS
            if extra:
                raise ValueError(f"unknown inject keys {sorted(extra)}")
            status = inj.get("status", 200)
            times = inj.get("times", 1)
            if not isinstance(status, int) or not 100 <= status <= 599:
                raise ValueError(f"inject status must be an HTTP status, got {status!r}")
            if not isinstance(times, int) or times < 1:
                raise ValueError(f"inject times must be an integer >= 1, got {times!r}")
            truncate = number("truncate", inj, None)
            if truncate is not None and truncate > 1:
                raise ValueError(f"inject truncate must be a fraction in [0, 1], got {truncate}")
            body = inj.get("body")
            if body is not None and not isinstance(body, str):
                body = json.dumps(body)
            checked.append({"path": inj["path"], "body": body, "status": status,
                            "truncate": truncate, "disconnect": bool(inj.get("disconnect")),
                            "content_type": str(inj.get("content_type", "application/json")),
                            "method": inj.get("method"), "times": times})  # fmt: skip
        restart = doc.get("restart")
        if restart is not None and not isinstance(restart, dict):
            raise ValueError("restart must be an object {keep_apps, downtime, after}")
        if restart is not None:
            extra = set(restart) - {"keep_apps", "downtime", "after"}
            if extra:
                raise ValueError(f"unknown restart keys {sorted(extra)}")
            number("downtime", restart, 0.0)
            number("after", restart, 0.0)
        nodes = doc.get("nodes") or {}
        if not isinstance(nodes, dict):
            raise ValueError("nodes must map node ids to LOST, UNHEALTHY, DECOMMISSIONED, RUNNING")
        cluster = self.rm.cluster
        node_actions = {"LOST": cluster.lose_node, "UNHEALTHY": cluster.set_unhealthy,
                        "DECOMMISSIONED": cluster.remove_node,
                        "RUNNING": cluster.recover_node}  # fmt: skip
        for node_id, state in nodes.items():
            if str(state).upper() not in node_actions:
                raise ValueError(f"node {node_id}: unknown state {state!r}")
            with cluster.lock:
                try:
                    cluster.state.find_node(str(node_id))
                except KeyError:
                    raise ValueError(f"no node {node_id!r}") from None
        # -- everything checked: apply ---------------------------------------------------
        if doc.get("clear"):
            self.rm.clear_faults()
        if delay is not None:
            self.rm.set_delay(delay)
        for inj in checked:
            path = inj.pop("path")
            self.rm.inject(path, **inj)
        for node_id, state in nodes.items():
            node_actions[str(state).upper()](str(node_id))
        if outage is None:
            self.rm.set_outage(None)
        elif outage is not _UNSET:
            if outage == "refused":  # answer this request before the port closes
                outage_after = max(outage_after, 0.05)
            self.rm.schedule_outage(outage, after=outage_after, seconds=outage_seconds)
        if restart is not None:
            keep = bool(restart.get("keep_apps", True))
            downtime = float(restart.get("downtime", 0.0))
            # on a timer, so that this request is answered before the port closes
            self.rm.after(max(0.05, float(restart.get("after", 0.0))),
                          lambda: self.rm.restart(keep_apps=keep, downtime=downtime))  # fmt: skip

    def control(self, method: str, body: bytes) -> _Reply:
        """Answer a request to :data:`FAULTS_PATH`: ``GET`` the faults in force, ``POST``
        changes them (400 and no change if the body is malformed)."""
        if method == "GET":
            return _json_reply(200, self.snapshot())
        if method != "POST":
            return _json_reply(405, {"error": f"{method} not allowed on {FAULTS_PATH}"})
        try:
            self.apply(json.loads(body or b"{}"))
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
            return _json_reply(400, {"error": str(exc)})
        return _json_reply(200, self.snapshot())

    # -- answering with the faults ----------------------------------------------------------

    def take_injection(self, method: str, path: str) -> _Injection | None:
        """The injection for this request, if any (one of its ``times`` is used up)."""
        with self.lock:
            for inj in self.injections:
                if inj.path == path and (inj.method is None or inj.method == method):
                    inj.times -= 1
                    if inj.times <= 0:
                        self.injections.remove(inj)
                    return inj
        return None

    @staticmethod
    def apply_injection(inj: _Injection, reply: _Reply) -> _Reply:
        """``reply`` as ``inj`` changes it (status, transformed / truncated / cut body)."""
        data = reply.body
        if inj.transform is not None:
            data = json.dumps(inj.transform(json.loads(data))).encode()
        if inj.truncate is not None:
            data = data[: max(1, int(len(data) * inj.truncate))]
        if inj.disconnect:
            data = data or b"{}"  # something to cut in half
            return _Reply(inj.status, data, inj.content_type, dict(reply.headers),
                          disconnect_after=len(data) // 2)  # fmt: skip
        return _Reply(inj.status, data, inj.content_type, dict(reply.headers))
