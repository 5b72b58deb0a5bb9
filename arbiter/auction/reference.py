"""Exhaustive references for the PA auction (Themis §3.3, Pseudocode 1; spec B.5), tests only.

:func:`brute_force_pf` and :func:`brute_force_payments` compute the proportional-fair
allocation (with spec B.5 Gap 2's lexicographic objective) and the hidden payments c_i by
trying every combination of rows. They share no code with the solver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping

from arbiter.auction.model import Bid

__all__ = ["brute_force_payments", "brute_force_pf"]


def _lex_value(rhos: Iterable[float]) -> tuple[int, float]:
    """(number of apps with finite ρ, Σ log(1/ρ) over them): the Gap-2 PF objective."""
    finite = [r for r in rhos if math.isfinite(r)]
    return len(finite), -sum(math.log(r) for r in finite)


def brute_force_pf(
    bids: Iterable[Bid], offered: frozenset[str]
) -> tuple[tuple[int, float], dict[str, frozenset[str]]]:
    """Reference PF by exhaustive search over every combination of rows (tests only).

    Returns the optimal objective ``(apps with finite ρ, Σ log 1/ρ over them)`` and one optimal
    allocation. It shares no code with the solver.
    """
    bids = list(bids)
    best_value: tuple[int, float] = (-1, -math.inf)
    best: dict[str, frozenset[str]] = {}
    for combo in itertools.product(*(list(b.rows.items()) for b in bids)):
        sets = [k for k, _ in combo]
        if not all(k <= offered for k in sets):
            continue
        if sum(len(k) for k in sets) != len(frozenset().union(*sets)):
            continue
        value = _lex_value(rho for _, rho in combo)
        if value > best_value:
            best_value = value
            best = {b.app_id: k for b, (k, _) in zip(bids, combo, strict=True)}
    return best_value, best


def brute_force_payments(
    bids: Iterable[Bid], offered: frozenset[str], pf_allocation: Mapping[str, frozenset[str]]
) -> dict[str, float]:
    """Reference c_i for a given PF allocation, by exhaustive search (tests only)."""
    bids = list(bids)
    rho = {b.app_id: b.rows[pf_allocation[b.app_id]] for b in bids}
    market = [b for b in bids if math.isfinite(rho[b.app_id])]
    c = {b.app_id: 1.0 for b in bids}
    for bid in market:
        others = [b for b in market if b is not bid]
        kept = _lex_value(rho[b.app_id] for b in others)
        best, _ = brute_force_pf(others, offered)
        if best[0] == kept[0]:
            c[bid.app_id] = min(1.0, math.exp(kept[1] - best[1]))
        else:  # cannot happen: the PF keeps every other market app finite
            raise AssertionError("PF allocation was not lexicographically optimal")
    return c
