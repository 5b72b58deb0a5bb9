"""``themis``: round-by-round partial-allocation auctions over leases for apps (Themis §3.3-3.4,
§4.3; thesis Pseudocode 3; spec B.5-B.7), one policy for the live arbiter and the simulator.

Themis is a *two-phase* policy (``two_phase = True``). A driver owns the lease book
(:class:`~arbiter.rounds.ArbiterState`; the live arbiter's journal, the simulator's
:class:`~arbiter.sim.agents.SimulatedAgents`) and passes it in ``Snapshot.book`` with what the
Agents said: ``rho`` (each app's ρ_current), ``demand`` (GPUs each app can use in all) and,
answering a call, ``bids``. Each ``decide`` is one of two steps of ROUNDBYROUNDAUCTIONS:

1. **Call for bids** (no call pending): if GPUs are free (of ``Snapshot.offerable``, the GPUs
   the driver lets out: not drained) and some app has room, the top (1 − f) of *every* active
   app by ρ_current is called (``filter_participants``; ties to the app that bid least
   recently, then the id). The decision carries the call (:class:`CallForBids`: round, GPUs,
   participants, the other apps with room) and the call in ``policy_state``; nothing is
   granted. The driver sends the offer and collects one bid per participant: the simulator at
   once from its simulated Agents, the live arbiter until the bid deadline or every bid is in.
2. **Auction** (a call pending): the bids that came (``Snapshot.bids``, trimmed to the called
   GPUs still free) go to the PA auction with hidden payments and leftover allocation
   (:func:`arbiter.rounds.run_round`); ``Decision.outcome`` carries the granted leases and the
   payments, which the driver binds to its lease book (the live arbiter only if every GPU is
   still free, else it drops the round and calls again). No bid at all closes the round empty.

``filter_over="all"`` (default) ranks every active app, as the paper sorts all of A; an app
that cannot use more GPUs then answers with its empty row only. ``filter_over="wanting"`` ranks
only apps with room (the ablation). ``rho_old`` is how Agents price the empty row while holding
nothing (Gap 2, spec B.5; the Agents apply it, the knob says which rule a run uses):
``"one-lease"``, the default, is "nothing for one more lease, then the ideal allocation", finite
and growing while the app waits; ``"infinite"`` keeps ρ = ∞ and the auction's lexicographic
rule (serve as many apps with finite ρ as possible, then Π 1/ρ). Why the default changed: under
the lexicographic rule an audit of 2,748 contested rounds of a 12-hour Philly run found the
highest-ρ bidder lost every one, the served bidders were always the lowest-ρ ones, and the hidden
payment c_i never went below 1 (every starving app has ρ = ∞, so the PF objective counts apps
instead of weighing ρ, and ∞ apps fall out of the payment market). With a finite ρ_old every
bidder is in the Cole-Gkatzelis-Goel market and pays its hidden payment
(``tests/unit/test_themis_apps.py`` shows both).

Leftover seeds are ``crc32("<seed>:<round>")``, the same in both drivers.

``batch_s`` (simulator only; default 0, exact) is the simulator's batch window for Themis
(:mod:`arbiter.sim.engine` module docstring): lease ends, arrivals and completions within
``batch_s`` seconds of the first are decided together, the simulator's counterpart of the live
arbiter's batch window. :meth:`Themis.forget` drops the bid rounds of apps that are gone (the
simulator calls it every decision, so the state stays the size of the active apps).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import ClassVar

from arbiter.auction import PAYMENT_GAP, Bid, Rounding
from arbiter.policies.base import CallForBids, Decision, Snapshot
from arbiter.rounds import (
    DEFAULT_FAIRNESS_KNOB,
    DEFAULT_LEASE_SECONDS,
    ArbiterState,
    filter_participants,
    free_gpus,
    holdings_at,
    run_round,
)

__all__ = ["FILTER_RULES", "RHO_OLD_RULES", "Themis", "ThemisState"]

RHO_OLD_RULES = ("one-lease", "infinite")
FILTER_RULES = ("all", "wanting")


@dataclass(frozen=True)
class ThemisState:
    call: CallForBids | None = None  # the call whose bids the next decision auctions
    last_bid: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Themis:
    name: str = "themis"
    round_s: float | None = None
    fairness_knob: float = DEFAULT_FAIRNESS_KNOB
    lease_s: float = DEFAULT_LEASE_SECONDS
    rounding: Rounding = Rounding.LEASE_TIME
    max_rows: int = 32
    seed: int = 0
    rho_old: str = "one-lease"
    filter_over: str = "all"
    payment_gap: float = PAYMENT_GAP
    time_budget: float | None = None
    batch_s: float = 0.0  # simulator only: batch window of decisions (module docstring)
    two_phase: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.rho_old not in RHO_OLD_RULES:
            raise ValueError(f"rho_old must be one of {', '.join(RHO_OLD_RULES)}, "
                             f"got {self.rho_old!r}")  # fmt: skip
        if self.filter_over not in FILTER_RULES:
            raise ValueError(f"filter_over must be one of {', '.join(FILTER_RULES)}, "
                             f"got {self.filter_over!r}")  # fmt: skip
        if not 0.0 <= self.fairness_knob <= 1.0:
            raise ValueError(f"fairness_knob f must be in [0, 1], got {self.fairness_knob}")
        if not self.lease_s > 0:
            raise ValueError(f"lease_s must be positive, got {self.lease_s}")
        if not (self.batch_s >= 0 and math.isfinite(self.batch_s)):
            raise ValueError(f"batch_s must be >= 0 and finite, got {self.batch_s}")
        object.__setattr__(self, "rounding", Rounding(self.rounding))

    @staticmethod
    def forget(state: ThemisState | None, keep: Collection[str]) -> ThemisState | None:
        """``state`` without the bid rounds of apps not in ``keep`` (apps that are gone: a
        driver calls this so the state does not grow with every app a long run has seen)."""
        if state is None or all(a in keep for a in state.last_bid):
            return state
        kept = {a: r for a, r in state.last_bid.items() if a in keep}
        return replace(state, last_bid=MappingProxyType(kept))

    def decide(self, snapshot: Snapshot[ThemisState]) -> Decision[ThemisState]:
        now = snapshot.now
        st: ThemisState = snapshot.policy_state or ThemisState()
        book = snapshot.book or ArbiterState(snapshot.cluster.gpu_ids)
        live, committed = holdings_at(book, now)
        apps = sorted(set(snapshot.demand) | {j.app_id for j in snapshot.jobs})
        demand = {a: snapshot.demand.get(a, 0) for a in apps}
        for j in snapshot.jobs:
            if j.app_id not in snapshot.demand:
                demand[j.app_id] += j.gang
        room = {a: d - len(committed.get(a, ())) for a, d in demand.items()}
        wanting = {a: r for a, r in room.items() if r > 0}
        holding = {a: live.get(a, frozenset()) for a in apps}
        if st.call is not None:
            return self._auction(snapshot, st, book, wanting, holding)
        offerable = free_gpus(book, now)
        if snapshot.offerable is not None:
            offerable &= snapshot.offerable
        if not offerable or not wanting:
            return Decision(holding, st)
        ranked = apps if self.filter_over == "all" else sorted(wanting)
        rho = {a: snapshot.rho.get(a, float("inf")) for a in ranked}
        participants = filter_participants(
            rho, self.fairness_knob, tie_break={a: st.last_bid.get(a, -1) for a in ranked}
        )
        call = CallForBids(
            book.round + 1, offerable, participants,
            tuple(a for a in sorted(wanting) if a not in participants), self.lease_s,
        )  # fmt: skip
        return Decision(holding, ThemisState(call, st.last_bid), call=call)

    def _auction(self, snapshot: Snapshot[ThemisState], st: ThemisState, book: ArbiterState,
                 wanting: Mapping[str, int],
                 holding: Mapping[str, frozenset[str]]) -> Decision[ThemisState]:  # fmt: skip
        call = st.call
        assert call is not None
        now = snapshot.now
        last_bid = dict(st.last_bid)
        last_bid.update((a, call.round) for a in call.participants)
        closed = ThemisState(None, MappingProxyType(last_bid))
        offered = call.gpus & free_gpus(book, now)
        if snapshot.offerable is not None:
            offered &= snapshot.offerable
        bidders = tuple(a for a in call.participants if a in snapshot.bids)
        if not offered or not bidders:
            return Decision(holding, closed, closed_round=call.round)
        bids = [Bid(a, {k: v for k, v in snapshot.bids[a].rows.items() if k <= offered})
                for a in bidders]  # fmt: skip
        _, outcome = run_round(
            replace(book, round=call.round - 1),  # run_round numbers it call.round
            offered=offered,
            bids=bids,
            participants=bidders,
            non_participants=[a for a in call.others if a in wanting],
            now=now,
            seed=zlib.crc32(f"{self.seed}:{call.round}".encode()),
            lease_seconds=self.lease_s,
            rounding=self.rounding,
            room=dict(wanting),
            payment_gap=self.payment_gap,
            time_budget=self.time_budget,
        )
        granted: dict[str, set[str]] = {a: set(g) for a, g in holding.items()}
        for lease in outcome.granted:
            if lease.start <= now:
                granted.setdefault(lease.app_id, set()).update(lease.gpus)
        alloc = {a: frozenset(g) for a, g in granted.items()}
        return Decision(alloc, closed, outcome=outcome, closed_round=call.round)
