"""What keeps a long Themis replay's cost per decision flat (README "Speed"): the leftover draw
of :func:`arbiter.rounds.run_round` keeps its candidate pool instead of rescanning every app
per GPU, run_round checks only the leases it grants, bidders share the spread candidate sets of
an offer, and the simulator forgets the bid tables and bid rounds of apps that are gone. Each
must leave decisions exactly as they were; the reference replays
(``test_themis_replay_reference.py``) pin whole runs, these pin the parts."""

from __future__ import annotations

import random
from collections import defaultdict
from types import MappingProxyType

import pytest
from support.sim import random_trace

from arbiter.auction import Bid, partial_allocation
from arbiter.bids import candidate_sets
from arbiter.cluster import load_cluster, shorthand_cluster
from arbiter.policies import make_policy
from arbiter.policies.themis import Themis, ThemisState
from arbiter.rounds import (
    ArbiterState,
    InvariantViolation,
    Lease,
    LeaseSource,
    check_invariants,
    run_round,
)
from arbiter.sim.apps import group_into_apps
from arbiter.sim.engine import simulate


def _naive_leftover(offered, bids, participants, others, now, seed, lease_s, room):
    """The leftover draw as first written: the pool rebuilt from every app whenever an app's
    room runs out."""
    result = partial_allocation(bids, offered)
    end = now + lease_s
    free_from = dict.fromkeys(result.leftover, now)
    granted = []
    for app_id, gpus in result.allocation.items():
        held_until = min(end, now + result.lease_fraction[app_id] * lease_s)
        if gpus and held_until > now:
            granted.append((app_id, len(gpus)))
        for g in gpus & result.leftover.keys():
            free_from[g] = held_until
    rng = random.Random(seed)
    left = dict(room)
    for app_id, n in granted:
        left[app_id] -= n

    def candidates():
        return [a for a in others if left.get(a, 0) > 0] or [
            a for a in participants if left.get(a, 0) > 0
        ]

    pool = candidates()
    by_recipient = defaultdict(set)
    for g in sorted(free_from):
        if free_from[g] >= end:
            continue
        if pool:
            app_id = rng.choice(pool)
            left[app_id] -= 1
            if left[app_id] <= 0:
                pool = candidates()
            by_recipient[(app_id, free_from[g])].add(g)
    return {key: frozenset(g) for key, g in by_recipient.items()}


@pytest.mark.parametrize("seed", range(6))
def test_leftover_draw_equals_the_rescanning_one(seed: int) -> None:
    rng = random.Random(seed)
    gpus = [f"g{k:03d}" for k in range(rng.randint(20, 80))]
    apps = [f"a{k:03d}" for k in range(rng.randint(5, 60))]
    participants = apps[: max(1, len(apps) // 10)]
    others = apps[len(participants) :]
    offered = frozenset(rng.sample(gpus, rng.randint(5, len(gpus))))
    bids = [Bid(a, {frozenset(): 3.0, frozenset(rng.sample(sorted(offered), 1)): 1.0 + k / 10})
            for k, a in enumerate(participants)]  # fmt: skip
    room = {a: rng.choice((1, 1, 2, 3)) for a in apps if rng.random() < 0.9}
    for a in participants:
        room[a] = room.get(a, 0) + 1
    _, out = run_round(ArbiterState(frozenset(gpus)), offered=offered, bids=bids,
                       participants=participants, non_participants=others, now=50.0,
                       seed=seed, lease_seconds=600.0, room=room)  # fmt: skip
    got = {(lease.app_id, lease.start): lease.gpus for lease in out.granted
           if lease.source is LeaseSource.LEFTOVER}  # fmt: skip
    want = _naive_leftover(offered, bids, participants, others, 50.0, seed, 600.0, room)
    assert got == want
    assert len(got) > 1  # the draw went to several apps, so the pool changed on the way


def test_checking_only_the_added_leases_catches_what_they_break() -> None:
    gpus = frozenset({"g0", "g1", "g2"})
    old = Lease("a", frozenset({"g0"}), 0.0, 600.0, 1)
    other = Lease("b", frozenset({"g2"}), 0.0, 600.0, 1)
    clash = Lease("c", frozenset({"g0", "g1"}), 100.0, 700.0, 2)
    fine = Lease("c", frozenset({"g1"}), 100.0, 700.0, 2)
    check_invariants(ArbiterState(gpus, (old, other, fine)), added=[fine])
    with pytest.raises(InvariantViolation, match="g0"):
        check_invariants(ArbiterState(gpus, (old, other, clash)), added=[clash])
    unknown = Lease("c", frozenset({"g9"}), 100.0, 700.0, 2)
    with pytest.raises(InvariantViolation, match="unknown GPU"):
        check_invariants(ArbiterState(gpus, (old, unknown)), added=[unknown])
    backwards = Lease("c", frozenset({"g1"}), 700.0, 100.0, 2)
    with pytest.raises(InvariantViolation, match="start >= end"):
        check_invariants(ArbiterState(gpus, (old, backwards)), added=[backwards])


def test_spread_sets_are_shared_by_bidders_and_equal_fresh_ones() -> None:
    """Two bidders holding nothing get the same multi-machine sets (one memo entry), and a
    cold memo gives the same sets again."""
    from arbiter import bids

    cluster = load_cluster("nodes:8:4")
    rng = random.Random(4)
    offered = frozenset(rng.sample(sorted(cluster.gpu_ids), 19))
    first = candidate_sets(cluster, offered, 6, salt=1)
    second = candidate_sets(cluster, offered, 6, salt=2)
    one_machine = {n: {s for s in sets if len({cluster.gpu(g).machine for g in s}) == 1}
                   for n, sets in first.items()}  # fmt: skip
    for n in first:
        spread_1 = [s for s in first[n] if s not in one_machine[n]]
        spread_2 = [s for s in second[n] if len({cluster.gpu(g).machine for g in s}) > 1]
        assert spread_1 == spread_2
    bids._SPREAD.clear()
    assert candidate_sets(cluster, offered, 6, salt=1) == first


def test_themis_forgets_apps_that_are_gone() -> None:
    state = ThemisState(None, MappingProxyType({"a": 3, "b": 5, "c": 7}))
    assert Themis.forget(state, {"a", "b", "c", "d"}) is state
    assert dict(Themis.forget(state, {"b", "d"}).last_bid) == {"b": 5}
    assert Themis.forget(None, {"a"}) is None


@pytest.mark.parametrize("kind", ["single", "hyperparameter"])
def test_a_replay_keeps_bid_history_of_active_apps_only(kind: str) -> None:
    cluster = shorthand_cluster("nodes:2:4")
    jobs = random_trace(640, 24, (1, 2, 4), span=900.0)
    if kind != "single":
        jobs = group_into_apps(jobs, kind, (2, 4), seed=0)
    sizes = []

    def hook(snap, decision) -> None:
        active = {j.app_id for j in snap.jobs}
        st = decision.policy_state
        assert set(st.book.last_bids) <= active
        inner = st.policy_state
        assert inner is None or set(inner.last_bid) <= active
        sizes.append(len(st.book.last_bids))

    res = simulate(jobs, cluster, make_policy("themis", lease_s=40.0), on_decision=hook)
    assert all(r.finish_s is not None for r in res.jobs)
    assert max(sizes) > 0  # bids were kept while their apps were active
