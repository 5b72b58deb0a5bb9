"""The PA auction as a 0/1 program (Themis §3.3, Pseudocode 1; spec B.5, its ILP formulation).

One binary per bid row, one row per app, each GPU used at most once, minimise ``Σ log ρ``
(= maximise Π 1/ρ). Here the bids become that program's data: per app a list of
(GPU-index set, cost = log ρ) rows, row 0 being the empty row, with ρ = ∞ priced
lexicographically (spec B.5 Gap 2), and the apps split into independent conflict components.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from arbiter.auction.model import Bid


@dataclass(frozen=True, slots=True)
class _App:
    app_id: str
    rows: tuple[tuple[frozenset[int], float], ...]  # row 0 = (∅, cost of ρ_old)
    keys: tuple[frozenset[str], ...]
    rows_rho: tuple[float, ...]
    starving: bool  # ρ_old = ∞
    best: float = math.inf  # the lowest cost of any row (set by __post_init__)

    def __post_init__(self) -> None:
        object.__setattr__(self, "best", min(cost for _, cost in self.rows))


def _prepare(bids: Iterable[Bid], offered: frozenset[str]) -> list[_App]:
    """Validate and index the bids; cost = log ρ, ρ = ∞ priced lexicographically (Gap 2).

    Rows with ρ >= ρ_old can never be chosen over the empty row in an optimum that frees GPUs,
    so they are dropped (the optimum value is unchanged).
    """
    gpu_index = {g: k for k, g in enumerate(sorted(offered))}
    to_index = gpu_index.__getitem__
    # (app_id, cost of ρ_old, useful rows as (GPU ids, GPU indices, ρ, log ρ), ρ_old)
    raw: list[tuple[str, float, list[tuple[frozenset[str], frozenset[int], float, float]], float]]
    raw = []
    seen: set[str] = set()
    log = math.log
    for bid in bids:
        if not isinstance(bid, Bid):
            raise ValueError(f"bids must be Bid objects, got {type(bid).__name__}")
        if bid.app_id in seen:
            raise ValueError(f"duplicate app_id {bid.app_id!r}: each app bids exactly once")
        seen.add(bid.app_id)
        rho_old = bid.rho_old
        useful = []
        for key, rho in bid.rows.items():
            if not key:
                continue
            if not key <= offered:
                raise ValueError(
                    f"bid of app {bid.app_id!r}: row names GPUs not offered: "
                    f"{sorted(key - offered)}"
                )
            if rho < rho_old:  # a row no better than nothing is never worth GPUs
                # Indices inserted in ascending order: a frozenset of ints iterates in an order
                # that depends on the order of insertion when its elements collide, and the
                # order of ``key`` (strings) follows PYTHONHASHSEED. The LP's rows follow this
                # one, so the auction would decide differently in another process.
                useful.append((key, frozenset(sorted(map(to_index, key))), rho, log(rho)))
        old = log(rho_old) if math.isfinite(rho_old) else math.inf
        raw.append((bid.app_id, old, useful, rho_old))
    # ρ = ∞ costs more than any difference of finite costs can make up, so the PF allocation
    # first maximises the number of apps with finite ρ, then the product (Gap 2).
    # Two allocations differ by at most 2 Σ_i max_r |log ρ_i,r| in finite cost.
    inf_cost = 1.0 + 2.0 * sum(
        max((abs(c) for c in [old, *(cost for *_, cost in rows)] if c < math.inf), default=0.0)
        for _, old, rows, _ in raw
    )
    apps = []
    for app_id, old, rows, rho_old in raw:
        starving = old == math.inf
        apps.append(
            _App(
                app_id,
                ((frozenset(), inf_cost if starving else old), *((g, c) for _, g, _, c in rows)),
                (frozenset(), *(k for k, *_ in rows)),
                (rho_old, *(r for _, _, r, _ in rows)),
                starving,
            )
        )
    return apps


def _components(apps: list[_App]) -> list[list[int]]:
    """Connected components of the conflict graph (apps whose rows share a GPU), each in
    ascending order, ordered by their first app."""
    parent = list(range(len(apps)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    owner: dict[int, int] = {}
    for a, app in enumerate(apps):
        # every GPU the app's rows name, once (the union-find needs each only once)
        for g in frozenset().union(*[gpus for gpus, _ in app.rows]):
            b = owner.setdefault(g, a)
            if b != a:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for a in range(len(apps)):
        groups.setdefault(find(a), []).append(a)
    return list(groups.values())


def _cost(apps: list[_App], choice: Mapping[int, int]) -> float:
    """Σ log ρ of a choice (app -> row): the program's objective."""
    return sum([apps[a].rows[r][1] for a, r in choice.items()])  # (a list: cheaper here)
