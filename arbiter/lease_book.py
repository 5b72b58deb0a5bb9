"""The lease book: who holds which GPU until when, journaled, with the service each app received.

The second part of the live arbiter (Themis §4.3: GPUs are granted as leases; a lease ends at
its term and its GPUs go back to auction). Every change goes through :meth:`LeaseBook.commit`:
the invariants are checked (no GPU in two live leases, spec B.7) and the new state is written to
the journal before it is served. The book also keeps, for the non-auction policies, the
GPU-seconds each app attained (LAS, Tiresias) and when it first ran; which machines are drained;
and when GPUs were first freed since the last offer (the offer batch window).

Operations that end or cut leases return the :class:`~arbiter.messages.Revocation` messages to
send, addressed by app; the caller delivers them. Not thread-safe on its own:
:class:`arbiter.core.ArbiterCore` serialises every call under its lock, and passes the time in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from arbiter.auction import Bid
from arbiter.cluster import Cluster
from arbiter.journal import Journal, lease_id
from arbiter.messages import Code, RequestError, Revocation
from arbiter.rounds import ArbiterState, Lease, check_invariants, expire_leases, free_gpus

__all__ = ["LeaseBook"]


def _service(lease: Lease, since: float, now: float) -> float:
    """GPU-seconds ``lease`` gave its app between ``since`` and ``now``."""
    return len(lease.gpus) * max(0.0, min(lease.end, now) - max(lease.start, since))


class LeaseBook:
    """The journaled :class:`~arbiter.rounds.ArbiterState` and what is derived from it."""

    def __init__(
        self,
        state: ArbiterState,
        journal: Journal,
        *,
        now: float,
        drained: Iterable[str] = (),
    ) -> None:
        self.state = state
        self.journal = journal
        self.drained: set[str] = set(drained)  # machine names no longer offered (journaled)
        self.first_freed_at: float | None = None  # GPUs pooled since (offer batch window)
        self.attained: dict[str, float] = {}  # GPU-seconds received per app (see _accrue)
        self.first_start: dict[str, float] = {}
        self._accrued_at = now
        # the leases by app, and the lease tuple it was built from: one attribute, so that a
        # reader without the lock (a heartbeat's ρ, ArbiterCore.beat) sees a matching pair
        self._index: tuple[tuple[Lease, ...] | None, dict[str, list[Lease]]] = (None, {})

    # ------------------------------------------------------------------ the one write path

    def commit(
        self,
        state: ArbiterState,
        bids: Iterable[Bid] = (),
        *,
        now: float,
        drained: Iterable[str] | None = None,
    ) -> None:
        """Check ``state``'s invariants, journal it (with the round's ``bids`` and, when
        given, the ``drained`` machines), serve it. Nothing in memory changes unless the
        journal took it (a full disk raises and leaves the book as it was)."""
        check_invariants(state)
        drained = None if drained is None else set(drained)
        self.journal.commit_round(state, bids, drained=drained)
        if state.leases is not self.state.leases:
            self._accrue(now)
        self.state = state
        if drained is not None:
            self.drained = drained

    def mark_freed(self, now: float) -> None:
        if self.first_freed_at is None:
            self.first_freed_at = now

    def _accrue(self, now: float) -> None:
        """Add the GPU-seconds every lease gave its app since the last accrual to
        ``attained``; called before the lease set changes (cuts, renewals, expiries)."""
        since = self._accrued_at
        if now <= since:
            return
        for x in self.state.leases:
            used = _service(x, since, now)
            if used > 0:
                self.attained[x.app_id] = self.attained.get(x.app_id, 0.0) + used
        self._accrued_at = now

    # ------------------------------------------------------------------ reading

    def _lease_index(self) -> dict[str, list[Lease]]:
        leases = self.state.leases
        built_from, index = self._index
        if built_from is not leases:
            index = {}
            for lease in leases:
                index.setdefault(lease.app_id, []).append(lease)
            self._index = (leases, index)
        return index

    def held(self, app_id: str, t: float) -> frozenset[str]:
        """GPUs ``app_id`` holds at ``t`` (through a per-app index of the leases, which is
        rebuilt whenever the lease tuple changes: heartbeats ask for it a thousand times a
        second under load)."""
        mine = self._lease_index().get(app_id, ())
        return frozenset().union(*(x.gpus for x in mine if x.live_at(t)))

    def holdings(self, t: float) -> dict[str, frozenset[str]]:
        """GPUs each app holds at ``t``, in one pass over the leases (not one per app)."""
        out: dict[str, set[str]] = {}
        for lease in self.state.leases:
            if lease.live_at(t):
                out.setdefault(lease.app_id, set()).update(lease.gpus)
        return {a: frozenset(g) for a, g in out.items()}

    def attained_by(self, app_id: str, now: float) -> float:
        """GPU-seconds ``app_id`` received until ``now`` (accrued plus its live leases)."""
        since = self._accrued_at
        live = sum(_service(x, since, now) for x in self._lease_index().get(app_id, ()))
        return self.attained.get(app_id, 0.0) + live

    def offerable(self, now: float, cluster: Cluster) -> frozenset[str]:
        """Free GPUs at ``now`` outside drained machines."""
        return frozenset(
            g for g in free_gpus(self.state, now) if cluster.gpu(g).machine not in self.drained
        )

    def find(self, app_id: str, lid: str) -> Lease:
        for lease in self.state.leases:
            if lease_id(lease) == lid:
                if lease.app_id != app_id:
                    raise RequestError(Code.PERMISSION_DENIED, f"lease {lid} is not {app_id}'s")
                return lease
        raise RequestError(Code.NOT_FOUND, f"no live lease {lid}")

    # ------------------------------------------------------------------ changes

    def expire(self, now: float) -> None:
        """End the leases past their term; their GPUs count as freed."""
        state, freed = expire_leases(self.state, now)
        if freed or state is not self.state:
            self.commit(state, now=now)
            self.mark_freed(now)

    def release(self, app_id: str, lid: str, gpus: frozenset[str], now: float) -> frozenset[str]:
        """``app_id`` gives back ``gpus`` of lease ``lid`` (all of it when empty)."""
        lease = self.find(app_id, lid)
        gpus = gpus or lease.gpus
        if not gpus <= lease.gpus:
            raise RequestError(
                Code.INVALID_ARGUMENT,
                f"gpu_ids not in lease {lid}: {sorted(gpus - lease.gpus)}",
            )
        rest = lease.gpus - gpus
        leases = [x for x in self.state.leases if x is not lease]
        if rest:  # a reserved (future) leftover lease is cut the same way
            leases.append(replace(lease, gpus=rest))
        self.commit(replace(self.state, leases=tuple(leases)), now=now)
        self.mark_freed(now)
        return gpus

    def renew(
        self, app_id: str, lid: str, *, now: float, cluster: Cluster, waiting: int, seconds: float
    ) -> Lease:
        """Extend lease ``lid`` to ``seconds`` from ``now`` (never further: renewals do not
        stack) while no other app is ``waiting`` for GPUs and none of its GPUs is on a drained
        machine."""
        lease = self.find(app_id, lid)
        drained = sorted({cluster.gpu(g).machine for g in lease.gpus} & self.drained)
        if drained:
            raise RequestError(
                Code.FAILED_PRECONDITION,
                f"lease {lid} holds GPUs on drained machine(s) {', '.join(drained)}: it ends "
                "at its term",
            )
        if waiting:
            raise RequestError(
                Code.FAILED_PRECONDITION,
                f"{waiting} other app(s) wait for GPUs; the lease ends at its term "
                "and its GPUs go back to auction",
            )
        # one lease length from now, never more: renewals do not stack
        longer = replace(lease, end=max(lease.end, now + seconds))
        taken = [x for x in self.state.leases if x is not lease and x.gpus & lease.gpus
                 and x.start < longer.end and x.end > lease.end]  # fmt: skip
        if taken:  # a later lease (a leftover reserved from this one's end) has the GPUs
            first = min(taken, key=lambda x: x.start)
            raise RequestError(
                Code.FAILED_PRECONDITION,
                f"lease {lid}'s GPUs are reserved for {first.app_id} from its end on: it ends "
                "at its term",
            )
        leases = tuple(longer if x is lease else x for x in self.state.leases)
        self.commit(replace(self.state, leases=leases), now=now)
        return longer

    def end_app(self, app_id: str, now: float) -> frozenset[str]:
        """End every lease of ``app_id`` now; returns the GPUs it held."""
        freed = self.held(app_id, now)
        kept = tuple(x for x in self.state.leases if x.app_id != app_id)
        if len(kept) != len(self.state.leases):
            self.commit(replace(self.state, leases=kept), now=now)
            self.mark_freed(now)
        return freed

    def undrain(self, machine: str, now: float) -> bool:
        """Offer ``machine`` again; returns whether it was drained."""
        if machine not in self.drained:
            return False
        self.drained.discard(machine)
        self.mark_freed(now)
        return True

    def drain(
        self, machine: str, grace: float, *, now: float, cluster: Cluster
    ) -> list[Revocation]:
        """Stop offering ``machine``; the part of each lease on it ends after ``grace``
        seconds. Returns the revocations to send (their ``lease`` is the cut part)."""
        revoked: list[Revocation] = []
        leases: list[Lease] = []
        for lease in self.state.leases:
            on_machine = frozenset(g for g in lease.gpus if cluster.gpu(g).machine == machine)
            if on_machine and lease.end > now + grace:
                # Only the drained machine's GPUs end early; the rest of the lease stays.
                cut = replace(lease, gpus=on_machine, end=max(lease.start + 1e-6, now + grace))
                rest = (replace(lease, gpus=lease.gpus - on_machine)
                        if lease.gpus - on_machine else None)  # fmt: skip
                revoked.append(Revocation(cut, grace, f"machine {machine} drained", lease, rest))
                leases.append(cut)
                if rest is not None:
                    leases.append(rest)
            else:
                leases.append(lease)
        self.commit(
            replace(self.state, leases=tuple(leases)), now=now, drained=self.drained | {machine}
        )
        return revoked

    def resize(self, cluster: Cluster, removed: frozenset[str], now: float) -> list[Revocation]:
        """Serve ``cluster``'s GPUs from now on: leases on ``removed`` GPUs (a node lost or
        decommissioned) end at once. Returns the revocations to send."""
        revoked: list[Revocation] = []
        leases: list[Lease] = []
        for lease in self.state.leases:
            gone = lease.gpus & removed
            if not gone:
                leases.append(lease)
                continue
            cut = replace(lease, gpus=gone, end=max(lease.start + 1e-6, now))
            rest = replace(lease, gpus=lease.gpus - gone) if lease.gpus - gone else None
            revoked.append(Revocation(cut, 0.0, "node lost", lease, rest))
            if rest is not None:
                leases.append(rest)
        self.commit(
            replace(self.state, gpus=cluster.gpu_ids, leases=tuple(leases)),
            now=now,
            drained=self.drained & {m.name for m in cluster.machines},
        )
        return revoked
