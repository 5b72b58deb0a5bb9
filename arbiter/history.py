"""What the console shows over time: bounded ring buffers of auctions, ρ and QOOP's share.

The live arbiter keeps only the present (the lease book, the sessions, the share hub); an
operator also wants the recent past, as the ResourceManager's UI lists finished applications.
:class:`History` keeps three kinds of record, each in a ring buffer of fixed length, so memory
stays bounded however long the arbiter runs:

* :class:`AuctionRecord`: one Themis round as decided (Themis §4.3 steps 2-5, Pseudocode 1):
  the GPUs offered, each bidder's ρ_old and number of bid rows, the proportional-fair winners
  with their ρ, c_i and hidden payment 1 - c_i, the leftover GPU fractions, the solve time;
* :class:`RhoSample`: each app's ρ_current (Themis Eq. 1) at a sampling instant, per app, for
  at most ``max_apps`` apps (the least recently seen app is forgotten first);
* :class:`ShareSample`: QOOP's 1-over-n share R/|J| (QOOP Pseudocode 1) whenever the share
  epoch moves;
* :class:`PlanSwitchRecord`: a query's change of plan as its replanner reported it (QOOP
  Pseudocode 2: the switch on a share change, with the stages it cancelled and the
  checkpoints the new plan resumes from).

Everything here is pure data and plain Python; the arbiter's shell (:mod:`arbiter.telemetry`)
feeds it and the console (:mod:`arbiter.console`) reads :meth:`History.to_json`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from arbiter.auction import Bid
from arbiter.rounds import RoundOutcome

__all__ = [
    "AuctionRecord",
    "BidderRecord",
    "History",
    "PlanSwitchRecord",
    "RhoSample",
    "ShareSample",
    "auction_record",
    "finite",
]


def finite(x: float) -> float | None:
    """``x`` for JSON: None stands for ∞ (and NaN), which JSON cannot carry."""
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class BidderRecord:
    """One participant of a round: what it bid and what it got."""

    app_id: str
    rho_old: float  # its bid's row for the empty set (∞ when it holds nothing)
    rows: int  # rows of its bid table (0: it did not answer)
    pf_gpus: int  # GPUs in its proportional-fair allocation
    pf_rho: float  # ρ at the PF allocation
    c: float  # c_i: the fraction of its PF allocation it keeps
    granted: int  # GPUs it was leased (after rounding)

    @property
    def hidden_payment(self) -> float:
        return 1.0 - self.c


@dataclass(frozen=True)
class AuctionRecord:
    """One decided Themis round (module docstring)."""

    round: int
    at: float  # the arbiter's clock when it was decided
    offered: int  # GPUs offered
    bidders: tuple[BidderRecord, ...]
    leftover: Mapping[str, float]  # GPU -> fraction of the lease left over for non-bidders
    leftover_granted: Mapping[str, int]  # non-bidder -> GPUs it received from the leftover
    solve_seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "round": self.round,
            "at": self.at,
            "offered": self.offered,
            "solve_seconds": self.solve_seconds,
            "bidders": [
                {
                    "app_id": b.app_id,
                    "rho_old": finite(b.rho_old),
                    "rows": b.rows,
                    "pf_gpus": b.pf_gpus,
                    "pf_rho": finite(b.pf_rho),
                    "c": b.c,
                    "hidden_payment": b.hidden_payment,
                    "granted": b.granted,
                    "winner": b.granted > 0,
                }
                for b in self.bidders
            ],
            "leftover": dict(sorted(self.leftover.items())),
            "leftover_granted": dict(sorted(self.leftover_granted.items())),
        }


def auction_record(
    outcome: RoundOutcome, bids: Mapping[str, Bid], *, at: float, solve_seconds: float
) -> AuctionRecord:
    """The record of one decided round: ``outcome`` as the policy returned it, ``bids`` the
    tables that answered the call.

    >>> from arbiter.auction import Bid, partial_allocation
    >>> from arbiter.rounds import Lease, RoundOutcome
    >>> b = Bid("a", {frozenset(): float("inf"), frozenset({"g0"}): 2.0})
    >>> r = partial_allocation([b], frozenset({"g0", "g1"}))
    >>> lease = Lease("a", frozenset({"g0"}), 0.0, 60.0, 1)
    >>> rec = auction_record(RoundOutcome(1, frozenset({"g0", "g1"}), ("a",), r, (lease,)),
    ...                      {"a": b}, at=5.0, solve_seconds=0.01)
    >>> [(x.app_id, x.rows, x.pf_gpus, x.granted, x.c) for x in rec.bidders]
    [('a', 2, 1, 1, 1.0)]
    """
    result = outcome.result
    granted: dict[str, int] = {}
    leftover_granted: dict[str, int] = {}
    participants = set(outcome.participants)
    for lease in outcome.granted:
        granted[lease.app_id] = granted.get(lease.app_id, 0) + len(lease.gpus)
        if lease.source == "leftover" and lease.app_id not in participants:
            leftover_granted[lease.app_id] = leftover_granted.get(lease.app_id, 0) + len(lease.gpus)
    bidders = []
    for app_id in outcome.participants:
        bid = bids.get(app_id)
        bidders.append(
            BidderRecord(
                app_id=app_id,
                rho_old=bid.rows.get(frozenset(), math.inf) if bid is not None else math.inf,
                rows=len(bid.rows) if bid is not None else 0,
                pf_gpus=len(result.pf_allocation.get(app_id, frozenset())),
                pf_rho=result.pf_rho.get(app_id, math.inf),
                c=result.c.get(app_id, 1.0),
                granted=granted.get(app_id, 0) - leftover_granted.get(app_id, 0),
            )
        )
    return AuctionRecord(
        round=outcome.round,
        at=at,
        offered=len(outcome.offered),
        bidders=tuple(bidders),
        leftover=dict(result.leftover),
        leftover_granted=leftover_granted,
        solve_seconds=solve_seconds,
    )


@dataclass(frozen=True)
class RhoSample:
    at: float
    rho: float
    gpus: int


@dataclass(frozen=True)
class ShareSample:
    at: float
    epoch: int
    active_jobs: int  # |J|
    vcores: float  # the 1-over-n share R/|J|
    memory_mb: float


@dataclass(frozen=True)
class PlanSwitchRecord:
    """One plan switch of a registered query (module docstring)."""

    at: float  # the arbiter's clock when it was reported
    job_id: str
    query_name: str
    user: str
    at_s: float  # seconds since the query started, as the replanner measured them
    from_plan: str
    to_plan: str
    vcores: float  # the share the new plan was chosen for
    memory_mb: float
    cancelled: tuple[str, ...]
    reused: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "at": self.at,
            "job_id": self.job_id,
            "query_name": self.query_name,
            "user": self.user,
            "at_s": self.at_s,
            "from_plan": self.from_plan,
            "to_plan": self.to_plan,
            "vcores": self.vcores,
            "memory_mb": self.memory_mb,
            "cancelled": list(self.cancelled),
            "reused": list(self.reused),
        }


class History:
    """The ring buffers (module docstring); thread-safe, every method O(record size)."""

    def __init__(
        self,
        *,
        auctions: int = 200,
        rho_samples: int = 180,
        max_apps: int = 256,
        shares: int = 360,
        plan_switches: int = 200,
    ) -> None:
        for name, n in (
            ("auctions", auctions),
            ("rho_samples", rho_samples),
            ("max_apps", max_apps),
            ("shares", shares),
            ("plan_switches", plan_switches),
        ):
            if n < 1:
                raise ValueError(f"History {name} must be >= 1, got {n}")
        self._lock = threading.Lock()
        self.auctions: deque[AuctionRecord] = deque(maxlen=auctions)
        self._rho_len = rho_samples
        self._max_apps = max_apps
        self.rho: OrderedDict[str, deque[RhoSample]] = OrderedDict()
        self.shares: deque[ShareSample] = deque(maxlen=shares)
        self.plan_switches: deque[PlanSwitchRecord] = deque(maxlen=plan_switches)

    def add_auction(self, record: AuctionRecord) -> None:
        with self._lock:
            self.auctions.append(record)

    def add_rho(self, at: float, samples: Iterable[tuple[str, float, int]]) -> None:
        """One sampling instant: ``(app_id, ρ_current, GPUs held)`` for each app."""
        with self._lock:
            for app_id, rho, gpus in samples:
                ring = self.rho.get(app_id)
                if ring is None:
                    ring = self.rho[app_id] = deque(maxlen=self._rho_len)
                self.rho.move_to_end(app_id)
                ring.append(RhoSample(at, rho, gpus))
            while len(self.rho) > self._max_apps:
                self.rho.popitem(last=False)

    def add_share(self, sample: ShareSample) -> bool:
        """Keep ``sample`` if the share epoch moved since the last one; returns whether."""
        with self._lock:
            if self.shares and self.shares[-1].epoch == sample.epoch:
                return False
            self.shares.append(sample)
            return True

    def add_plan_switch(self, record: PlanSwitchRecord) -> None:
        with self._lock:
            self.plan_switches.append(record)

    def to_json(self, auctions: int | None = None) -> dict[str, object]:
        """Everything kept (``auctions``: only that many of the newest rounds)."""
        with self._lock:
            newest = list(reversed(self.auctions))[:auctions]
            return {
                "auctions": [a.to_json() for a in newest],  # newest first
                "rho": {
                    app: [[s.at, finite(s.rho), s.gpus] for s in ring]
                    for app, ring in self.rho.items()
                },
                "shares": [
                    {
                        "at": s.at,
                        "epoch": s.epoch,
                        "active_jobs": s.active_jobs,
                        "vcores": s.vcores,
                        "memory_mb": s.memory_mb,
                    }
                    for s in self.shares
                ],
                "plan_switches": [r.to_json() for r in reversed(self.plan_switches)],
            }
