"""A ``qoop-hive`` session: the connection to HiveServer2 and the client-side state new
connections share (:class:`Session`), the share source a query runs with, and the replanner
built on both (:class:`Replanner`).

* **Session state reaches the replanner.** ``USE db``, ``SET k=v`` and ``--hiveconf`` are kept
  client-side too, so every connection the replanner opens starts in the current database with
  the same settings (sent at OpenSession as ``set:hiveconf:k``, as Hive's JDBC driver does, and
  passed to the QueryRunner, whose session settings they override); a ``USE`` or ``SET`` makes
  the next SELECT use a new QueryRunner (a runner keeps its connections).
* **The share.** ``--arbiter`` follows the arbiter's QueryShare stream (``ArbiterShare``, one
  registration per query); ``--share-profile T:F,...`` replays fractions ``F`` of
  ``--cluster-vcores`` (2 GB per vcore) from each query's start (``ScriptedShare``); neither:
  the executor's fixed default share. Each share change the executor sees is a progress line,
  like each stage event. ``--engine-control HOST:PORT`` (printed by ``engine start --on-yarn``)
  also pushes the share to that engine (:mod:`hive_hooks.yarn_engine`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sqlite3
from typing import Any

from hive_hooks.beeline.args import parse_share_profile
from hive_hooks.beeline.errors import CliError, server_message, why_unreachable
from hive_hooks.beeline.printing import Printer, ReportingShare
from hive_hooks.beeline.script import read_text, strip_leading_comments
from hive_hooks.errors import DRIVER_ERRORS
from hive_hooks.jdbc import JdbcUrl

__all__ = ["Replanner", "Session", "make_enforcer", "make_share"]

#: How long connecting and HiveServer2's handshake (SASL, OpenSession) may take before the
#: client gives up (a server that accepts and never answers would otherwise hang it); once the
#: session is open the socket has no timeout, so long-running statements are not cut.
CONNECT_TIMEOUT_S = 30.0

_SET = re.compile(r"(?is)^set\s+(hivevar:|hiveconf:)?([^=\s]+)\s*=\s*(.*?)\s*$")
_USE = re.compile(r"(?is)^use\s+`?([A-Za-z0-9_]+)`?\s*$")


class Session:
    """A connection to HiveServer2 plus the client-side state new connections must share."""

    def __init__(
        self,
        url: JdbcUrl,
        *,
        user: str | None,
        password: str | None,
        hiveconf: dict[str, str],
        hivevar: dict[str, str],
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self.user, self.password = user, password
        self.database = url.database
        self.hiveconf = dict(hiveconf)
        self.hivevar = dict(hivevar)
        self._conn: Any = None

    def connect(self) -> Any:
        """A new pyhive connection in the session's database with its settings (the factory
        the replanner gets: connection errors come out as pyhive/thrift raise them, so the
        executor can tell a lost server from a failed statement)."""
        from pyhive import hive

        kwargs = self.url.pyhive_kwargs(self.user, self.password)
        kwargs["database"] = self.database
        kwargs["configuration"] = {f"set:hiveconf:{k}": v for k, v in self.hiveconf.items()}
        if kwargs.get("scheme") in ("http", "https"):
            return hive.connect(**kwargs)
        return _connect_binary(kwargs, self.connect_timeout_s)

    @property
    def conn(self) -> Any:
        """The session's own connection (direct statements); :class:`CliError` naming
        host:port if the server cannot be reached."""
        if self._conn is None:
            try:
                self._conn = self.connect()
            except Exception as e:  # broad on purpose: see below
                # Connecting fails with socket, thrift, thrift_sasl, pure-sasl or pyhive
                # errors, which share no base class; any of them is reported with the address.
                if server_message(e) is not None:
                    raise
                msg = f"cannot reach HiveServer2 at {self.url.hostport}: {why_unreachable(e)}"
                raise CliError(msg) from e
        return self._conn

    def execute(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """Run one statement directly; the result set, or None if it has none."""
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
            if not cur.description:
                return None
            cols = [d[0] for d in cur.description]
            return cols, [tuple(r) for r in cur.fetchall()]
        finally:
            with contextlib.suppress(*DRIVER_ERRORS):  # not to hide the statement's error
                cur.close()

    def track(self, sql: str) -> bool:
        """Mirror a successful SET/USE client-side (module docstring); True if the database or
        a setting changed (new connections differ)."""
        body = strip_leading_comments(sql)
        if m := _USE.match(body):
            self.database = m.group(1)
            return True
        if m := _SET.match(body):
            kind, key, value = m.groups()
            if (kind or "").lower() == "hivevar:":
                self.hivevar[key] = value
                return False
            self.hiveconf[key] = value
            return True
        return False

    def close(self) -> None:
        """Close the session's own connection (it may be dead already)."""
        if self._conn is not None:
            with contextlib.suppress(*DRIVER_ERRORS):
                self._conn.close()
            self._conn = None


