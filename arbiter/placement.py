"""Placement shapes and the placement slowdown S(G) (Themis §4.1 Eq. 1, thesis T:1103).

Themis's ρ estimator multiplies the serial iteration time by a slowdown ``S(G) >= 1`` that
depends only on *where* the GPUs of ``G`` sit: "determined by the slowest network interconnect
between the machines" (T:2032). Two models are provided:

* :class:`LocalityModel`, the 4-level default (GPU -> slot -> machine -> rack). The thesis gives
  crude defaults single machine = 1, cross-machine = 1.1, cross-rack = 1.3 (T:1103); the slot
  level is ours and defaults to 1 (same slot and same machine are equally fast), as the spec
  suggests (B.11).
* :class:`ProfileModel`, measured per app from a Pollux ``placements.csv`` (columns
  ``placement,local_bsz,step_time,sync_time``; a placement such as ``112`` lists per-node GPU
  counts). ``S(G) = step_time(placement of G) / step_time(one node holding |G| GPUs)`` at a
  reference per-GPU batch size (by default the size measured for the most placements), i.e. the
  pure placement slowdown, leaving scaling with |G| to Eq. 1's linear term. When the profile has
  no single-node row for ``|G|`` GPUs (more GPUs than its nodes held), the reference is its
  densest row of that size and the result is multiplied by the fallback model's cross-machine
  factor. A placement measured in several node orders (``1122`` and ``1212``) takes the mean of
  its readings. Placements the profile never measured fall back to the :class:`LocalityModel`.
  Profiles know nothing of racks: a cross-rack placement is further multiplied by
  ``cross_rack / cross_machine`` of the fallback.
* :class:`PredictedSlowdown`, from an app's own iteration-time predictor (a callable of the
  placement class, the per-machine GPU counts): ``S(G) = T(G) / T(dense |G|)``, the dense class
  packing as many GPUs onto the fewest machines, cached per class. The application master
  supplies the callable (e.g. a communication planner pricing each class with its own plan,
  seed 000 ch. 4), so this package imports nothing of it. Unlike the other models S may fall
  below 1: a spread placement can beat the dense one under a plan that uses the hosts' NICs.

A :class:`Placement` is the canonical *shape* of a GPU set: per rack, per machine, per slot GPU
counts (sorted) plus GPU types. Two sets with the same shape are equivalent under the topology,
so every ρ estimator in this package is a function of the shape alone; the bid generator
(:mod:`arbiter.bids`) uses this to evaluate ρ once per shape.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from arbiter.cluster import GPU, Cluster

__all__ = [
    "IterTimePredictor",
    "Locality",
    "LocalityModel",
    "Placement",
    "PredictedSlowdown",
    "ProfileModel",
    "SlowdownModel",
    "placement_of",
]


class Locality(IntEnum):
    """The widest level a GPU set spans (higher = slower interconnect)."""

    NONE = 0  # empty set
    SLOT = 1
    MACHINE = 2
    CROSS_MACHINE = 3  # several machines, one rack
    CROSS_RACK = 4


@dataclass(frozen=True, slots=True)
class Placement:
    """Canonical shape of a GPU set.

    ``shape`` is a sorted tuple of racks; each rack a sorted tuple of machines; each machine a
    tuple ``(gpu_type, per-slot counts sorted descending)``.
    """

    shape: tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]

    @property
    def num_gpus(self) -> int:
        return sum(sum(slots) for rack in self.shape for _, slots in rack)

    @property
    def per_machine(self) -> tuple[int, ...]:
        """GPU count per machine, descending (the key Pollux profiles use, reversed)."""
        return tuple(sorted((sum(s) for rack in self.shape for _, s in rack), reverse=True))

    @property
    def gpu_types(self) -> frozenset[str]:
        return frozenset(t for rack in self.shape for t, _ in rack)

    @property
    def locality(self) -> Locality:
        if not self.shape:
            return Locality.NONE
        if len(self.shape) > 1:
            return Locality.CROSS_RACK
        machines = self.shape[0]
        if len(machines) > 1:
            return Locality.CROSS_MACHINE
        return Locality.SLOT if len(machines[0][1]) == 1 else Locality.MACHINE


EMPTY = Placement(())


def placement_of(cluster: Cluster, gpu_ids: Iterable[str]) -> Placement:
    """The shape of ``gpu_ids`` in ``cluster`` (raises KeyError for an unknown GPU)."""
    gpu = cluster.gpu
    slots: dict[str, int] = {}  # slot -> GPUs of the set in it, in order of first sight
    where: dict[str, GPU] = {}  # slot -> a GPU of it (its rack, machine, type)
    for gid in gpu_ids:
        g = gpu(gid)
        n = slots.get(g.slot)
        if n is None:
            slots[g.slot] = 1
            where[g.slot] = g
        else:
            slots[g.slot] = n + 1
    racks: dict[str, dict[str, list[int]]] = {}
    types: dict[str, str] = {}
    for slot, n in slots.items():
        g = where[slot]
        machines = racks.get(g.rack)
        if machines is None:
            machines = racks[g.rack] = {}
        counts = machines.get(g.machine)
        if counts is None:
            machines[g.machine] = [n]
            types[g.machine] = g.gpu_type
        else:
            counts.append(n)
    shape = tuple(
        sorted(
            tuple(sorted((types[m], tuple(sorted(c, reverse=True))) for m, c in ms.items()))
            for ms in racks.values()
        )
    )
    return Placement(shape)


class SlowdownModel(Protocol):
    """S(G) as a function of the placement shape; ``slowdown(EMPTY)`` is 1."""

    def slowdown(self, placement: Placement) -> float: ...


@dataclass(frozen=True, slots=True)
class LocalityModel:
    """The 4-level locality model with the thesis's defaults (T:1103)."""

    slot: float = 1.0
    machine: float = 1.0
    cross_machine: float = 1.1
    cross_rack: float = 1.3

    def __post_init__(self) -> None:
        values = (self.slot, self.machine, self.cross_machine, self.cross_rack)
        if not all(v >= 1.0 for v in values):  # also rejects NaN
            raise ValueError(f"LocalityModel: every slowdown must be >= 1, got {values}")

    def slowdown(self, placement: Placement) -> float:
        level = placement.locality
        return {
            Locality.NONE: 1.0,
            Locality.SLOT: self.slot,
            Locality.MACHINE: self.machine,
            Locality.CROSS_MACHINE: self.cross_machine,
            Locality.CROSS_RACK: self.cross_rack,
        }[level]


