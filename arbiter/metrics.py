"""The arbiter's HTTP port: the web console, Prometheus ``/metrics``, ``/healthz``, ``/readyz``.

Beside a ResourceManager (its web UI and metrics on :8088) the arbiter offers the same kind of
window on ``arbiter.metrics.port`` (``serve --metrics-port P``):

* ``/``: the read-only web console (:mod:`arbiter.console`), whose page polls ``/api/state``;
* ``/metrics``: the Prometheus text exposition of :class:`arbiter.telemetry.Telemetry`'s
  registry (conventional names, histograms, bounded labels; aggregates only);
* ``/healthz``: 200 while the process is healthy (its scheduling loop ticks, its journal
  commits), else 503; ``/readyz``: 200 while it is healthy, its loop has finished a tick
  *and* every attachment is ready (the YARN bridge reached the RM recently). ``?verbose``
  lists the checks, one a line.

Who may see what: ``/metrics``, ``/healthz`` and ``/readyz`` carry no app names or users and
answer anyone who reaches the port (Prometheus and probes hold no credential). The console
and its API name apps and users: bound to a loopback address (the default,
``arbiter.metrics.bind-host`` = 127.0.0.1) they answer the local host; bound to any other
address they require the admin credential, as HTTP Basic (any user name, the token as the
password: a browser asks for it) or ``Authorization: Bearer <token>``. Only GET and HEAD are
served; nothing on this port changes the arbiter.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from arbiter.admission import is_loopback
from arbiter.console import console_state, static_file
from arbiter.messages import RequestError
from arbiter.telemetry import Health, Telemetry

if TYPE_CHECKING:
    from arbiter.core import ArbiterCore

__all__ = ["CONTENT_TYPE", "MetricsServer", "render_metrics", "render_state"]

log = logging.getLogger("yarn_arbiter.metrics")

CONTENT_TYPE = CONTENT_TYPE_LATEST
CONSOLE_AUCTIONS = 30  # rounds the console's document carries (the page shows them all)
_TEXT = "text/plain; charset=utf-8"
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
}


def render_metrics(telemetry: Telemetry) -> bytes:
    """The Prometheus text page of ``telemetry``'s registry."""
    return generate_latest(telemetry.registry)


def render_state(telemetry: Telemetry) -> dict[str, object]:
    """The console's ``/api/state`` document for the bound core."""
    core = telemetry.core
    assert core is not None, "Telemetry.bind(core) comes before serving"
    view = core.snapshot()
    held = core.holdings(view.now)
    none: frozenset[str] = frozenset()
    cap = core.capacity()
    return console_state(
        view,
        policy=str(core.config["arbiter.policy"]),
        rho=lambda a: core.rho_current(a, view.now, held.get(a, none)),
        history=telemetry.history.to_json(auctions=CONSOLE_AUCTIONS),
        sources=telemetry.sources(),
        health=telemetry.health().to_json(),
        capacity=(cap.vcores, cap.memory_mb),
    )


def _health_page(health: Health, ok: bool, verbose: bool) -> bytes:
    lines = ["ok" if ok else "failing"]
    if verbose or not ok:
        for name, check in health.checks.items():
            mark = "ok" if check.get("ok") else "FAIL"
            lines.append(f"[{mark}] {name}: {check.get('detail', '')}")
    return ("\n".join(lines) + "\n").encode()


def _token_of(header: str | None) -> str | None:
    """The credential an ``Authorization`` header carries (Bearer, or Basic's password)."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


class MetricsServer:
    """The HTTP port (module docstring) for ``core`` on a daemon thread.

    ``telemetry``: the running arbiter's (:class:`arbiter.server.RunningArbiter` passes its
    own); without one a fresh one is made for ``core`` (no history, no timings).
    """

    def __init__(
        self,
        core: ArbiterCore,
        port: int,
        host: str = "127.0.0.1",
        telemetry: Telemetry | None = None,
    ) -> None:
        self.core = core
        if telemetry is None:
            telemetry = Telemetry()
            telemetry.bind(core)
        self.telemetry = telemetry
        self.open_console = is_loopback(host)
        t = telemetry
        authorize: Callable[[str | None], None] = core.authorize_admin
        open_console = self.open_console

        class Handler(BaseHTTPRequestHandler):
            server_version = "yarn-arbiter"
            sys_version = ""

            def _send(
                self,
                status: int,
                body: bytes,
                ctype: str,
                extra: dict | None = None,
                head: bool = False,
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in {**_SECURITY_HEADERS, **(extra or {})}.items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _allowed(self) -> bool:
                if open_console:
                    return True
                try:
                    authorize(_token_of(self.headers.get("Authorization")))
                except RequestError:
                    log.warning(
                        "console refused to %s: no valid admin credential", self.client_address[0]
                    )
                    return False
                return True

            def do_GET(self, head: bool = False) -> None:
                url = urlsplit(self.path)
                path, query = url.path, parse_qs(url.query, keep_blank_values=True)
                try:
                    status, body, ctype, extra = self._route(path, query)
                except Exception as exc:  # a request must never take the arbiter down
                    log.exception("HTTP %s failed", path)
                    status, body, ctype, extra = 500, f"failed: {exc}\n".encode(), _TEXT, {}
                self._send(status, body, ctype, extra, head=head)

            def do_HEAD(self) -> None:
                self.do_GET(head=True)

            def _refuse_method(self) -> None:
                self._send(405, b"read-only: GET and HEAD only\n", _TEXT, {"Allow": "GET, HEAD"})

            do_POST = do_PUT = do_DELETE = do_PATCH = _refuse_method

            def _route(self, path: str, query: dict) -> tuple[int, bytes, str, dict]:
                if path == "/metrics":
                    return 200, render_metrics(t), CONTENT_TYPE, {}
                if path in ("/healthz", "/readyz"):
                    health = t.health()
                    ok = health.healthy if path == "/healthz" else health.ready
                    if "format" in query and query["format"][-1] == "json":
                        body = json.dumps(health.to_json()).encode()
                        return (200 if ok else 503), body, "application/json", {}
                    body = _health_page(health, ok, "verbose" in query)
                    return (200 if ok else 503), body, _TEXT, {"Cache-Control": "no-store"}
                if path == "/api/state" or path == "/" or path.startswith("/static/"):
                    if not self._allowed():
                        return (
                            401,
                            b"the admin credential is required\n",
                            _TEXT,
                            {"WWW-Authenticate": 'Basic realm="yarn-arbiter"'},
                        )
                    if path == "/api/state":
                        body = json.dumps(render_state(t), allow_nan=False).encode()
                        return 200, body, "application/json", {"Cache-Control": "no-store"}
                    found = static_file(path)
                    if found is not None:
                        return 200, found[0], found[1], {}
                return 404, b"not found: try /, /metrics, /healthz or /readyz\n", _TEXT, {}

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http %s " + format, self.client_address[0], *args)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="metrics", daemon=True
        )

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """``/metrics``'s URL."""
        return f"{self.base_url}/metrics"

    @property
    def console_url(self) -> str:
        return f"{self.base_url}/"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
