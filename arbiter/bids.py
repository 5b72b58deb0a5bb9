"""Bid-table generation by an Agent (Themis §4.1-4.2, Table 1; thesis T:1129).

Given an offer (a set of GPU ids), the Agent prices GPU subsets with its app's ρ estimator and
answers with a single bid: rows ``{G: ρ(held ∪ G)}`` plus the empty row ``ρ_old = ρ(held)``.

The paper's Agent enumerates "all possible subsets" (T:1129), which is exponential in the offer
and is why its p95 bid time is 334 ms (T:1269). We do not: (spec B.4 [ASSUMPTION])

1. **Candidates.** For each size n = 1 .. (demand_max - |held|): n GPUs on one machine (one
   dense block of n GPUs per machine, fullest slots first; which of the machine's disjoint
   blocks depends on the app, so two apps can bid for different GPUs of one 8-GPU machine and
   both win), and for
   n <= 8 every other split of n over machines (each integer partition of n, realised on
   distinct machines within one rack, one candidate per rack that can hold it, else across
   racks); larger n take the densest split per rack. Machines and racks where the app already
   holds GPUs come first, since ρ prices the whole allocation held ∪ G. Every split is priced
   because measured profiles do not always favour dense placements (Pollux's bert at batch 12
   steps faster on three 1-GPU nodes than on a 1 + 2 split).
2. **Collapse.** Candidates with the same placement shape (:class:`~arbiter.placement.Placement`:
   per rack / machine / slot counts and GPU types) are equivalent under the topology, so ρ is
   evaluated once per shape. The estimator must therefore depend on a GPU set only through its
   shape (every estimator in :mod:`arbiter.fairness` does).
3. **Prune and cap.** Shapes with ρ >= ρ_old, and shapes no better than a smaller shape, are
   dropped (more GPUs for no gain). The size is capped at the app's max demand. The table is
   capped at ``max_rows`` rows: best shapes first, one realisation each, then further
   realisations of each shape round-robin, so the auction can pack apps onto different
   machines. Realisations are visited from an app-specific rotation (CRC32 of the app id), so
   apps with the same shapes do not all name the same machine first.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

from arbiter.auction import Bid
from arbiter.cluster import Cluster
from arbiter.placement import Placement, placement_of

__all__ = ["RhoEstimator", "candidate_sets", "generate_bid", "partitions", "shape_of"]

# Sizes up to this enumerate every split of the GPUs over machines; larger sizes take the
# densest split per rack (partitions of n grow too fast: p(16) = 231, p(32) = 8349).
_PARTITION_LIMIT = 8

RhoEstimator = Callable[[frozenset[str], Placement], float]
"""ρ of the app if it held exactly this GPU set (given with its shape)."""


@dataclass(frozen=True, slots=True)
class _MachineFree:
    name: str
    rack: str
    gpus: tuple[str, ...]  # offered GPUs, fullest slot first
    held: bool  # the app already holds GPUs on this machine


_OFFERS: dict[tuple[int, frozenset[str]], tuple[Cluster, tuple[_MachineFree, ...]]] = {}
_OFFERS_MAX = 4_096


def _offer_by_machine(cluster: Cluster, offered: frozenset[str]) -> tuple[_MachineFree, ...]:
    """The offered GPUs per machine (fullest slot first), machines by free GPUs descending,
    then name; memoised, since every bidder of a call prices the same offer."""
    key = (id(cluster), offered)
    hit = _OFFERS.get(key)
    if hit is not None and hit[0] is cluster:
        return hit[1]
    slots: dict[str, list[str]] = defaultdict(list)
    for gid in offered:
        slots[cluster.gpu(gid).slot].append(gid)
    per_machine: dict[str, list[list[str]]] = defaultdict(list)
    for _slot, gids in slots.items():
        per_machine[cluster.gpu(gids[0]).machine].append(sorted(gids))
    out = []
    for machine, slot_lists in per_machine.items():
        slot_lists.sort(key=lambda s: (-len(s), s[0]))
        gpus = tuple(g for s in slot_lists for g in s)
        out.append(_MachineFree(machine, cluster.gpu(gpus[0]).rack, gpus, False))
    out.sort(key=lambda m: (-len(m.gpus), m.name))
    if len(_OFFERS) >= _OFFERS_MAX:
        _OFFERS.clear()
    _OFFERS[key] = (cluster, tuple(out))
    return tuple(out)


def _free_by_machine(
    cluster: Cluster, offered: frozenset[str], held: frozenset[str]
) -> list[_MachineFree]:
    """The offer per machine; machines where the app holds GPUs first, then by free GPUs
    descending, then name."""
    machines = _offer_by_machine(cluster, offered)
    if not held:
        return list(machines)
    held_machines = {cluster.gpu(g).machine for g in held}
    near = [replace(m, held=True) for m in machines if m.name in held_machines]
    return near + [m for m in machines if m.name not in held_machines]


@functools.cache
def partitions(n: int, largest: int) -> tuple[tuple[int, ...], ...]:
    """Integer partitions of n with parts <= largest, parts in descending order."""
    if n == 0:
        return ((),)
    return tuple(
        (first, *rest)
        for first in range(min(n, largest), 0, -1)
        for rest in partitions(n - first, first)
    )


def _realise(machines: list[_MachineFree], parts: tuple[int, ...]) -> frozenset[str] | None:
    """Put each part on its own machine, first fit in the given order (None if impossible)."""
    taken: list[str] = []
    used: set[str] = set()
    for part in parts:
        m = next((m for m in machines if m.name not in used and len(m.gpus) >= part), None)
        if m is None:
            return None
        used.add(m.name)
        taken.extend(m.gpus[:part])
    return frozenset(taken)


def _greedy(machines: list[_MachineFree], n: int) -> frozenset[str] | None:
    """n GPUs over the fewest machines of ``machines`` (fullest first)."""
    taken: list[str] = []
    for m in sorted(machines, key=lambda m: -len(m.gpus)):
        taken.extend(m.gpus[: n - len(taken)])
        if len(taken) == n:
            return frozenset(taken)
    return None


def _rotations(racks: list[list[_MachineFree]]) -> list[list[_MachineFree]]:
    """The machines of all racks, once starting from each rack (cross-rack sets then differ
    in which racks, and so which GPU types, they lean on)."""
    return [[m for ms in racks[k:] + racks[:k] for m in ms] for k in range(len(racks))]


_SHAPES: dict[tuple[int, frozenset[str]], tuple[Cluster, Placement]] = {}
_SHAPES_MAX = 200_000


def shape_of(cluster: Cluster, gpus: frozenset[str]) -> Placement:
    """``placement_of`` memoised: the same candidate sets come back offer after offer."""
    key = (id(cluster), gpus)
    hit = _SHAPES.get(key)
    if hit is not None and hit[0] is cluster:
        return hit[1]
    if len(_SHAPES) >= _SHAPES_MAX:
        _SHAPES.clear()
    shape = placement_of(cluster, gpus)
    _SHAPES[key] = (cluster, shape)
    return shape


_SPREAD: dict[tuple[int, frozenset[str], frozenset[str], int], tuple[Cluster, list]] = {}
_SPREAD_MAX = 20_000


def _spread_sets(racks: list[list[_MachineFree]], n: int, widest: int) -> list[frozenset[str]]:
    """The candidate sets of ``n`` GPUs over several machines (module docstring, step 1). They
    depend on the offer and the holding, not on the app (``candidate_sets`` memoises them:
    every bidder holding nothing prices the same ones)."""
    sets: list[frozenset[str]] = []
    if n <= _PARTITION_LIMIT:
        for parts in partitions(n, widest):
            if len(parts) == 1:
                continue  # the single-machine sets
            found = [s for ms in racks if (s := _realise(ms, parts)) is not None]
            if not found:  # only across racks: one set per starting rack
                found = [s for ms in _rotations(racks) if (s := _realise(ms, parts))]
            sets.extend(found)
    else:
        found = [s for ms in racks if (s := _greedy(ms, n)) is not None]
        if not found:
            found = [s for ms in _rotations(racks) if (s := _greedy(ms, n))]
        sets.extend(found)
    return sets


def candidate_sets(
    cluster: Cluster,
    offered: frozenset[str],
    max_new: int,
    held: frozenset[str] = frozenset(),
    salt: int = 0,
) -> dict[int, list[frozenset[str]]]:
    """Candidate GPU sets of each size 1..max_new (see module docstring, step 1)."""
    machines = _free_by_machine(cluster, offered, held)
    held_racks = {cluster.gpu(g).rack for g in held}
    by_rack: dict[str, list[_MachineFree]] = defaultdict(list)
    for m in machines:
        by_rack[m.rack].append(m)
    racks = sorted(by_rack.values(), key=lambda ms: (ms[0].rack not in held_racks, ms[0].rack))
    widest = max((len(m.gpus) for m in machines), default=0)
    out: dict[int, list[frozenset[str]]] = {}
    for n in range(1, min(max_new, len(offered)) + 1):
        # One machine: one dense block of n GPUs per machine. Which block depends on ``salt``
        # (the app), so apps bidding for the same shape name different GPUs of a big machine
        # and can share it, without multiplying equivalent rows.
        sets: list[frozenset[str]] = []
        for k, m in enumerate(machines):
            blocks = len(m.gpus) // n
            if blocks:
                b = 0 if m.held else (salt + k) % blocks
                sets.append(frozenset(m.gpus[b * n : (b + 1) * n]))
        key = (id(cluster), offered, held, n)
        hit = _SPREAD.get(key)
        if hit is not None and hit[0] is cluster:
            sets.extend(hit[1])
        else:
            spread = _spread_sets(racks, n, widest)
            if len(_SPREAD) >= _SPREAD_MAX:
                _SPREAD.clear()
            _SPREAD[key] = (cluster, spread)
            sets.extend(spread)
        if sets:
            out[n] = list(dict.fromkeys(sets))
    return out


def generate_bid(
    app_id: str,
    cluster: Cluster,
    offered: frozenset[str],
    rho: RhoEstimator,
    *,
    demand_max: int,
    held: frozenset[str] = frozenset(),
    max_rows: int = 32,
) -> Bid:
    """The app's single bid for ``offered`` (see module docstring)."""
    if demand_max < 1:
        raise ValueError(f"demand_max must be >= 1, got {demand_max}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 (the empty row), got {max_rows}")
    unknown = cluster.unknown(offered | held)
    if unknown:
        raise ValueError(f"offer or holding names GPUs not in cluster {cluster.name!r}: {unknown}")
    if offered & held:
        raise ValueError(f"offered GPUs already held by {app_id!r}: {sorted(offered & held)}")
    rho_old = rho(held, placement_of(cluster, held))
    offset = zlib.crc32(app_id.encode())
    candidates = candidate_sets(cluster, offered, demand_max - len(held), held, salt=offset)

    # Collapse by shape of the app's whole allocation, evaluating ρ once per shape.
    by_shape: dict[Placement, list[frozenset[str]]] = {}
    for sets in candidates.values():
        for s in sets:
            by_shape.setdefault(shape_of(cluster, held | s if held else s), []).append(s)
    priced: list[tuple[float, int, Placement]] = []
    for shape, sets in by_shape.items():
        value = rho(held | sets[0], shape)
        if math.isnan(value) or value <= 0:
            raise ValueError(f"rho estimator of {app_id!r} returned {value} for shape {shape}")
        priced.append((value, len(sets[0]), shape))
    priced.sort(key=lambda p: (p[0], p[1]))

    kept: list[tuple[float, Placement]] = []
    best_by_size: dict[int, float] = {}
    for value, size, shape in priced:
        if value >= rho_old:
            continue
        if any(v <= value for s, v in best_by_size.items() if s < size):
            continue  # a smaller set is at least as good
        best_by_size[size] = min(best_by_size.get(size, math.inf), value)
        kept.append((value, shape))

    rows: dict[frozenset[str], float] = {frozenset(): rho_old}
    depth = 0
    while len(rows) < max_rows and any(depth < len(by_shape[s]) for _, s in kept):
        for value, shape in kept:
            sets = by_shape[shape]
            if depth < len(sets) and len(rows) < max_rows:
                rows[sets[(offset + depth) % len(sets)]] = value
        depth += 1
    return Bid(app_id, rows)