@dataclass(frozen=True)
class ProfileModel:
    """S(G) from measured step times per placement (Pollux ``placements.csv``)."""

    step_time: Mapping[tuple[int, ...], float]  # per-machine counts (descending) -> seconds
    fallback: LocalityModel = field(default_factory=LocalityModel)
    name: str = "profile"

    @classmethod
    def from_pollux_csv(
        cls,
        path: str | Path,
        local_bsz: int | None = None,
        fallback: LocalityModel | None = None,
    ) -> ProfileModel:
        readings: dict[int, dict[tuple[int, ...], list[float]]] = defaultdict(
            lambda: defaultdict(list)
        )
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"placement", "local_bsz", "step_time"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{path}: placements.csv lacks columns {sorted(missing)}")
            for lineno, rec in enumerate(reader, start=2):
                try:
                    key = tuple(sorted((int(ch) for ch in rec["placement"]), reverse=True))
                    bsz, t = int(rec["local_bsz"]), float(rec["step_time"])
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: bad row {rec}: {exc}") from None
                if not t > 0:
                    raise ValueError(f"{path}:{lineno}: step_time must be > 0, got {t}")
                readings[bsz][key].append(t)
        # A placement measured in several node orders ("1122", "1212") gets the mean reading.
        rows = {b: {k: sum(v) / len(v) for k, v in ks.items()} for b, ks in readings.items()}
        if not rows:
            raise ValueError(f"{path}: no measurements")
        if local_bsz is None:
            local_bsz = max(rows, key=lambda b: (len(rows[b]), b))
        elif local_bsz not in rows:
            raise ValueError(f"{path}: no measurements at local_bsz={local_bsz}")
        return cls(
            step_time=dict(rows[local_bsz]),
            fallback=fallback or LocalityModel(),
            name=Path(path).parent.name or str(path),
        )

    def slowdown(self, placement: Placement) -> float:
        n = placement.num_gpus
        if n == 0:
            return 1.0
        key = placement.per_machine
        t = self.step_time.get(key)
        if t is None:
            return self.fallback.slowdown(placement)
        ref = self.step_time.get((n,))
        scale = 1.0
        if ref is None:
            same_size = [k for k in self.step_time if sum(k) == n]
            densest = min(same_size, key=lambda k: (len(k), k))
            ref, scale = self.step_time[densest], self.fallback.cross_machine
        s = max(1.0, t / ref) * scale
        if placement.locality is Locality.CROSS_RACK:
            s *= self.fallback.cross_rack / self.fallback.cross_machine
        return s


IterTimePredictor = Callable[[tuple[int, ...]], float]
"""Predicted seconds per iteration on a placement class (per-machine GPU counts, descending)."""


@dataclass(frozen=True)
class PredictedSlowdown:
    """S(G) from ``predict`` (see the module docstring); ``gpus_per_machine`` sizes the dense
    class. The cache holds one prediction per class."""

    predict: IterTimePredictor
    gpus_per_machine: int = 8
    _cache: dict[tuple[int, ...], float] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gpus_per_machine < 1:
            raise ValueError(f"gpus_per_machine must be >= 1, got {self.gpus_per_machine}")

    def dense(self, n: int) -> tuple[int, ...]:
        full, rest = divmod(n, self.gpus_per_machine)
        return (self.gpus_per_machine,) * full + ((rest,) if rest else ())

    def iter_time(self, per_machine: tuple[int, ...]) -> float:
        t = self._cache.get(per_machine)
        if t is None:
            t = float(self.predict(per_machine))
            if not t > 0 or t == float("inf"):
                raise ValueError(f"predicted iteration time {t} for {per_machine} is not > 0")
            self._cache[per_machine] = t
        return t

    def slowdown(self, placement: Placement) -> float:
        n = placement.num_gpus
        if n == 0:
            return 1.0
        return self.iter_time(placement.per_machine) / self.iter_time(self.dense(n))
