"""Any scheduling policy in the live arbiter: a policy decision becomes leases.

Themis runs live as an auction with Agents (:mod:`arbiter.core`); every other policy of
:mod:`arbiter.policies` (fifo, las, yarn-cs, tiresias, afs, gandiva, srtf, optimus, synergy)
is a pure ``decide(Snapshot) -> Decision``. This module is the functional core that turns such
a decision into the arbiter's own currency, leases, so that the same revocation, expiry,
journal and invariant machinery serves every policy:

* **Jobs.** Each connected app is one job of gang ``max_gpu_demand`` (its declared jobs' largest
  gang when it registered jobs), arriving when it registered. What the live arbiter knows of it
  goes into the :class:`~arbiter.policies.base.JobView`: the GPUs it holds, the GPU-seconds it
  attained (LAS, Tiresias), when it first held GPUs, and, from its latest progress report,
  ``remaining_work = iters_remaining x iter_time_s`` with ``ideal_rate = 1`` (the remaining
  time at its current speed, for SRTF/Optimus/AFS-L). ``perf`` is None: policies fall back to
  their placement-blind rules (each module documents how). A gang cut short by a lost node is
  shown holding nothing (it cannot run; the policy places it anew, keeping its GPUs if it
  likes), except to policies that hold containers one by one (``holds_partial_gangs``, yarn-cs).
* **Grants.** GPUs the decision gives an app that it does not hold become one new lease of
  ``lease_seconds`` (source ``policy``). A GPU still held by another app until the end of its
  grace period is granted from that moment (a lease that starts later), never before: no GPU is
  ever in two live leases.
* **Keeps.** GPUs an app holds and keeps are renewed: the lease is extended to
  ``now + lease_seconds`` (a policy decision is the renewal; the AM need not call RenewLease).
* **Revocations.** GPUs an app holds that the decision takes away are cut out of its lease,
  which ends ``grace`` seconds from now (the AM is told, to checkpoint), like a drained node.
* A decision naming an unknown job, an unknown GPU, a GPU twice or more GPUs than a gang is
  rejected whole (:func:`arbiter.policies.base.check_decision`) and nothing changes.

Decisions made here: the policy's ``policy_state`` and the attained-service counters are kept
in memory only (not journaled): after a restart a policy starts from the leases it finds and
counts attained service from then on (Tiresias's queues rebuild themselves as service accrues).
Leases survive the restart, as with Themis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from arbiter.rounds import Lease, LeaseSource

__all__ = ["LeasePlan", "plan_leases"]


@dataclass(frozen=True)
class LeasePlan:
    leases: tuple[Lease, ...]  # the new lease set
    granted: dict[str, tuple[Lease, ...]]  # app -> its new or renewed leases (to announce)
    revoked: tuple[Lease, ...]  # the cut parts (end = now + grace), to announce as revocations


def plan_leases(
    leases: tuple[Lease, ...],
    allocation: Mapping[str, frozenset[str]],
    *,
    apps: frozenset[str],
    now: float,
    lease_seconds: float,
    grace: float,
    round_no: int,
) -> LeasePlan:
    """The leases after applying ``allocation`` (app -> GPUs it should hold) at ``now``.

    Only the leases of ``apps`` (the apps the policy decided for) are touched; an app of
    ``apps`` missing from ``allocation`` should hold nothing.
    """
    end = now + lease_seconds
    kept: list[Lease] = []
    revoked: list[Lease] = []
    granted: dict[str, list[Lease]] = {}
    busy_until: dict[str, float] = {}  # GPU -> when its current holder lets go of it
    holds: dict[str, set[str]] = {}
    for lease in leases:
        if lease.end <= now:
            continue  # expired: dropped
        if lease.app_id not in apps:
            kept.append(lease)
            for g in lease.gpus:
                busy_until[g] = max(busy_until.get(g, now), lease.end)
            continue
        target = allocation.get(lease.app_id, frozenset())
        stay = lease.gpus & target
        gone = lease.gpus - target
        if stay:
            if lease.start <= now:  # live: renew it to a full lease from now
                renewed = replace(lease, gpus=stay, end=max(lease.end, end), round=round_no)
                granted.setdefault(lease.app_id, []).append(renewed)
            else:  # reserved for later: keep as is
                renewed = replace(lease, gpus=stay)
            kept.append(renewed)
            holds.setdefault(lease.app_id, set()).update(stay)
            for g in stay:
                busy_until[g] = max(busy_until.get(g, now), renewed.end)
        if gone:
            if lease.start >= now:  # not started yet: just withdrawn
                continue
            cut = replace(lease, gpus=gone, end=min(lease.end, now + grace))
            if cut.end > now:
                kept.append(cut)
                revoked.append(cut)
                for g in gone:
                    busy_until[g] = max(busy_until.get(g, now), cut.end)
    for app in sorted(allocation):
        if app not in apps:
            continue
        new = allocation[app] - holds.get(app, set())
        if not new:
            continue
        by_start: dict[float, set[str]] = {}
        for g in new:
            by_start.setdefault(busy_until.get(g, now), set()).add(g)
        for start, gpus in sorted(by_start.items()):
            lease = Lease(
                app, frozenset(gpus), start, start + lease_seconds, round_no, LeaseSource.POLICY
            )
            kept.append(lease)
            granted.setdefault(app, []).append(lease)
    return LeasePlan(tuple(kept), {a: tuple(v) for a, v in granted.items()}, tuple(revoked))
