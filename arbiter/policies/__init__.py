"""Scheduling policies behind one interface (:mod:`arbiter.policies.base`), shared by the live
arbiter and the simulator. :data:`POLICIES` maps the names users pass to ``--policy``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from arbiter.policies.base import Decision, JobView, Policy, PolicyError, Snapshot
from arbiter.policies.fifo import Fifo
from arbiter.policies.las import Las
from arbiter.policies.themis import Themis
from arbiter.policies.yarn_cs import YarnCapacity

__all__ = [
    "POLICIES",
    "Decision",
    "JobView",
    "Policy",
    "PolicyError",
    "Snapshot",
    "make_policy",
]


def _lazy(module: str, cls: str) -> Callable[..., Policy[Any]]:
    """A factory that imports ``arbiter.policies.<module>`` only when the policy is used."""

    def make(**knobs) -> Policy[Any]:
        return getattr(importlib.import_module(f"arbiter.policies.{module}"), cls)(**knobs)

    make.__name__ = cls
    return make


POLICIES: Mapping[str, Callable[..., Policy[Any]]] = {
    "fifo": Fifo,
    "las": Las,
    "themis": Themis,
    "yarn-cs": YarnCapacity,
    # The other seed policies, one module each.
    "tiresias": _lazy("tiresias", "Tiresias"),
    "tiresias-gittins": _lazy("tiresias", "TiresiasGittins"),
    "afs-l": _lazy("afs", "AfsL"),
    "afs-p": _lazy("afs", "AfsP"),
    "synergy-tune": _lazy("synergy", "SynergyTune"),
    "synergy-opt": _lazy("synergy", "SynergyOpt"),
    "gandiva": _lazy("gandiva", "Gandiva"),
    "srtf": _lazy("srtf", "Srtf"),
    "optimus": _lazy("optimus", "Optimus"),
}


def make_policy(name: str, **knobs) -> Policy[Any]:
    """The policy called ``name`` with its knobs (e.g. ``fairness_knob``, ``lease_s``)."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(sorted(POLICIES))})")
    try:
        return POLICIES[name](**knobs)
    except TypeError as exc:
        raise ValueError(f"policy {name!r}: {exc}") from None
