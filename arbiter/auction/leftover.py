"""Leftover allocation: from c_i to whole GPUs (Themis §3.3, Pseudocode 1's L; spec B.5 Gap 1).

``L = Σ_i (1 - c_i) G_i,pf`` is what the hidden payments leave over, plus the GPUs no PF row
used. c_i is fractional but GPUs are not (the papers are silent, spec B.5 Gap 1):

* ``Rounding.LEASE_TIME`` (default): app i holds its whole PF set G_i,pf for the fraction c_i
  of the lease (the placement it valued is kept); for the remaining 1 - c_i those GPUs are
  leftover;
* ``Rounding.COUNT``: i keeps its best bid row inside G_i,pf of at most floor(c_i |G_i,pf|)
  GPUs for the whole lease, the rest is leftover.

Either way the leftover maps each leftover GPU to the fraction of the lease it is free for
(1.0 = the whole lease; GPUs no PF row used are always 1.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from arbiter.auction.model import Bid, Rounding


def _settle(
    bids: Iterable[Bid],
    offered: frozenset[str],
    pf: Mapping[str, frozenset[str]],
    c: Mapping[str, float],
    rounding: Rounding,
) -> tuple[dict[str, frozenset[str]], dict[str, float], dict[str, float]]:
    """(allocation, lease fraction, leftover) of the PF allocation ``pf`` with payments ``c``."""
    used = frozenset().union(*pf.values())
    leftover: dict[str, float] = dict.fromkeys(offered - used, 1.0)
    allocation: dict[str, frozenset[str]]
    lease_fraction: dict[str, float]
    if rounding is Rounding.LEASE_TIME:
        allocation = dict(pf)
        lease_fraction = dict(c)
        for app_id, gpus in pf.items():
            if c[app_id] < 1.0:
                leftover.update(dict.fromkeys(gpus, 1.0 - c[app_id]))
    else:
        allocation, lease_fraction = {}, {}
        by_app = {b.app_id: b for b in bids}
        for app_id, gpus in pf.items():
            keep = math.floor(c[app_id] * len(gpus) + 1e-9)
            inside = [
                (rho, len(k), sorted(k), k)
                for k, rho in by_app[app_id].rows.items()
                if k <= gpus and len(k) <= keep
            ]
            kept = min(inside)[3]  # the empty row always qualifies
            allocation[app_id] = kept
            lease_fraction[app_id] = 1.0
            leftover.update(dict.fromkeys(gpus - kept, 1.0))
    return allocation, lease_fraction, dict(sorted(leftover.items()))
