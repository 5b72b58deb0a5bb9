"""The bid table and the auction's outcome (Themis §3.3; spec B.4 bid format, B.5 PA auction).

A bid is one app's table of rows ``{GPU set: ρ with that set}``, the empty set carrying ρ_old
(Table 1, T:906-919); :class:`PAResult` is what one partial-allocation auction decides: the
proportional-fair allocation, the hidden payments c_i and the leftover GPUs.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = ["RHO_MAX", "RHO_MIN", "Bid", "PAResult", "Rounding", "Solver"]

# Accepted range of finite ρ: wide enough for any real app, narrow enough that products of
# ratios stay meaningful in floating point.
RHO_MIN, RHO_MAX = 1e-9, 1e9


class Rounding(StrEnum):
    """How a fractional c_i becomes whole GPUs (spec B.5 Gap 1)."""

    LEASE_TIME = "lease-time"
    COUNT = "count"


class Solver(StrEnum):
    """Which exact solver runs the auction's 0/1 programs (:mod:`arbiter.auction.solve`).

    All are exact and agree on every optimum value. ``CLIQUES`` and ``PAIRS`` differ in the
    cuts that keep the LP relaxation integral; ``DUALS`` (the default) is ``CLIQUES`` plus
    dual certificates that settle most c_i = 1 without a solve. The older ones are kept so a
    benchmark can compare them in one run.
    """

    CLIQUES = "cliques"  # maximal cliques of the conflict graph (previous)
    PAIRS = "pairs"  # one row against the rows of one other app (previous)
    # CLIQUES, c_i = 1 certified by the PF LP's duals, zero-half cuts (arbiter.auction.certify;
    # default)
    DUALS = "duals"


@dataclass(frozen=True)
class Bid:
    """One app's bid: ``rows[G] = ρ if the app receives the GPU set G``; ``rows[∅] = ρ_old``."""

    app_id: str
    rows: Mapping[frozenset[str], float]

    def __post_init__(self) -> None:
        if not isinstance(self.app_id, str) or not self.app_id:
            raise ValueError(f"Bid.app_id must be a non-empty string, got {self.app_id!r}")
        if not isinstance(self.rows, Mapping) or not self.rows:
            raise ValueError(f"bid of app {self.app_id!r}: rows must be a non-empty mapping")
        clean: dict[frozenset[str], float] = {}
        for key, value in self.rows.items():
            if not isinstance(key, frozenset) or not all(isinstance(g, str) for g in key):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row key {key!r} must be a frozenset of GPU ids"
                )
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row {sorted(key)} has rho={value!r}, not a number"
                )
            rho = float(value)
            if not (RHO_MIN <= rho <= RHO_MAX or rho == math.inf):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row {sorted(key)} has rho={rho}; rho must be "
                    f"a number in [{RHO_MIN:g}, {RHO_MAX:g}] or inf (NaN, zero and negatives "
                    "are rejected)"
                )
            clean[key] = rho
        if frozenset() not in clean:
            raise ValueError(
                f"bid of app {self.app_id!r}: the empty row (rho_old) is missing; "
                "add rows[frozenset()] = the app's rho if it gets nothing"
            )
        object.__setattr__(self, "rows", MappingProxyType(clean))

    # picklable for the auction worker process (arbiter.decider)
    def __reduce__(self) -> tuple[type[Bid], tuple[str, dict[frozenset[str], float]]]:
        return (Bid, (self.app_id, dict(self.rows)))

    @property
    def rho_old(self) -> float:
        return self.rows[frozenset()]


@dataclass(frozen=True)
class PAResult:
    """Outcome of one PA auction (see :mod:`arbiter.auction` for the Gap-1 semantics)."""

    pf_allocation: dict[str, frozenset[str]]
    c: dict[str, float]
    allocation: dict[str, frozenset[str]]
    lease_fraction: dict[str, float]
    leftover: dict[str, float]
    rounding: Rounding
    pf_rho: dict[str, float]
    solves: int = field(default=0, compare=False)
    # Σ_j log(1/ρ_j) of the optimal market without app i (the apps with finite ρ at the PF,
    # minus i): the denominator of c_i. Unlike c_i it does not depend on how ties between
    # equally good PF allocations were broken, so it is what two solvers must agree on.
    value_without: dict[str, float] = field(default_factory=dict, compare=False)
    # Solves stopped by a time budget with their incumbent (0: PF and every c_i are exact).
    budget_stops: int = field(default=0, compare=False)

    @property
    def hidden_payment(self) -> dict[str, float]:
        """1 - c_i: the share of its PF allocation app i gives up."""
        return {a: 1.0 - c for a, c in self.c.items()}
