"""Operational metrics of a running arbiter: Prometheus text format over HTTP.

A Hadoop operator watches the ResourceManager through its JMX/metrics servlet; the arbiter
beside it offers the same kind of window, ``GET /metrics`` in the Prometheus text exposition
format (version 0.0.4), and ``GET /healthz`` for a load balancer or a liveness probe (the gRPC
health service stays the check for gRPC clients).

What is exported (gauges unless noted): GPUs by state (free, leased, drained, in the cluster),
live leases by source (auction, leftover, policy), registered apps (connected or not), Hive
query jobs and their share subscribers, QOOP's |J| (queries plus external analytics apps seen
on YARN) and the share epoch, the Themis round (a counter), gRPC calls by method and refusals
by status code since start (counters), and an info series naming the policy and the cluster.

Decisions: aggregates only, no per-app series (app names and users are not published on an
unauthenticated port, and a per-app series would grow with every app ever registered; the
Admin service lists apps to those with the credential). Off unless ``arbiter.metrics.port`` is
set (0 = any free port), bound to ``arbiter.metrics.bind-host`` (default 127.0.0.1: exposing it
is a deliberate choice). The page is rendered from one :meth:`ArbiterCore.snapshot` (taken
under the core's lock), so a scrape never sees a GPU both free and leased.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arbiter.core import ArbiterCore

__all__ = ["CONTENT_TYPE", "MetricsServer", "render_metrics"]

log = logging.getLogger("yarn_arbiter.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(core: ArbiterCore) -> str:
    """The Prometheus text page for ``core`` (module docstring)."""

    snap = core.snapshot()  # one consistent view, taken under the core's lock
    now, cluster = snap.now, snap.cluster
    leases = [lease for lease in snap.leases if lease.live_at(now)]
    queries, subscribers = snap.queries, snap.subscribers
    external, epoch = snap.external_jobs, snap.epoch
    policy = core.config["arbiter.policy"]
    calls = sorted(core.rpc_calls.copy().items())
    refused = sorted(core.rpc_refused.copy().items())
    all_gpus = {g.id for g in cluster.gpus}
    leased = {g for lease in leases for g in lease.gpus}
    drained_gpus = {g.id for g in cluster.gpus if g.machine in snap.drained} - leased
    free = set(snap.free)
    by_source = Counter(lease.source.value for lease in leases)
    apps = snap.apps
    connected = len(set(apps) & set(snap.connected))
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            out.append(f"{name}{labels} {value:g}")

    metric(
        "yarn_arbiter_info",
        "gauge",
        "The arbiter's policy and cluster (value 1).",
        [(f'{{policy="{_label(policy)}",cluster="{_label(cluster.name)}"}}', 1)],
    )
    metric("yarn_arbiter_gpus_total", "gauge", "GPUs in the cluster.", [("", len(all_gpus))])
    metric(
        "yarn_arbiter_gpus",
        "gauge",
        "GPUs by state: free (offerable), leased (in a live lease), drained (on a drained "
        "machine and not leased).",
        [
            ('{state="free"}', len(free)),
            ('{state="leased"}', len(leased)),
            ('{state="drained"}', len(drained_gpus)),
        ],
    )
    metric(
        "yarn_arbiter_leases",
        "gauge",
        "Live leases by source.",
        [(f'{{source="{s}"}}', by_source.get(s, 0)) for s in ("auction", "leftover", "policy")],
    )
    metric(
        "yarn_arbiter_apps",
        "gauge",
        "Registered ML apps, by whether their Agent's session is open.",
        [('{connected="true"}', connected), ('{connected="false"}', len(apps) - connected)],
    )
    metric("yarn_arbiter_round", "counter", "Themis rounds run so far.", [("", snap.round)])
    metric("yarn_arbiter_query_jobs", "gauge", "Registered Hive query jobs.", [("", queries)])
    metric("yarn_arbiter_share_subscribers", "gauge", "Open share streams.", [("", subscribers)])
    metric(
        "yarn_arbiter_analytics_jobs",
        "gauge",
        "QOOP's |J|: registered queries plus other analytics apps seen on YARN.",
        [("", queries + external)],
    )
    metric("yarn_arbiter_share_epoch", "counter", "Share changes pushed so far.", [("", epoch)])
    metric(
        "yarn_arbiter_rpc_calls_total",
        "counter",
        "gRPC calls received, by method.",
        [(f'{{method="{_label(m)}"}}', n) for m, n in calls],
    )
    metric(
        "yarn_arbiter_rpc_refused_total",
        "counter",
        "gRPC calls refused, by status code (bad input, credentials, unknown ids).",
        [(f'{{code="{_label(c)}"}}', n) for c, n in refused],
    )
    return "\n".join(out) + "\n"


class MetricsServer:
    """``/metrics`` and ``/healthz`` for ``core`` on a daemon thread (module docstring)."""

    def __init__(self, core: ArbiterCore, port: int, host: str = "127.0.0.1") -> None:
        self.core = core

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    try:
                        body, status, ctype = render_metrics(core).encode(), 200, CONTENT_TYPE
                    except Exception as exc:  # a scrape must never take the arbiter down
                        log.exception("rendering metrics failed")
                        body, status = f"metrics failed: {exc}\n".encode(), 500
                        ctype = "text/plain; charset=utf-8"
                elif path == "/healthz":  # 503 while the journal cannot commit
                    error = core.journal_error
                    body = b"ok\n" if error is None else f"journal: {error}\n".encode()
                    status, ctype = (200 if error is None else 503), "text/plain; charset=utf-8"
                else:
                    body, status = b"not found: try /metrics or /healthz\n", 404
                    ctype = "text/plain; charset=utf-8"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("metrics %s " + format, self.client_address[0], *args)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="metrics", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