def make_share(args: argparse.Namespace, session: Session) -> Any:
    """The share source: the arbiter's stream, a scripted profile, or None (the executor's
    static default)."""
    if args.arbiter:
        from hive_hooks.share import ArbiterShare

        credentials = None
        if args.arbiter_tls or args.arbiter_ca or args.arbiter_cert:
            import grpc

            def blob(p: str | None) -> bytes | None:
                return read_text(p).encode() if p else None

            credentials = grpc.ssl_channel_credentials(
                root_certificates=blob(args.arbiter_ca),
                private_key=blob(args.arbiter_key),
                certificate_chain=blob(args.arbiter_cert),
            )
        kwargs: dict[str, Any] = {
            "user": session.url.pyhive_kwargs(session.user)["username"],
            "queue_name": args.queue,
            "credentials": credentials,
        }
        return ArbiterShare(args.arbiter, **kwargs)
    if args.share_profile:
        from hive_hooks.share import ScriptedShare
        from qoop_planner.model import Share

        full = args.cluster_vcores
        return ScriptedShare(
            [
                (t, Share(vcores=f * full, memory_mb=f * full * args.memory_per_vcore_mb))
                for t, f in parse_share_profile(args.share_profile)
            ]
        )
    return None


def make_enforcer(args: argparse.Namespace) -> Any:
    """The engine's share control (``--engine-control``), or None."""
    if not getattr(args, "engine_control", None):
        return None
    from hive_hooks.yarn_engine import EngineControl

    host, _, port = args.engine_control.rpartition(":")
    return EngineControl(int(port), host or "127.0.0.1")


class Replanner:
    """Builds the QueryRunner lazily (only scripts with a SELECT need the executor), and anew
    after ``USE``/``SET`` (a runner keeps its connections' database and settings)."""

    def __init__(self, args: argparse.Namespace, session: Session, printer: Printer) -> None:
        self.args, self.session, self.printer = args, session, printer
        self._runner: Any = None
        self._registry: Any = None

    def registry(self) -> Any:
        """The checkpoint registry (``--registry``), opened once."""
        if self._registry is None:
            from hive_hooks.registry import CheckpointRegistry

            self._registry = CheckpointRegistry(self.args.registry)
        return self._registry

    def runner(self) -> Any:
        """The QueryRunner for the session's current database and settings."""
        if self._runner is None:
            from hive_hooks.executor import QueryRunner

            share = make_share(self.args, self.session)
            if share is not None and not self.args.silent:
                share = ReportingShare(share, self.printer.info)
            self._runner = QueryRunner(
                self.session.connect,
                registry=self.registry(),
                checkpoint_db=self.args.checkpoint_db,
                share=share,
                hiveconf=self.session.hiveconf,
                on_event=self.printer.event,
                hysteresis=self.args.hysteresis,
                share_enforcer=make_enforcer(self.args),
                max_concurrency=self.args.max_stages,
            )
        return self._runner

    def invalidate(self) -> None:
        """Drop the runner (its connections); the next query gets a new one."""
        if self._runner is not None:
            with contextlib.suppress(*DRIVER_ERRORS):  # its connections may be dead
                self._runner.close()
            self._runner = None

    def close(self) -> None:
        """Close the runner and the checkpoint registry."""
        self.invalidate()
        if self._registry is not None:
            with contextlib.suppress(sqlite3.Error):
                self._registry.close()
            self._registry = None


def _connect_binary(kwargs: dict[str, Any], timeout_s: float) -> Any:
    """``pyhive.hive.connect`` over the binary transport, built as pyhive builds it (SASL PLAIN
    or GSSAPI, or NOSASL) on a socket with a timeout for the connect and the handshake, which
    is lifted once the session is open (:data:`CONNECT_TIMEOUT_S`)."""
    from pyhive import hive
    from thrift.transport import TSocket, TTransport

    kw = dict(kwargs)
    host, port = kw.pop("host"), kw.pop("port", None) or 10000
    auth = kw.pop("auth", None) or "NONE"
    password = kw.pop("password", None)
    service = kw.pop("kerberos_service_name", None)
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(timeout_s * 1000)
    if auth == "NOSASL":
        transport: Any = TTransport.TBufferedTransport(sock)
    else:
        import thrift_sasl

        mech = "GSSAPI" if auth == "KERBEROS" else "PLAIN"
        secret = password if password is not None or mech == "GSSAPI" else "x"
        user = kw.get("username")

        def sasl() -> Any:
            return hive.get_installed_sasl(
                host=host, sasl_auth=mech, service=service, username=user, password=secret
            )

        transport = thrift_sasl.TSaslClientTransport(sasl, mech, sock)
    conn = hive.connect(thrift_transport=transport, **kw)
    sock.setTimeout(None)  # the session is open: statements may run as long as they run
    return conn
