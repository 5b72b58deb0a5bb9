"""Active/standby arbiters on ZooKeeper (as YARN's ResourceManager runs HA).

Two (or more) ``yarn-arbiter serve`` processes with the same ``arbiter.ha.zk-address`` and
``arbiter.ha.zk-root`` and different ``arbiter.ha.id`` contend for one ZooKeeper lock (kazoo's
``Lock`` recipe: the first sequential node holds it; its ephemeral node goes with its session).

* **Standby** (:class:`StandbyServer`): the process listens on its gRPC port and answers every
  call ``UNAVAILABLE`` with a message naming the active (so a client with a list of addresses
  tries the next one, :mod:`arbiter.agent`); its HTTP port says ``/readyz`` 503 (it serves
  nothing) and ``/healthz`` 200 while it holds a ZooKeeper session (it can take over), 503 when
  it cannot reach ZooKeeper. It holds no journal, no core, no decider.
* **Takeover**: the winner bumps the leader epoch (:func:`arbiter.zk_journal.claim_epoch`),
  stops its standby server and starts a full :class:`arbiter.server.RunningArbiter` on the same
  ports with the :class:`~arbiter.zk_journal.ZooKeeperJournal` at that epoch: the core rebuilds
  apps, token hashes, leases, bid tables, round and drains from it exactly as a restart does from
  the SQLite file, and Agents resume with their tokens.
* **Step-down**: on any ZooKeeper connection trouble (``SUSPENDED`` or ``LOST``: the active can
  no longer know it is still the leader) or a fenced write, the active stops serving at once,
  closes its session (its lock node goes) and becomes a standby again. A deposed active that
  has not noticed yet cannot commit either: every journal write checks the epoch.

The pure parts (contender names, the standby's messages and health) are functions;
:class:`HaArbiter` is the thin shell that runs the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import grpc
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.handlers.threading import KazooTimeoutError

from arbiter.config import Config
from arbiter.journal import Journal
from arbiter.zk_journal import ZooKeeperJournal, claim_epoch

__all__ = [
    "Active",
    "HaArbiter",
    "HaSettings",
    "StandbyServer",
    "contender",
    "parse_contender",
    "standby_health",
    "standby_message",
]

log = logging.getLogger("yarn_arbiter.ha")

CREDENTIAL_KEYS = (
    "arbiter.admin.token-file",
    "arbiter.admission.submit-token-file",
    "arbiter.query.service-token-file",
)


@dataclass(frozen=True)
class HaSettings:
    """The ``arbiter.ha.*`` settings of one member of the pair."""

    zk_address: str
    ha_id: str
    root: str
    session_timeout_s: float
    advertise: str  # host:port clients reach this arbiter at

    @classmethod
    def from_config(cls, config: Config) -> HaSettings | None:
        """The settings, or None when ``arbiter.ha.zk-address`` is empty (no HA); a bad
        combination raises ValueError naming the keys."""
        zk = config["arbiter.ha.zk-address"].strip()
        if not zk:
            return None
        if not config["arbiter.ha.id"].strip():
            raise ValueError("arbiter.ha.zk-address is set: give this arbiter a name in the "
                             "pair with arbiter.ha.id (--ha-id a1)")  # fmt: skip
        if config["arbiter.grpc.port"] == 0:
            raise ValueError("arbiter HA needs a fixed arbiter.grpc.port (--port): the standby "
                             "and the active it becomes listen on the same one")  # fmt: skip
        missing = [k for k in CREDENTIAL_KEYS if not config[k].strip()]
        if missing:
            raise ValueError(
                "arbiter HA needs the same credentials on every arbiter of the pair: set "
                + ", ".join(missing)
                + " to files both hosts read (they are generated per host otherwise)"
            )
        advertise = config["arbiter.ha.advertise-address"].strip() or (
            f"{config['arbiter.grpc.bind-host'].strip()}:{config['arbiter.grpc.port']}"
        )
        return cls(zk, config["arbiter.ha.id"].strip(), config["arbiter.ha.zk-root"],
                   config["arbiter.ha.session-timeout.seconds"], advertise)  # fmt: skip


def contender(ha_id: str, address: str) -> str:
    """The name an arbiter contends under: ``id@host:port``."""
    return f"{ha_id}@{address}"


def parse_contender(name: str) -> tuple[str, str]:
    """``(id, address)`` of a contender name; the address is "" if the name has none.

    >>> parse_contender("a1@127.0.0.1:50051")
    ('a1', '127.0.0.1:50051')
    """
    ha_id, _, address = name.partition("@")
    return ha_id, address


def standby_message(me: str, active: str | None) -> str:
    """What the standby answers every RPC with (status UNAVAILABLE).

    >>> standby_message("a2", "a1@127.0.0.1:50051")
    'arbiter a2 is a standby; the active arbiter is a1 at 127.0.0.1:50051'
    >>> standby_message("a2", None)
    'arbiter a2 is a standby; no arbiter is active (an election is under way)'
    """
    if not active:
        return f"arbiter {me} is a standby; no arbiter is active (an election is under way)"
    ha_id, address = parse_contender(active)
    return f"arbiter {me} is a standby; the active arbiter is {ha_id} at {address}"


def standby_health(me: str, connected: bool, active: str | None) -> dict[str, Any]:
    """``/healthz`` and ``/readyz`` of a standby: healthy while it holds a ZooKeeper session
    (it can take over), never ready (it serves nothing)."""
    detail = standby_message(me, active) if connected else (
        f"arbiter {me} is a standby without a ZooKeeper session: it cannot take over")  # fmt: skip
    ha = {"ok": False, "detail": detail, "role": "standby", "active": active or ""}
    return {"healthy": connected, "ready": False, "checks": {"ha": ha}}


class StandbyServer:
    """The standby's gRPC port (every call UNAVAILABLE, naming the active) and HTTP port
    (``/healthz``, ``/readyz``); ``status()`` and ``message()`` are read on every request.

    gRPC runs on asyncio (its own loop thread, as the arbiter's server): every call is refused
    at once, however many Agents knock, and :meth:`stop` ends every call it has accepted (a
    thread-pool server left calls queued behind its workers unanswered when it stopped, and an
    Agent waited on such a stream for ever)."""

    def __init__(
        self,
        grpc_address: str,
        http: tuple[str, int] | None,
        status: Callable[[], dict[str, Any]],
        message: Callable[[], str],
    ) -> None:
        async def refuse(_requests: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, message())

        handler = grpc.stream_stream_rpc_method_handler(refuse)

        class Refuse(grpc.GenericRpcHandler):
            def service(self, _details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
                return handler

        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._loop.run_forever, name="standby-grpc", daemon=True
        )
        self._loop_thread.start()

        async def build() -> grpc.aio.Server:
            server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            server.add_generic_rpc_handlers((Refuse(),))
            server.add_insecure_port(grpc_address)
            return server

        try:
            self._grpc = self._call(build())
        except Exception as exc:
            self._shutdown_loop()
            raise OSError(f"the standby cannot listen on {grpc_address}: {exc}") from exc
        self._httpd: ThreadingHTTPServer | None = None
        if http is not None and http[1] >= 0:

            class Handler(BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    st = status()
                    path, _, query = self.path.partition("?")
                    detail = st["checks"]["ha"]["detail"]
                    kind = "text/plain; charset=utf-8"
                    if path in ("/healthz", "/readyz"):  # as arbiter.metrics answers them
                        ok = st["healthy"] if path == "/healthz" else st["ready"]
                        code = 200 if ok else 503
                        if "format=json" in query:
                            body, kind = json.dumps(st).encode(), "application/json"
                        else:
                            body = f"{'ok' if ok else 'not ready'}: {detail}\n".encode()
                    else:
                        code, body = 503, f"{detail}\n".encode()
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, *_args: Any) -> None:
                    pass

            ThreadingHTTPServer.allow_reuse_address = True
            try:
                self._httpd = ThreadingHTTPServer(http, Handler)
            except OSError:
                self._shutdown_loop()
                raise
            self._http_thread = threading.Thread(
                target=self._httpd.serve_forever, name="standby-http", daemon=True
            )

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def _shutdown_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(timeout=5)

    def start(self) -> StandbyServer:
        self._call(self._grpc.start())
        if self._httpd is not None:
            self._http_thread.start()
        return self

    def stop(self) -> None:
        self._call(self._grpc.stop(0))
        self._shutdown_loop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


class Active(Protocol):
    """What the pair's active runs (a :class:`arbiter.server.RunningArbiter`)."""

    def stop(self, grace: float = ...) -> None: ...


# Starts the active on a journal; ``ready()`` is its HA check for /readyz (role and epoch).
StartActive = Callable[[Journal, Callable[[], dict[str, Any]]], Active]


class HaArbiter:
    """One member of the pair: contend, serve as standby, take over, step down (module
    docstring). :meth:`run` loops until ``done`` is set."""

    def __init__(
        self,
        settings: HaSettings,
        start_active: StartActive,
        *,
        grpc_address: str,
        http: tuple[str, int] | None,
        on_role: Callable[[str], None] = lambda _role: None,
    ) -> None:
        self.s = settings
        self.name = contender(settings.ha_id, settings.advertise)
        self.start_active = start_active
        self.grpc_address, self.http = grpc_address, http
        self.on_role = on_role
        self.role = "standby"
        self.epoch = -1
        self.takeovers = 0
        self._connected = False
        self._active: str | None = None  # the active's contender name, as last seen

    # -- standby ---------------------------------------------------------------------------

    def _status(self) -> dict[str, Any]:
        return standby_health(self.s.ha_id, self._connected, self._active)

    def _message(self) -> str:
        return standby_message(self.s.ha_id, self._active)

    def _standby(self) -> StandbyServer:
        for attempt in range(50):  # the active's port may take a moment to be released
            try:
                return StandbyServer(
                    self.grpc_address, self.http, self._status, self._message
                ).start()
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        raise AssertionError("unreachable")

    # -- the loop --------------------------------------------------------------------------

    def run(self, done: threading.Event) -> int:
        standby: StandbyServer | None = self._standby()
        self.on_role("standby")
        log.info("arbiter %s: standby on %s, contending on ZooKeeper %s%s",
                 self.s.ha_id, self.grpc_address, self.s.zk_address, self.s.root)  # fmt: skip
        while not done.is_set():
            client = KazooClient(hosts=self.s.zk_address, timeout=self.s.session_timeout_s)
            trouble = threading.Event()

            def listen(state: str, trouble: threading.Event = trouble) -> None:
                self._connected = state == KazooState.CONNECTED
                if state != KazooState.CONNECTED:
                    trouble.set()

            client.add_listener(listen)
            try:
                client.start(timeout=self.s.session_timeout_s)
                self._connected = True
                standby = self._contend(client, trouble, done, standby)
            except (KazooException, KazooTimeoutError) as exc:
                log.warning("arbiter %s: ZooKeeper %s: %s", self.s.ha_id, self.s.zk_address,
                            f"{type(exc).__name__} {exc}")  # fmt: skip
                done.wait(0.5)
            finally:
                self._connected = False
                self._close(client)
        if standby is not None:
            standby.stop()
        return 0

    @staticmethod
    def _close(client: KazooClient) -> None:
        """End the session (its ephemeral lock node goes with it)."""
        try:
            client.stop()
            client.close()
        except Exception:  # a client that never connected has nothing to close
            log.debug("closing the ZooKeeper client", exc_info=True)

    def _contend(
        self,
        client: KazooClient,
        trouble: threading.Event,
        done: threading.Event,
        standby: StandbyServer | None,
    ) -> StandbyServer | None:
        """Wait for the lock as a standby; once held, serve as the active until trouble."""
        lock = client.Lock(f"{self.s.root}/election", self.name)
        self._active = _holder(lock.contenders())
        while not (done.is_set() or trouble.is_set()):
            try:
                if lock.acquire(timeout=1.0):
                    break
            except LockTimeout:
                pass
            self._active = _holder(lock.contenders())
        else:
            return standby
        self.epoch = claim_epoch(client, self.s.root, self.name, self.s.session_timeout_s)
        self._active = self.name
        t0 = time.monotonic()
        if standby is not None:
            standby.stop()
            standby = None
        try:
            journal = ZooKeeperJournal(
                client, self.s.root, self.epoch, timeout_s=self.s.session_timeout_s
            )
            active = self.start_active(journal, self._ready)
        except Exception:  # its session is closed on return: another arbiter may win
            log.exception("arbiter %s: could not start as the active; stepping down",
                          self.s.ha_id)  # fmt: skip
            return self._standby()
        self.role, self.takeovers = "active", self.takeovers + 1
        self.on_role("active")
        log.info("arbiter %s: ACTIVE (epoch %d), serving in %.2f s", self.s.ha_id, self.epoch,
                 time.monotonic() - t0)  # fmt: skip
        while not (done.is_set() or trouble.is_set() or journal.fenced):
            done.wait(0.05)
        why = ("stopping" if done.is_set() else "fenced by a newer epoch" if journal.fenced
               else "lost its ZooKeeper connection")  # fmt: skip
        log.warning("arbiter %s: stepping down (%s)", self.s.ha_id, why)
        self.role = "standby"
        self._active = None
        active.stop(0.0)
        if done.is_set():
            return None
        standby = self._standby()
        self.on_role("standby")
        return standby

    def _ready(self) -> dict[str, Any]:
        """The active's HA check (a telemetry status source: /readyz and the console)."""
        ok = self.role == "active" and self._connected
        return {"ready": ok, "detail": f"arbiter {self.s.ha_id} is the active (epoch "
                f"{self.epoch})" if ok else f"arbiter {self.s.ha_id} is stepping down"}  # fmt: skip


def _holder(contenders: Sequence[str]) -> str | None:
    """The lock holder: the first contender (kazoo lists them in lock order)."""
    return contenders[0] if contenders else None
