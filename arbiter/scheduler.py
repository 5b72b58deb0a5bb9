"""The one scheduling loop: the configured policy decides, the lease book binds.

The fourth part of the live arbiter. Each tick runs one policy through the same two cycles
(the Kubernetes scheduler framework's decide and bind, Themis's semi-optimistic architecture of
§4.3, T:1058-1070):

* a **two-phase** policy (Themis) first *calls for bids* (steps 1-2: rank the connected apps
  by ρ_current, offer the free GPUs to the worst 1 - f of them); when every participant has
  answered or the deadline passed, the policy's auction step *decides* on a snapshot, outside
  the arbiter's lock and possibly in another process (:mod:`arbiter.decider`), and the outcome
  is *bound* (step 5) only if every GPU it grants is still free, else the round is dropped and
  the GPUs are offered again;
* a **one-phase** policy (Tiresias, AFS, Gandiva, ...) decides an allocation when due and
  :mod:`arbiter.live_policy` turns it into leases and revocations.

The loop owns the policy object (rebuilt when its name or knobs change), its state between
rounds, and the open round. Everything else it reads from the app sessions
(:mod:`arbiter.sessions`) and the lease book (:mod:`arbiter.lease_book`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from arbiter.auction import Bid
from arbiter.cluster import Cluster
from arbiter.config import Config, parse_knobs
from arbiter.lease_book import LeaseBook
from arbiter.live_policy import plan_leases
from arbiter.messages import Allocation, Code, Offer, RequestError, Revocation
from arbiter.policies import make_policy
from arbiter.policies.base import Decision, JobView, Policy, check_decision
from arbiter.policies.base import Snapshot as PolicySnapshot
from arbiter.rounds import InvariantViolation, Lease, offer_due, rho_after_grant
from arbiter.sessions import AppSessions

__all__ = ["PendingRound", "SchedulerLoop", "Work", "policy_knobs"]

log = logging.getLogger("yarn_arbiter.core")


@dataclass
class PendingRound:
    """A call for bids awaiting answers (steps 2-3)."""

    round: int
    offered: frozenset[str]
    participants: tuple[str, ...]
    others: tuple[str, ...]
    deadline: float
    bids: dict[str, Bid] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    """A closed round to decide outside the lock: ``policy`` on ``snapshot``."""

    policy: Policy
    round: PendingRound
    snapshot: PolicySnapshot


def policy_knobs(config: Config) -> tuple[str, dict[str, object]]:
    """The configured policy's name and knobs (Themis also takes its knobs from the arbiter's
    own settings: f, lease, rounding, payment gap, time budget)."""
    name = config["arbiter.policy"]
    knobs: dict[str, object] = dict(parse_knobs(config["arbiter.policy.knobs"]))
    if name == "themis":
        knobs |= {
            "fairness_knob": config["arbiter.themis.fairness-knob"],
            "lease_s": config["arbiter.lease.seconds"],
            "rounding": config["arbiter.auction.rounding"],
            "payment_gap": config["arbiter.auction.payment-gap"],
            "time_budget": config["arbiter.auction.time-budget.seconds"] or None,
        }
    return name, knobs


class SchedulerLoop:
    """The policy, its state, and the open round; see the module docstring."""

    def __init__(self, sessions: AppSessions, book: LeaseBook) -> None:
        self.sessions = sessions
        self.book = book
        self.pending: PendingRound | None = None
        self.policy_state: object = None
        self._policy: Policy | None = None
        self._policy_key: tuple[str, str] | None = None
        self._policy_due = 0.0
        self._policy_members: frozenset[str] = frozenset()
        self._silent_due = -math.inf  # when silent Agents are next looked for

    # ------------------------------------------------------------------ the policy

    def configure(self, config: Config) -> Policy:
        """Build the configured policy, again (forgetting its state and the open round) when
        its name or knobs changed. Called when the configuration changes, never from
        :meth:`step`: building a policy may read files (Tiresias-Gittins' service
        distribution), which has no place in the scheduling loop."""
        name, knobs = policy_knobs(config)
        key = (name, repr(sorted(knobs.items())))
        if key != self._policy_key or self._policy is None:
            self._policy = make_policy(name, **knobs)
            self._policy_key, self.policy_state = key, None
            self.pending = None
            self._policy_due = 0.0
        return self._policy

    # ------------------------------------------------------------------ one tick

    def step(self, now: float, config: Config, cluster: Cluster) -> Work | None:
        """Under the lock: expire leases, drop silent Agents, then either run a one-phase
        policy, call for bids, or close the open round and return it to decide."""
        book = self.book
        book.expire(now)
        timeout = config["arbiter.heartbeat.timeout.seconds"]
        if now >= self._silent_due:  # a walk over every session: a tenth of the timeout apart
            self._silent_due = now + min(1.0, timeout / 10)
            for app_id in self.sessions.silent(now, timeout):
                book.end_app(app_id, now)
        policy = self._policy
        assert policy is not None, "configure() builds the policy before the first step"
        if not getattr(policy, "two_phase", False):
            self.pending = None
            self._policy_round(policy, now, config, cluster)
            return None
        if self.pending is None:
            self._call_for_bids(policy, now, config, cluster)
            return None
        p = self.pending
        if now < p.deadline and set(p.bids) != set(p.participants):
            return None
        self.pending = None
        book.first_freed_at = None
        return Work(policy, p, self.bidding_snapshot(now, cluster, p.bids))

    def undecided(self, now: float) -> None:
        """The decision of a closed round failed: forget the policy's state, offer again."""
        self.policy_state = None
        self.book.mark_freed(now)

    # ------------------------------------------------------------------ two-phase policies

    def rho_current(self, app_id: str, now: float, held: frozenset[str] | None = None) -> float:
        """ρ_current of ``app_id``: its latest report, else what its last bid table implies
        for the GPUs it holds (``held``, if already known), else ∞ when it holds nothing."""
        reports = self.sessions.rho_reports
        if app_id in reports:
            return reports[app_id]
        if held is None:
            held = self.book.held(app_id, now)
        if not held:
            return math.inf
        bid = self.book.state.last_bids.get(app_id)
        return rho_after_grant(bid, held) if bid is not None else 1.0

    def bidding_snapshot(
        self, now: float, cluster: Cluster, bids: Mapping[str, Bid] | None = None
    ) -> PolicySnapshot:
        """What a two-phase policy sees: the connected apps with their ρ_current (reported, or
        from their kept bid tables) and max demand, the lease book, the GPUs that may be
        offered (drained machines left out) and the bids answering the open call."""
        holdings = self.book.holdings(now)
        none: frozenset[str] = frozenset()
        members = self.sessions.members()
        apps = self.sessions.apps
        jobs = tuple(self._job_view(a, now, holdings.get(a, none)) for a in members)
        book = replace(self.book.state, last_bids=MappingProxyType({}))  # the policy keeps its own
        return PolicySnapshot(
            now, cluster, jobs, self.policy_state, book=book,
            rho={a: self.rho_current(a, now, holdings.get(a, none)) for a in members},
            demand={a: apps[a].max_gpu_demand for a in members},
            bids=dict(bids or {}), offerable=self.book.offerable(now, cluster),
        )  # fmt: skip

    def has_room(self, now: float) -> bool:
        """Whether some connected app holds less than its max demand."""
        held = self.book.holdings(now)
        none: frozenset[str] = frozenset()
        apps = self.sessions.apps
        return any(len(held.get(a, none)) < apps[a].max_gpu_demand for a in self.sessions.members())

    def _call_for_bids(self, policy: Policy, now: float, config: Config, cluster: Cluster) -> None:
        """Steps 1-2: when GPUs pooled past the batch window can be offered and some app has
        room, the policy picks the participants; each is sent the offer."""
        book = self.book
        if not book.offerable(now, cluster) or not self.has_room(now):
            return
        if book.first_freed_at is None:
            book.first_freed_at = now
        if not offer_due(book.first_freed_at, now, config["arbiter.offer.batch-window.seconds"]):
            return
        try:
            decision = policy.decide(self.bidding_snapshot(now, cluster))
        except Exception:  # a policy bug must not stop the loop: log it, nothing changes
            log.exception("policy %s could not call for bids; nothing changed", policy.name)
            return
        self.policy_state = decision.policy_state
        call = decision.call
        if call is None:
            return
        deadline = now + config["arbiter.bid.deadline.seconds"]
        self.pending = PendingRound(call.round, call.gpus, call.participants, call.others,
                                    deadline)  # fmt: skip
        offer = Offer(call.round, call.gpus, call.lease_s, deadline)
        for a in call.participants:
            self.sessions.send(a, offer)

    def submit_bid(self, app_id: str, round_no: int, bid: Bid, *, now: float, limit: int) -> None:
        """Step 3: validate and keep ``app_id``'s bid for the open round."""
        p = self.pending
        if p is None or p.round != round_no:
            raise RequestError(
                Code.FAILED_PRECONDITION,
                f"bid.round {round_no} is not the open round ({p.round if p else 'none open'})",
            )
        if app_id not in p.participants:
            raise RequestError(Code.PERMISSION_DENIED, f"{app_id} was not offered round {round_no}")
        if app_id in p.bids:
            raise RequestError(Code.ALREADY_EXISTS, f"{app_id} already bid in this round")
        if len(bid.rows) > limit:
            raise RequestError(
                Code.INVALID_ARGUMENT, f"bid.rows has {len(bid.rows)} rows, limit {limit}"
            )
        room = self.sessions.apps[app_id].max_gpu_demand - len(self.book.held(app_id, now))
        for key in bid.rows:
            stray = key - p.offered
            if stray:
                raise RequestError(
                    Code.INVALID_ARGUMENT,
                    f"bid.rows names GPUs not offered in round {round_no}: {sorted(stray)[:5]}",
                )
            if len(key) > room:
                raise RequestError(
                    Code.INVALID_ARGUMENT,
                    f"bid.rows asks for {len(key)} GPUs, above the app's room of {room}",
                )
        p.bids[app_id] = bid

    def bind(
        self, p: PendingRound, decision: Decision, now: float, cluster: Cluster | None = None
    ) -> None:
        """Step 5: commit the decided round's leases if every GPU is still free (else drop the
        round: its GPUs are offered again) and tell each winner its leases and payment. A GPU
        on a machine drained while the round was decided (``cluster`` says where each GPU is)
        is not granted: the rest of its lease is."""
        book = self.book
        self.policy_state = decision.policy_state
        outcome = decision.outcome
        if outcome is None:
            # Nobody answered: count the round, so that the next offer uses a fresh number.
            book.commit(replace(book.state, round=max(book.state.round, p.round)), now=now)
            return
        # An app that finished (finish_app) while the round was decided gets nothing: its GPUs
        # stay free, and the journal never holds a lease of an app it does not know.
        granted = tuple(x for x in outcome.granted if x.app_id in self.sessions.apps)
        if cluster is not None and book.drained:
            off = {g.id for g in cluster.gpus if g.machine in book.drained}
            kept = (replace(x, gpus=x.gpus - off) for x in granted)
            granted = tuple(x for x in kept if x.gpus)
        bids = [p.bids[a] for a in outcome.participants if a in self.sessions.apps]
        last_bids = dict(book.state.last_bids)
        last_bids.update((b.app_id, b) for b in bids)
        state = replace(
            book.state,
            leases=book.state.leases + granted,
            round=max(book.state.round, p.round),
            last_bids=MappingProxyType(last_bids),
        )
        try:
            book.commit(state, bids, now=now)
        except InvariantViolation:  # a GPU was leased meanwhile (release, drain): offer again
            log.warning("round %d dropped: its GPUs changed while it was decided", p.round)
            book.mark_freed(now)
            return
        if len(granted) != len(outcome.granted):
            book.mark_freed(now)  # the finished apps' share is offered again
        if outcome.result.budget_stops:
            log.info(
                "round %d: %d solves stopped at the time budget (%d bidders); the best "
                "allocation found was used",
                p.round,
                outcome.result.budget_stops,
                len(bids),
            )
        for b in bids:  # the arbiter keeps the table; ρ now comes from it
            self.sessions.rho_reports.pop(b.app_id, None)
        per_app: dict[str, list[Lease]] = {}
        for lease in granted:
            per_app.setdefault(lease.app_id, []).append(lease)
        for app_id, leases in per_app.items():
            payment = 1.0 - outcome.result.c.get(app_id, 1.0)
            self.sessions.send(app_id, Allocation(p.round, tuple(leases), payment))

    # ------------------------------------------------------------------ one-phase policies

    def _gang(self, app_id: str) -> int:
        app = self.sessions.apps[app_id]
        gangs = [int(j.get("gang_size") or 0) for j in app.jobs]  # type: ignore[call-overload]
        return min(max([g for g in gangs if g > 0], default=app.max_gpu_demand), app.max_gpu_demand)

    def _within_gang(self, app_id: str, held: frozenset[str], now: float) -> frozenset[str]:
        """``held`` cut to the app's gang: the GPUs whose leases end last (then by id)."""
        gang = self._gang(app_id)
        if len(held) <= gang:
            return held
        ends: dict[str, float] = {}
        for lease in self.book.state.leases:
            if lease.app_id == app_id and lease.live_at(now):
                for g in lease.gpus:
                    ends[g] = max(ends.get(g, now), lease.end)
        return frozenset(sorted(held, key=lambda g: (-ends.get(g, now), g))[:gang])

    def _job_view(self, app_id: str, now: float, held: frozenset[str]) -> JobView:
        app = self.sessions.apps[app_id]
        progress = self.sessions.progress.get(app_id)
        remaining = None
        if progress and progress.iter_time_s > 0:
            remaining = progress.iters_remaining * progress.iter_time_s
        return JobView(
            job_id=app_id,
            app_id=app_id,
            queue=app.queue,
            arrival_s=app.registered_at,
            gang=self._gang(app_id),
            held=held,
            attained_gpu_s=self.book.attained_by(app_id, now),
            first_start_s=self.book.first_start.get(app_id),
            remaining_work=remaining,
            ideal_rate=1.0 if remaining is not None else None,
        )

    def _policy_cluster(self, cluster: Cluster) -> Cluster:
        drained = self.book.drained
        if not drained:
            return cluster
        machines = tuple(m for m in cluster.machines if m.name not in drained)
        names = {m.name for m in machines}
        return Cluster(cluster.name, machines, tuple(g for g in cluster.gpus if g.machine in names))

    def _policy_round(self, policy: Policy, now: float, config: Config, cluster: Cluster) -> None:
        """Run the configured one-phase policy when due and apply its decision as leases
        (:mod:`arbiter.live_policy`)."""
        book, apps = self.book, self.sessions.apps
        members = frozenset(self.sessions.members())
        window = config["arbiter.offer.batch-window.seconds"]
        freed = book.first_freed_at is not None and offer_due(book.first_freed_at, now, window)
        if not (now >= self._policy_due or freed or members != self._policy_members):
            return
        cluster = self._policy_cluster(cluster)
        holdings = book.holdings(now)
        order = sorted(members, key=lambda a: (apps[a].registered_at, a))
        partial_ok = getattr(policy, "holds_partial_gangs", False)
        held = {a: holdings.get(a, frozenset()) & cluster.gpu_ids for a in order}
        if not partial_ok:  # a gang cut by a lost node cannot run: the policy places it anew
            held = {a: g if len(g) >= self._gang(a) else frozenset() for a, g in held.items()}
        # An app placed anew while GPUs it held before are in their grace period holds more
        # than its gang: the policy sees the gang it keeps (the GPUs held longest from now);
        # the others end with their grace as planned. Shown all, every decision that keeps
        # them would exceed the gang and be rejected, and the policy would stop deciding.
        held = {a: self._within_gang(a, g, now) for a, g in held.items()}
        jobs = tuple(self._job_view(a, now, held[a]) for a in order)
        # GPUs still leased to apps without a session look free to the policy; a grant of one
        # starts when that lease ends (plan_leases), so no GPU is ever in two live leases.
        snapshot = PolicySnapshot(now, cluster, jobs, self.policy_state)
        interval = config["arbiter.policy.interval.seconds"]
        try:
            decision = policy.decide(snapshot)
            check_decision(snapshot, decision)
        except Exception:  # a policy bug must not stop the loop: log it, nothing changes
            log.exception("policy %s failed; nothing changed", policy.name)
            self._policy_due = now + interval
            return
        allocation = {a: frozenset(g) for a, g in decision.allocation.items() if a in members}
        plan = plan_leases(
            book.state.leases,
            allocation,
            apps=members,
            now=now,
            lease_seconds=config["arbiter.lease.seconds"],
            grace=config["arbiter.revocation.grace.seconds"],
            round_no=book.state.round + 1,
        )
        book.commit(replace(book.state, leases=plan.leases, round=book.state.round + 1), now=now)
        self.policy_state = decision.policy_state
        self._policy_members = members
        book.first_freed_at = None
        due = now + (policy.round_s or interval)
        if decision.wake_at is not None and decision.wake_at > now:
            due = min(due, decision.wake_at)
        self._policy_due = due
        for lease in plan.revoked:
            self.sessions.send(
                lease.app_id, Revocation(lease, max(0.0, lease.end - now), policy.name)
            )
        for app_id, leases in plan.granted.items():
            book.first_start.setdefault(app_id, min(x.start for x in leases))
            self.sessions.send(app_id, Allocation(book.state.round, leases, 0.0))
