"""The console's JSON document and its static files (see :mod:`arbiter.console`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from arbiter.history import finite
from arbiter.messages import ArbiterView

__all__ = ["STATIC_DIR", "console_state", "static_file"]

STATIC_DIR = Path(__file__).with_name("static")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def static_file(path: str) -> tuple[bytes, str] | None:
    """The shipped file at URL ``path`` (``/`` is ``index.html``) and its content type, or
    None: only plain names directly under ``static/`` are served, never anything else."""
    name = "index.html" if path in ("", "/") else path.removeprefix("/static/")
    if "/" in name or name.startswith(".") or Path(name).suffix not in _TYPES:
        return None
    file = STATIC_DIR / name
    if not file.is_file():
        return None
    return file.read_bytes(), _TYPES[file.suffix]


def console_state(
    view: ArbiterView,
    *,
    policy: str,
    rho: Callable[[str], float],
    history: Mapping[str, Any],
    sources: Mapping[str, Mapping[str, Any]],
    health: Mapping[str, Any],
    capacity: tuple[float, float],
) -> dict[str, Any]:
    """The document ``/api/state`` returns (module docstring of :mod:`arbiter.console`).

    ``rho(app_id)``: the app's ρ_current now; ``capacity``: QOOP's R as (vcores, memory MB).
    """
    now = view.now
    holder: dict[str, dict[str, Any]] = {}
    for lease in view.leases:
        if not lease.live_at(now):
            continue
        for g in lease.gpus:
            holder[g] = {
                "app_id": lease.app_id,
                "source": lease.source.value,
                "round": lease.round,
                "since": lease.start,
                "held_for": now - lease.start,
                "ends_in": lease.end - now,
            }
    upcoming: dict[str, str] = {}  # GPU -> app granted it from a later start (grace periods)
    for lease in view.leases:
        if lease.start > now:
            for g in lease.gpus:
                upcoming.setdefault(g, lease.app_id)
    racks: dict[str, list[dict[str, Any]]] = {}
    gpus_by_machine: dict[str, list[dict[str, Any]]] = {}
    for gpu in view.cluster.gpus:
        state = (
            "leased"
            if gpu.id in holder
            else "drained"
            if gpu.machine in view.drained
            else "free"
            if gpu.id in view.free
            else "reserved"
        )
        gpus_by_machine.setdefault(gpu.machine, []).append(
            {
                "id": gpu.id,
                "slot": gpu.slot,
                "state": state,
                "lease": holder.get(gpu.id),
                "next": upcoming.get(gpu.id),
            }
        )
    for m in view.cluster.machines:
        racks.setdefault(m.rack, []).append(
            {
                "name": m.name,
                "gpu_type": m.gpu_type,
                "vcores": m.vcores,
                "memory_mb": m.memory_mb,
                "drained": m.name in view.drained,
                "gpus": gpus_by_machine.get(m.name, []),
            }
        )
    held: dict[str, int] = {}
    for h in holder.values():
        held[h["app_id"]] = held.get(h["app_id"], 0) + 1
    apps = []
    for app_id, rec in sorted(view.apps.items(), key=lambda kv: kv[1].registered_at):
        r = rho(app_id)
        apps.append(
            {
                "app_id": app_id,
                "name": rec.app_name,
                "user": rec.user,
                "queue": rec.queue,
                "max_gpus": rec.max_gpu_demand,
                "gpus": held.get(app_id, 0),
                "connected": app_id in view.connected,
                "rho": finite(r) if not math.isnan(r) else None,
                "registered_at": rec.registered_at,
                "yarn_app_id": rec.yarn_app_id,
            }
        )
    counts = {"free": 0, "leased": 0, "drained": 0, "reserved": 0}
    for cells in gpus_by_machine.values():
        for cell in cells:
            counts[cell["state"]] += 1
    n = view.queries + view.external_jobs
    return {
        "now": now,
        "policy": policy,
        "cluster": {
            "name": view.cluster.name,
            "gpus": len(view.cluster.gpus),
            "machines": len(view.cluster.machines),
            "counts": counts,
            "racks": [{"name": name, "machines": ms} for name, ms in sorted(racks.items())],
        },
        "round": view.round,
        "apps": apps,
        "queries": {
            "registered": view.queries,
            "external": view.external_jobs,
            "active_jobs": n,
            "subscribers": view.subscribers,
            "epoch": view.epoch,
            "capacity": {"vcores": capacity[0], "memory_mb": capacity[1]},
            "share": {
                "vcores": capacity[0] / n if n else capacity[0],
                "memory_mb": capacity[1] / n if n else capacity[1],
            },
        },
        "history": dict(history),
        "sources": {k: dict(v) for k, v in sources.items()},
        "health": dict(health),
    }
