"""The emulated ResourceManager's HTTP server: :class:`RMEmulator` and :class:`RMHAPair`.

:class:`RMEmulator` is a ``ThreadingHTTPServer`` shell around one
:class:`~yarn_bridge.emulator.cluster.SimCluster`: it listens (``start()`` returns its URL),
records the requests it serves (:attr:`RMEmulator.requests`), applies the faults in force
(:mod:`yarn_bridge.emulator.faults`) and hands ``/ws/v1/cluster/*`` to the REST routing
(:mod:`yarn_bridge.emulator.routes`). As a STANDBY RM it answers ``/ws/v1/cluster/info`` itself
(``haState: STANDBY``) and every other REST path with ``307`` + ``Location`` to the active RM
(``standby_mode="redirect"``, Hadoop 2.8+) or with the older ``200`` "This is standby RM.
Redirecting to the current active RM" page and a ``Refresh`` header
(``standby_mode="refresh"``). An RM restart closes the port for its downtime; the cluster
keeps its apps only with work-preserving recovery.

:class:`RMHAPair` is two emulators over one cluster (the shared ZooKeeper state store), one
ACTIVE, one STANDBY, ``failover()`` on demand.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from yarn_bridge.emulator.cluster import SimCluster
from yarn_bridge.emulator.faults import FAULTS_PATH, Faults
from yarn_bridge.emulator.replies import _error_reply, _Reply, text_type
from yarn_bridge.emulator.routes import route
from yarn_bridge.emulator.shapes import WS
from yarn_bridge.emulator.state import _HTTPError


@dataclass(frozen=True)
class RequestRecord:
    """One request the emulator saw (for tests of auth and routing)."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], emulator: RMEmulator) -> None:
        self.emulator = emulator
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # a client that gave up (timeout) or a cut connection
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # headers and body go out as two writes: without this, Nagle + delayed ACK add 40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.emulator._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.emulator._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        reply = self.server.emulator._handle(method, self.path, dict(self.headers.items()), body)
        if reply is None:  # outage: drop the connection without an answer
            self.close_connection = True
            return
        self.send_response(reply.status)
        if reply.content_type is not None:
            self.send_header("Content-Type", f"{reply.content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(reply.body)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if reply.disconnect_after is not None:
            self.wfile.write(reply.body[: reply.disconnect_after])
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(reply.body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


class RMEmulator:
    """One emulated ResourceManager (HTTP server) over a :class:`SimCluster`.

    ``RMEmulator(nodes=4, gpus_per_node=4, manual_clock=True).start()`` returns
    ``http://127.0.0.1:<port>``. Keyword arguments other than the ones below go to
    :class:`SimCluster` when no ``cluster`` is given.

    ``ha_state``: ``"ACTIVE"`` or ``"STANDBY"``; ``standby_mode``: ``"redirect"`` (307) or
    ``"refresh"`` (200 page + Refresh header); ``require_auth``: refuse writes that carry neither
    ``user.name`` nor an ``Authorization`` header (403, Hadoop's AuthorizationException);
    ``admins``: users allowed to mutate the scheduler configuration (``None`` = anyone);
    ``control``: serve the fault-control endpoint :data:`FAULTS_PATH`
    (:mod:`yarn_bridge.emulator.faults`); ``sleep``: how the RM waits (a slow answer's delay, a
    restart's downtime), ``time.sleep`` unless a test injects its own.

    The faults in force are kept by :attr:`faults` (:class:`~yarn_bridge.emulator.faults.Faults`),
    the REST routing is :func:`yarn_bridge.emulator.routes.route`.
    """

    def __init__(
        self,
        cluster: SimCluster | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ha_state: Literal["ACTIVE", "STANDBY"] = "ACTIVE",
        standby_mode: Literal["redirect", "refresh"] = "redirect",
        require_auth: bool = False,
        admins: Iterable[str] | None = None,
        control: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        **cluster_kwargs: Any,
    ) -> None:
        if cluster is not None and cluster_kwargs:
            raise TypeError(f"cluster given: unexpected arguments {sorted(cluster_kwargs)}")
        self.cluster = cluster if cluster is not None else SimCluster(**cluster_kwargs)
        self.host = host
        self._port = port
        self.ha_state = ha_state
        self.ha_enabled = False
        self.standby_mode = standby_mode
        self.peer: RMEmulator | None = None
        self.require_auth = require_auth
        self.admins = None if admins is None else frozenset(admins)
        self.requests: deque[RequestRecord] = deque(maxlen=1000)
        self.started_on = self.cluster.clock.now_ms()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._life_lock = threading.Lock()
        self.control = control
        self._sleep = sleep
        self.faults = Faults(self)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> str:
        """Listen (on ``port``, or a free one) and serve in a daemon thread; returns the URL."""
        with self._life_lock:
            if self._server is None:
                self._open()
        return self.url

    def stop(self) -> None:
        self.faults.cancel_timers()
        with self._life_lock:
            self._close()

    def __enter__(self) -> RMEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _open(self) -> None:
        srv = _Server((self.host, self._port), self)
        self._port = srv.server_address[1]
        self._server = srv
        self._thread = threading.Thread(
            target=srv.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"rm-emulator-{self._port}", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _close(self) -> None:
        srv, self._server = self._server, None
        if srv is None:
            return
        srv.shutdown()
        srv.server_close()
        with self._conn_lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._conn_lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    # -- faults ------------------------------------------------------------------------------

    def set_outage(self, mode: Literal["refused", "503", "drop"] | None) -> None:
        """``"refused"``: close the listening socket (connection refused) and open connections;
        ``"503"``: answer every request 503; ``"drop"``: accept, then close without answering;
        ``None``: back to normal (re-listening on the same port)."""
        if mode not in (None, "refused", "503", "drop"):
            raise ValueError(f"unknown outage mode {mode!r}")
        with self._life_lock:
            was = self.faults.outage
            self.faults.outage = mode
            if mode == "refused" and self._server is not None:
                self._close()
            elif mode != "refused" and was == "refused" and self._server is None:
                self._open()

    def set_delay(self, seconds: float) -> None:
        """Every answer waits this long first (slow RM); 0 to stop."""
        self.faults.set_delay(seconds)

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
        """Answer the next ``times`` requests for ``path`` (``/apps`` or the full
        ``/ws/v1/cluster/apps``; query ignored) differently: a raw ``body``; or the real answer
        passed through ``transform`` (decoded JSON in, JSON-able out); or the real answer cut
        to its first ``truncate`` fraction (a complete HTTP response with partial JSON). With
        ``disconnect`` the full length is announced but the connection closes half-way."""
        self.faults.inject(path, body=body, status=status, transform=transform,
                           truncate=truncate, disconnect=disconnect, content_type=content_type,
                           method=method, times=times)  # fmt: skip

    def clear_faults(self) -> None:
        self.faults.clear()

    def after(self, seconds: float, action: Callable[[], None]) -> threading.Timer:
        """Run ``action`` in ``seconds`` on a timer thread (cancelled by :meth:`stop` and
        :meth:`clear_faults`)."""
        return self.faults.after(seconds, action)

    def schedule_outage(self, mode: Literal["refused", "503", "drop"], *, after: float = 0.0,
                        seconds: float | None = None) -> None:  # fmt: skip
        """An outage of ``mode`` starting in ``after`` seconds and lasting ``seconds`` (``None``:
        until :meth:`set_outage` ``(None)`` or :meth:`clear_faults`)."""
        self.faults.schedule_outage(mode, after=after, seconds=seconds)

    def faults_json(self) -> dict[str, Any]:
        """The faults in force (``GET`` :data:`FAULTS_PATH`)."""
        return self.faults.snapshot()

    def apply_faults(self, doc: Any) -> None:
        """Apply a ``POST`` :data:`FAULTS_PATH` body; ``ValueError`` if malformed, before
        anything changes."""
        self.faults.apply(doc)

    @property
    def _delay(self) -> float:
        """The delay every answer waits (``faults.delay``)."""
        return self.faults.delay

    def restart(self, *, keep_apps: bool = True, downtime: float = 0.0) -> None:
        """Restart the RM: the port refuses connections for ``downtime`` seconds, the cluster
        timestamp changes, and the apps survive only with ``keep_apps`` (recovery enabled)."""
        with self._life_lock:
            self._close()
            self.cluster.restart(keep_apps=keep_apps)
            self.started_on = self.cluster.clock.now_ms()
            if downtime > 0:
                self._sleep(downtime)
            if self.faults.outage != "refused":
                self._open()

    # -- conveniences (delegating to the cluster) --------------------------------------------

    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    def add_node(self, host: str, **kwargs: Any) -> str:
        return self.cluster.add_node(host, **kwargs)

    def lose_node(self, node_id: str) -> None:
        self.cluster.lose_node(node_id)

    def remove_node(self, node_id: str) -> None:
        self.cluster.remove_node(node_id)

    def recover_node(self, node_id: str) -> None:
        self.cluster.recover_node(node_id)

    def add_app(self, **kwargs: Any) -> str:
        return self.cluster.add_app(**kwargs)

    # -- request handling --------------------------------------------------------------------

    def _handle(self, method: str, raw_path: str, headers: Mapping[str, str],
                body: bytes) -> _Reply | None:  # fmt: skip
        if self.control and urlsplit(raw_path).path.rstrip("/") == FAULTS_PATH:
            return self.faults.control(method, body)  # never delayed, never in an outage
        delay = self.faults.delay
        if delay > 0:
            self._sleep(delay)
        outage = self.faults.outage
        if outage == "drop":
            return None
        if outage == "503":
            return _Reply(503, b"<html><body><h2>HTTP ERROR 503</h2>Service Unavailable</body>"
                          b"</html>", "text/html")  # fmt: skip
        split = urlsplit(raw_path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        lower_headers = {k.lower(): v for k, v in headers.items()}
        self.requests.append(RequestRecord(method, path, query, lower_headers))
        if self.ha_state != "ACTIVE" and path not in (WS, f"{WS}/info"):
            return self._standby_reply(raw_path)
        inj = self.faults.take_injection(method, path)
        if inj is not None and inj.body is not None:
            return _Reply(inj.status, inj.body, inj.content_type)
        try:
            reply = route(self, method, path, query, lower_headers, body)
        except _HTTPError as err:
            reply = _error_reply(err, text_type(self.cluster.jersey2))
        if inj is not None:
            reply = self.faults.apply_injection(inj, reply)
        return reply

    def _standby_reply(self, raw_path: str) -> _Reply:
        peer = self.peer
        if peer is not None and peer.ha_state == "ACTIVE" and peer.running:
            target = peer.url + raw_path
            if self.standby_mode == "redirect":
                return _Reply(307, f"This is standby RM. The redirect url is: {target}\n".encode(),
                              "text/plain", {"Location": target})  # fmt: skip
        else:
            target = self.url + raw_path
        msg = f"This is standby RM. Redirecting to the current active RM: {target}\n"
        return _Reply(200, msg.encode(), "text/plain", {"Refresh": f"3; url={target}"})


class RMHAPair:
    """Two emulated RMs over one :class:`SimCluster` (the shared ZooKeeper state store): the
    first ACTIVE, the second STANDBY. :meth:`failover` swaps them."""

    def __init__(
        self,
        cluster: SimCluster | None = None,
        *,
        host: str = "127.0.0.1",
        ports: tuple[int, int] = (0, 0),
        standby_mode: Literal["redirect", "refresh"] = "redirect",
        **cluster_kwargs: Any,
    ) -> None:
        if cluster is None:
            cluster_kwargs.setdefault("recovery", True)
            cluster = SimCluster(**cluster_kwargs)
        self.cluster = cluster
        self.rms = (
            RMEmulator(cluster, host=host, port=ports[0], ha_state="ACTIVE",
                       standby_mode=standby_mode),
            RMEmulator(cluster, host=host, port=ports[1], ha_state="STANDBY",
                       standby_mode=standby_mode),
        )  # fmt: skip
        a, b = self.rms
        a.peer, b.peer = b, a
        a.ha_enabled = b.ha_enabled = True

    def start(self) -> list[str]:
        return [rm.start() for rm in self.rms]

    def stop(self) -> None:
        for rm in self.rms:
            rm.stop()

    def __enter__(self) -> RMHAPair:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> list[str]:
        return [rm.url for rm in self.rms]

    @property
    def active(self) -> RMEmulator:
        return next(rm for rm in self.rms if rm.ha_state == "ACTIVE")

    @property
    def standby(self) -> RMEmulator:
        return next(rm for rm in self.rms if rm.ha_state != "ACTIVE")

    def failover(self) -> str:
        """The standby becomes ACTIVE, the active STANDBY; returns the new active URL."""
        old, new = self.active, self.standby
        old.ha_state, new.ha_state = "STANDBY", "ACTIVE"
        new.started_on = self.cluster.clock.now_ms()
        return new.url
