"""What YARN itself reports about the Spark engine's executors (the tests of
:mod:`hive_hooks.yarn_engine` on a real local YARN): the app's containers, vcores and memory
read from the RM's REST API."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from hive_hooks.yarn_engine import ExecutorSpec

AM_MB = 1024  # the engine's application master container


def rm_get(rm_url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{rm_url}/ws/v1/cluster{path}", timeout=10) as r:
        return json.load(r)


def app_info(rm_url: str, app_id: str) -> dict[str, Any]:
    return rm_get(rm_url, f"/apps/{app_id}")["app"]


def yarn_executors(app: dict[str, Any], spec: ExecutorSpec) -> int | None:
    """Executors YARN shows for the engine's app (its containers minus the AM), or None when
    the container, vcore and memory counts do not agree on one number."""
    n = int(app["runningContainers"]) - 1
    ok = app["allocatedVCores"] == n * spec.cores + 1 and (
        app["allocatedMB"] == n * spec.container_mb + AM_MB
    )
    return n if ok else None


def wait_yarn(
    rm_url: str, app_id: str, executors: int, spec: ExecutorSpec, timeout: float = 120.0
) -> float:
    """Seconds until YARN reports ``executors`` executor containers for the app (poll, 0.1 s)."""
    t0 = time.monotonic()
    last: Any = None
    while time.monotonic() - t0 < timeout:
        app = app_info(rm_url, app_id)
        last = (app["runningContainers"], app["allocatedVCores"], app["allocatedMB"])
        if yarn_executors(app, spec) == executors:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(
        f"YARN did not report {executors} executors in {timeout:.0f} s; last (containers, "
        f"vcores, MB) = {last}"
    )
