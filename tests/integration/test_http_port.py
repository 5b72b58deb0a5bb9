"""The arbiter's HTTP port over a real socket: ``/healthz`` and ``/readyz`` tell the truth (a
journal that cannot write makes the process unhealthy; a ResourceManager the bridge cannot
reach makes it unready but still healthy), the console needs the admin credential when the
port is not on loopback, and nothing on the port changes the arbiter."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from support import free_port, wait_for

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from yarn_bridge.bridge_cli import start_bridge

ADMIN = "http-port-admin"


def arbiter(tmp_path: Path, tick_seconds: float = 0.05, **env: str) -> RunningArbiter:
    environ = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
        "ARBITER_METRICS_PORT": "0",
        "ARBITER_POLICY": "las",
        **env,
    }
    return RunningArbiter(
        load_cluster("nodes:2:4"),
        load_config(environ=environ),
        admin_token=ADMIN,
        tick_seconds=tick_seconds,
    ).start()


def test_healthz_reports_a_journal_that_cannot_write(tmp_path: Path) -> None:
    arb = arbiter(tmp_path)
    try:
        assert arb.metrics is not None
        base = arb.metrics.base_url
        wait_for("a first tick", lambda: httpx.get(base + "/readyz").status_code == 200)
        arb.core.register_app(app_name="a", user="u", queue_name="q", max_gpu_demand=1)
        assert "[ok] journal" in httpx.get(base + "/healthz?verbose").text
        arb.journal.inner.close()  # the disk is gone, as far as the arbiter can tell
        with pytest.raises(Exception):  # noqa: B017 - sqlite3's error, whatever it is
            arb.core.register_app(app_name="b", user="u", queue_name="q", max_gpu_demand=1)
        r = httpx.get(base + "/healthz")
        assert r.status_code == 503 and r.text.startswith("failing\n")
        assert "[FAIL] journal: last write failed" in r.text
        assert httpx.get(base + "/readyz").status_code == 503
        state = httpx.get(base + "/healthz?format=json").json()
        assert state["healthy"] is False and state["checks"]["journal"]["ok"] is False
        page = httpx.get(base + "/metrics").text
        assert "yarn_arbiter_healthy 0.0" in page and "yarn_arbiter_journal_healthy 0.0" in page
    finally:
        arb.stop(0)


def test_a_starting_arbiter_is_live_before_its_first_tick_and_ready_after(
    tmp_path: Path,
) -> None:
    arb = arbiter(tmp_path, tick_seconds=3600.0)  # its first tick is an hour away
    try:
        assert arb.metrics is not None
        base = arb.metrics.base_url
        r = httpx.get(base + "/healthz?verbose")  # a liveness probe must not restart it
        assert r.status_code == 200 and "[ok] scheduler: starting: no tick yet" in r.text
        r = httpx.get(base + "/readyz?verbose")
        assert r.status_code == 503
        assert "[FAIL] first-tick: the scheduling loop has not ticked" in r.text
    finally:
        arb.stop(0)


def test_readyz_follows_the_rm_healthz_does_not(tmp_path: Path) -> None:
    arb = arbiter(tmp_path)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        assert arb.metrics is not None
        base = arb.metrics.base_url
        arb.attach(lambda core: start_bridge(core, dead, poll_s=0.2,
                                             rm_options={"max_attempts": 1}))  # fmt: skip
        wait_for("a failed poll", lambda: arb.telemetry.sources()["yarn-bridge"]["failed_polls"])
        r = httpx.get(base + "/readyz?verbose")
        assert r.status_code == 503 and "[FAIL] yarn-bridge: no successful RM poll yet" in r.text
        assert httpx.get(base + "/healthz").status_code == 200  # no restart for an RM outage
        state = httpx.get(base + "/api/state").json()
        assert state["sources"]["yarn-bridge"]["rm_urls"] == dead
        assert state["sources"]["yarn-bridge"]["ready"] is False
        # The bridge polls from the moment it starts, its timer is bound just after: the polls
        # after that are timed (every 0.2 s here).
        failed = 'yarn_arbiter_rm_poll_duration_seconds_count{outcome="failed"}'

        def timed_failure() -> str | None:
            page = httpx.get(base + "/metrics").text
            return page if failed in page else None

        page = wait_for("a timed failed poll", timed_failure)
        assert "yarn_arbiter_ready 0.0" in page
    finally:
        arb.stop(0)


def test_console_needs_the_admin_credential_off_loopback(tmp_path: Path) -> None:
    arb = arbiter(tmp_path, ARBITER_METRICS_BIND_HOST="0.0.0.0")
    try:
        assert arb.metrics is not None
        base = f"http://127.0.0.1:{arb.metrics.port}"
        for path in ("/", "/api/state", "/static/console.js"):
            r = httpx.get(base + path)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic")
            assert httpx.get(base + path, auth=("ops", "wrong")).status_code == 401
            assert httpx.get(base + path, auth=("ops", ADMIN)).status_code == 200
        bearer = {"Authorization": f"Bearer {ADMIN}"}
        state = httpx.get(base + "/api/state", headers=bearer).json()
        assert state["cluster"]["gpus"] == 8 and state["policy"] == "las"
        garbage = {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe").decode()}
        assert httpx.get(base + "/api/state", headers=garbage).status_code == 401
        # Prometheus and probes hold no credential: aggregates only
        assert httpx.get(base + "/metrics").status_code == 200
        assert httpx.get(base + "/healthz").status_code in (200, 503)
        # read-only, and nothing outside the shipped files
        auth = ("ops", ADMIN)
        assert httpx.post(base + "/api/state", auth=auth).status_code == 405
        assert httpx.get(base + "/static/..%2f__init__.py", auth=auth).status_code == 404
        assert httpx.get(base + "/static/state.py", auth=auth).status_code == 404
    finally:
        arb.stop(0)


def test_console_is_open_on_loopback(tmp_path: Path) -> None:
    arb = arbiter(tmp_path)
    try:
        assert arb.metrics is not None
        r = httpx.get(arb.metrics.console_url)
        assert r.status_code == 200 and "/static/console.js" in r.text
        assert "default-src 'self'" in r.headers["content-security-policy"]
    finally:
        arb.stop(0)
