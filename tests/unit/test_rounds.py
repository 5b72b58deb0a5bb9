"""Tests for the round-by-round Themis mechanism, ``arbiter.rounds``.

They check spec qoop-themis.md B.6 (rounds, leases, filtering, leftover), B.7 (one bid per
filtered app, exclusive allocations, the arbiter keeps each app's last bid table) and part D
items 19-21, plus the decisions the module documents (lease-time leftover starting when the PF
holder's lease ends, uniform seeded leftover recipients, batching window). Every expected
number is worked out by hand in a comment before it is asserted.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.auction import Bid, Rounding
from arbiter.bids import generate_bid
from arbiter.cluster import load_cluster
from arbiter.rounds import (
    DEFAULT_FAIRNESS_KNOB,
    DEFAULT_LEASE_SECONDS,
    ArbiterState,
    InvariantViolation,
    Lease,
    LeaseSource,
    check_invariants,
    expire_leases,
    filter_participants,
    free_gpus,
    offer_due,
    rho_after_grant,
    run_round,
)
from arbiter.synthetic import random_apps, random_instance

INF = math.inf
EMPTY: frozenset[str] = frozenset()
TESTBED = load_cluster("themis-testbed")


# ------------------------------------------------------------------------------------------
# Helpers


def fs(*gpus: str) -> frozenset[str]:
    return frozenset(gpus)


def scaled_bid(app_id: str, gpus: list[str], s: float, rho_old: float) -> Bid:
    """Every non-empty subset G of ``gpus`` priced ρ = s / |G| (homogeneous, spec D.18)."""
    rows: dict[frozenset[str], float] = {EMPTY: rho_old}
    for k in range(1, len(gpus) + 1):
        for combo in itertools.combinations(gpus, k):
            rows[frozenset(combo)] = s / k
    return Bid(app_id, rows)


def two_app_half_bids() -> list[Bid]:
    """Two identical apps over g0, g1: ρ_old = 8, one GPU -> 2, both -> 1.

    PF: split (2 * 2 = 4) beats one app taking both (1 * 8 = 8), so each gets one GPU.
    Without A, B takes both (ρ 1): c_A = (1/2) / (1/1) = 0.5, and c_B = 0.5 likewise.
    """
    gpus = ["g0", "g1"]
    return [scaled_bid("a", gpus, 2.0, 8.0), scaled_bid("b", gpus, 2.0, 8.0)]


def snapshot(state: ArbiterState) -> ArbiterState:
    """An independent copy of ``state`` (its mapping re-built) to compare against later."""
    return replace(
        state,
        gpus=frozenset(state.gpus),
        leases=tuple(state.leases),
        last_bids=MappingProxyType(dict(state.last_bids)),
    )


def lease_gpus(leases) -> frozenset[str]:
    return frozenset().union(*(lease.gpus for lease in leases))


def coverage(granted, gpu: str) -> list[tuple[float, float]]:
    return sorted((lease.start, lease.end) for lease in granted if gpu in lease.gpus)


# ------------------------------------------------------------------------------------------
# filter_participants (spec B.6, D.19)


def test_defaults_are_ten_minute_lease_and_f_point_nine():
    # D.21: lease 10 min (the paper's); f = 0.9 (measured better than the paper's 0.8 here).
    assert DEFAULT_LEASE_SECONDS == 600.0
    assert DEFAULT_FAIRNESS_KNOB == 0.9


def test_filter_ten_apps_f_08_keeps_the_two_largest_rho():
    # ρ assigned in a shuffled order so the answer is not simply the largest ids.
    # max(1, ceil(0.2 * 10)) = 2: the apps with ρ 10 and 9.
    ids = [f"app-{k}" for k in range(10)]
    values = [3.0, 10.0, 1.0, 7.0, 2.0, 5.0, 9.0, 4.0, 6.0, 8.0]
    rho = dict(zip(ids, values, strict=True))
    assert filter_participants(rho, 0.8) == ("app-1", "app-6")


def test_filter_f_1_one_app_and_f_0_every_app():
    ids = [f"app-{k}" for k in range(10)]
    rho = {a: float(k + 1) for k, a in enumerate(ids)}
    assert filter_participants(rho, 1.0) == ("app-9",)
    # f = 0: all 10 bid, ranked by ρ descending.
    assert filter_participants(rho, 0.0) == tuple(reversed(ids))


@pytest.mark.parametrize("f", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_filter_single_app_always_bids(f):
    assert filter_participants({"solo": 2.5}, f) == ("solo",)


def test_filter_three_apps_f_08_rounds_up_to_one():
    # (1 - 0.8) * 3 = 0.6 -> ceil = 1.
    assert filter_participants({"a": 1.0, "b": 3.0, "c": 2.0}, 0.8) == ("b",)


def test_filter_seven_apps_f_05_rounds_up_to_four():
    # (1 - 0.5) * 7 = 3.5 -> ceil = 4: ρ 7, 6, 5, 4.
    rho = {f"x{k}": float(k) for k in range(1, 8)}
    assert filter_participants(rho, 0.5) == ("x7", "x6", "x5", "x4")


def test_filter_ties_broken_by_app_id():
    rho = {"b": 2.0, "a": 2.0, "c": 1.0, "d": 2.0}
    # N = 4, f = 0.5 -> 2 of the three tied at 2.0: "a" then "b".
    assert filter_participants(rho, 0.5) == ("a", "b")
    # f = 0.8 -> ceil(0.8) = 1: "a".
    assert filter_participants(rho, 0.8) == ("a",)


def test_filter_infinite_rho_is_the_largest():
    rho = {"a": 1e300, "b": INF, "c": 5.0}
    assert filter_participants(rho, 1.0) == ("b",)
    assert filter_participants(rho, 0.5) == ("b", "a")


def test_filter_tie_break_prefers_smaller_value_then_id():
    # Every app starving (ρ = ∞); tie_break = round last bid in; a missing entry counts as
    # "never bid" (smallest). N = 4, f = 0.5 -> 2 participants: "d" (missing), then "b" (1).
    rho = dict.fromkeys("abcd", INF)
    assert filter_participants(rho, 0.5, tie_break={"a": 3, "b": 1, "c": 2}) == ("d", "b")


@pytest.mark.parametrize("f", [math.nan, -0.1, 1.1, INF, -INF])
def test_filter_rejects_bad_knob(f):
    with pytest.raises(ValueError, match="fairness knob"):
        filter_participants({"a": 1.0}, f)


@pytest.mark.parametrize("bad", [math.nan, 0.0, -1.0, -INF])
def test_filter_rejects_bad_rho_naming_the_app(bad):
    with pytest.raises(ValueError, match="'app-bad'"):
        filter_participants({"app-ok": 1.0, "app-bad": bad}, 0.5)


@pytest.mark.parametrize("f", [0.0, 0.8, 1.0])
def test_filter_empty_mapping_gives_no_participants(f):
    assert filter_participants({}, f) == ()


@settings(max_examples=100, deadline=None)
@given(
    rhos=st.lists(
        st.floats(min_value=0.01, max_value=100.0) | st.just(INF), min_size=1, max_size=30
    ),
    twentieths=st.integers(min_value=0, max_value=20),
)
def test_filter_count_and_order_property(rhos, twentieths):
    # f = k/20: the exact count is max(1, ceil((20 - k) * N / 20)) in integer arithmetic.
    f = twentieths / 20
    rho = {f"app-{k:02d}": r for k, r in enumerate(rhos)}
    n = len(rho)
    expected = max(1, -((twentieths - 20) * n // 20))
    chosen = filter_participants(rho, f)
    assert len(chosen) == expected
    assert len(set(chosen)) == expected
    ranked = sorted(rho, key=lambda a: (-rho[a], a))
    assert chosen == tuple(ranked[:expected])


# ------------------------------------------------------------------------------------------
# run_round: participants, bids, validation (spec B.7, D.20)


def test_run_round_uses_every_participants_bid():
    bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=1)
    participants = [b.app_id for b in bids]
    state = ArbiterState(TESTBED.gpu_ids)
    new, out = run_round(
        state,
        offered=offered,
        bids=bids,
        participants=participants,
        non_participants=["np-0", "np-1"],
        now=0.0,
        seed=0,
    )
    assert out.round == 1
    assert out.offered == offered
    assert out.participants == tuple(participants)
    assert len(out.participants) == 4
    # Each participant's single bid went into the auction: one PF row, priced by that bid.
    assert set(out.result.pf_allocation) == set(participants)
    for bid in bids:
        row = out.result.pf_allocation[bid.app_id]
        assert out.result.pf_rho[bid.app_id] == bid.rows[row]
    # Allocations are disjoint (D.20) and come from the offer.
    alloc = list(out.result.pf_allocation.values())
    assert sum(len(g) for g in alloc) == len(frozenset().union(*alloc))
    assert frozenset().union(*alloc) <= offered
    assert dict(new.last_bids) == {b.app_id: b for b in bids}
    check_invariants(new)


def _assert_untouched(state: ArbiterState, copy: ArbiterState) -> None:
    assert state == copy
    assert state.round == copy.round
    assert state.leases == copy.leases
    assert dict(state.last_bids) == dict(copy.last_bids)
    check_invariants(state)


def _state_with_history() -> ArbiterState:
    """A state after one round: a and b hold g0/g1 for [0, 300), leftover to c on [300, 600)."""
    state = ArbiterState(fs("g0", "g1", "g2", "g3"))
    state, _ = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=0,
    )
    return state


def test_run_round_rejects_bid_from_non_participant_and_leaves_state():
    state = _state_with_history()
    copy = snapshot(state)
    bids = [Bid("a", {EMPTY: 5.0, fs("g2"): 1.0}), Bid("c", {EMPTY: 5.0, fs("g3"): 1.0})]
    with pytest.raises(ValueError, match="participants"):
        run_round(
            state,
            offered=fs("g2", "g3"),
            bids=bids,
            participants=["a"],
            non_participants=["c"],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


def test_run_round_rejects_missing_participant_bid_and_leaves_state():
    state = _state_with_history()
    copy = snapshot(state)
    with pytest.raises(ValueError, match="participants"):
        run_round(
            state,
            offered=fs("g2", "g3"),
            bids=[Bid("a", {EMPTY: 5.0, fs("g2"): 1.0})],
            participants=["a", "b"],
            non_participants=["c"],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


def test_run_round_rejects_two_bids_from_one_app():
    # D.20: each filtered app returns exactly one bid.
    state = _state_with_history()
    copy = snapshot(state)
    with pytest.raises(ValueError):
        run_round(
            state,
            offered=fs("g2", "g3"),
            bids=[Bid("a", {EMPTY: 5.0, fs("g2"): 1.0}), Bid("a", {EMPTY: 5.0, fs("g3"): 1.0})],
            participants=["a"],
            non_participants=["c"],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


def test_run_round_rejects_bid_row_outside_offer_and_leaves_state():
    state = _state_with_history()
    copy = snapshot(state)
    with pytest.raises(ValueError, match="not offered"):
        run_round(
            state,
            offered=fs("g2"),
            bids=[Bid("a", {EMPTY: 5.0, fs("g3"): 1.0})],
            participants=["a"],
            non_participants=["c"],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


@pytest.mark.parametrize(
    ("offered", "bad"),
    [
        (fs("g0", "g2"), "g0"),  # a holds g0 on [0, 300): live at t = 100
        (fs("g1", "g3"), "g1"),  # b holds g1 on [0, 300)
        (fs("g2", "zz"), "zz"),  # not a GPU of the cluster
    ],
)
def test_run_round_rejects_gpus_leased_at_now(offered, bad):
    state = _state_with_history()
    copy = snapshot(state)
    with pytest.raises(ValueError, match=f"'{bad}'"):
        run_round(
            state,
            offered=offered,
            bids=[Bid("a", {EMPTY: 5.0})],
            participants=["a"],
            non_participants=[],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


def test_run_round_rejects_gpu_reserved_for_a_later_leftover_lease():
    # At t = 300 a's and b's auction leases have ended, but c's leftover lease [300, 600)
    # on g0 and g1 is live; at t = 299 it is reserved: both must be refused.
    state = _state_with_history()
    for now in (299.0, 300.0, 599.0):
        with pytest.raises(ValueError, match="'g0'"):
            run_round(
                state,
                offered=fs("g0"),
                bids=[Bid("a", {EMPTY: 5.0})],
                participants=["a"],
                non_participants=[],
                now=now,
                seed=0,
            )
    # At 600 everything has ended: offering g0 is fine.
    new, _ = run_round(
        state,
        offered=fs("g0"),
        bids=[Bid("a", {EMPTY: 5.0, fs("g0"): 1.0})],
        participants=["a"],
        non_participants=[],
        now=600.0,
        seed=0,
    )
    assert new.leases[-1] == Lease("a", fs("g0"), 600.0, 1200.0, 2)


def test_gpu_reserved_for_a_later_lease_is_not_free():
    # g0 is leased only on [300, 600): at t = 100 it is in no live lease but reserved, so it
    # is not free and cannot be offered; from 600 on it is free again.
    state = ArbiterState(
        fs("g0", "g1"), leases=(Lease("c", fs("g0"), 300.0, 600.0, 1, LeaseSource.LEFTOVER),)
    )
    assert free_gpus(state, 100.0) == fs("g1")
    assert free_gpus(state, 300.0) == fs("g1")
    assert free_gpus(state, 600.0) == fs("g0", "g1")
    copy = snapshot(state)
    with pytest.raises(ValueError, match="'g0'"):
        run_round(
            state,
            offered=fs("g0", "g1"),
            bids=[Bid("a", {EMPTY: 5.0, fs("g0", "g1"): 1.0})],
            participants=["a"],
            non_participants=[],
            now=100.0,
            seed=0,
        )
    _assert_untouched(state, copy)


@pytest.mark.parametrize("lease", [0.0, -1.0, INF, math.nan])
def test_run_round_rejects_bad_lease_length(lease):
    state = ArbiterState(fs("g0"))
    with pytest.raises(ValueError, match="lease_seconds"):
        run_round(
            state,
            offered=fs("g0"),
            bids=[Bid("a", {EMPTY: 5.0, fs("g0"): 1.0})],
            participants=["a"],
            non_participants=[],
            now=0.0,
            seed=0,
            lease_seconds=lease,
        )


# ------------------------------------------------------------------------------------------
# Leases and leftover (spec B.5 Gap 1, B.6)


def test_half_payment_round_exact_leases():
    # two_app_half_bids: c = 0.5 each, so under lease-time rounding each app holds its PF GPU
    # for 0.5 * 600 = 300 s, and both GPUs are leftover on [300, 600) for the only
    # non-participant "c".
    state = ArbiterState(fs("g0", "g1", "g2"))
    new, out = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=7,
    )
    assert out.result.c == {"a": 0.5, "b": 0.5}
    auction = [lease for lease in out.granted if lease.source is LeaseSource.AUCTION]
    leftover = [lease for lease in out.granted if lease.source is LeaseSource.LEFTOVER]
    assert sorted((lease.app_id, lease.start, lease.end) for lease in auction) == [
        ("a", 0.0, 300.0),
        ("b", 0.0, 300.0),
    ]
    assert lease_gpus(auction) == fs("g0", "g1")
    assert all(len(lease.gpus) == 1 for lease in auction)
    assert leftover == [Lease("c", fs("g0", "g1"), 300.0, 600.0, 1, LeaseSource.LEFTOVER)]
    assert new.leases == out.granted
    assert new.held_by("a", 100.0) | new.held_by("b", 100.0) == fs("g0", "g1")
    assert new.held_by("c", 100.0) == EMPTY
    assert new.held_by("c", 300.0) == fs("g0", "g1")
    assert free_gpus(new, 0.0) == fs("g2")


def test_leftover_starts_exactly_when_pf_lease_ends():
    # D.18: 3 identical apps ρ = 6/g on 6 GPUs -> 2 GPUs each, c = (2/3)^2 = 4/9.
    # At now = 150.1 each app holds its pair until 150.1 + 4/9 * 600 ≈ 416.7667; every GPU is
    # then leftover until 150.1 + 600 = 750.1.
    gpus = [f"g{k}" for k in range(6)]
    bids = [scaled_bid(a, gpus, 6.0, INF) for a in "abc"]
    state = ArbiterState(frozenset(gpus))
    _, out = run_round(
        state,
        offered=frozenset(gpus),
        bids=bids,
        participants="abc",
        non_participants=["d", "e"],
        now=150.1,
        seed=3,
    )
    for a in "abc":
        assert out.result.c[a] == pytest.approx(4 / 9, rel=1e-12)
    auction = {lease.app_id: lease for lease in out.granted if lease.source is LeaseSource.AUCTION}
    leftover = [lease for lease in out.granted if lease.source is LeaseSource.LEFTOVER]
    assert set(auction) == {"a", "b", "c"}
    for lease in auction.values():
        assert len(lease.gpus) == 2
        assert lease.start == 150.1
        assert lease.end == pytest.approx(150.1 + 4 / 9 * 600, rel=1e-12)
    assert lease_gpus(leftover) == frozenset(gpus)
    for lease in leftover:
        assert lease.end == 150.1 + 600.0
        for g in lease.gpus:
            (holder,) = [x for x in auction.values() if g in x.gpus]
            assert lease.start == holder.end  # the same float: the leases just touch
        assert lease.app_id in {"d", "e"}


def test_count_rounding_leftover_starts_now():
    # Under count rounding c = 0.5 keeps floor(0.5 * 1) = 0 GPUs: nobody holds anything and
    # g0, g1 are leftover for the whole lease [50, 650), all to the non-participant "c".
    state = ArbiterState(fs("g0", "g1"))
    _, out = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=50.0,
        seed=0,
        rounding=Rounding.COUNT,
    )
    assert out.granted == (Lease("c", fs("g0", "g1"), 50.0, 650.0, 1, LeaseSource.LEFTOVER),)


@pytest.mark.parametrize("rounding", [Rounding.LEASE_TIME, Rounding.COUNT])
def test_count_and_lease_time_leftover_start_times_on_random_instances(rounding):
    now, lease = 1000.0, 600.0
    seen_leftover = 0
    for seed in range(6):
        bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=seed)
        _, out = run_round(
            ArbiterState(TESTBED.gpu_ids),
            offered=offered,
            bids=bids,
            participants=[b.app_id for b in bids],
            non_participants=["np-0", "np-1", "np-2"],
            now=now,
            seed=seed,
            lease_seconds=lease,
            rounding=rounding,
        )
        auction_end = {
            g: lease.end
            for lease in out.granted
            if lease.source is LeaseSource.AUCTION
            for g in lease.gpus
        }
        for lo in out.granted:
            if lo.source is not LeaseSource.LEFTOVER:
                continue
            seen_leftover += 1
            assert lo.end == now + lease
            for g in lo.gpus:
                if rounding is Rounding.COUNT:
                    assert lo.start == now
                else:
                    assert lo.start == auction_end.get(g, now)
    assert seen_leftover > 0


@pytest.mark.parametrize("rounding", [Rounding.LEASE_TIME, Rounding.COUNT])
def test_every_leftover_gpu_goes_to_a_non_participant(rounding):
    non_participants = ["np-0", "np-1", "np-2"]
    leftover_gpus = 0
    for seed in range(8):
        bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=seed)
        participants = [b.app_id for b in bids]
        _, out = run_round(
            ArbiterState(TESTBED.gpu_ids),
            offered=offered,
            bids=bids,
            participants=participants,
            # participants listed as non-participants too are ignored for leftover
            non_participants=[*non_participants, participants[0]],
            now=0.0,
            seed=seed,
            rounding=rounding,
        )
        for lease in out.granted:
            if lease.source is LeaseSource.LEFTOVER:
                leftover_gpus += len(lease.gpus)
                assert lease.app_id in non_participants
            else:
                assert lease.app_id in participants
        # every GPU the PA result calls leftover (fraction > 0 of the lease) is leased out
        leased_leftover = lease_gpus(lo for lo in out.granted if lo.source is LeaseSource.LEFTOVER)
        assert leased_leftover == frozenset(out.result.leftover)
    assert leftover_gpus > 0


def test_leftover_goes_to_participants_when_every_app_bids():
    got = 0
    for seed in range(6):
        bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=seed)
        participants = [b.app_id for b in bids]
        for non_participants in ([], participants):
            new, out = run_round(
                ArbiterState(TESTBED.gpu_ids),
                offered=offered,
                bids=bids,
                participants=participants,
                non_participants=non_participants,
                now=0.0,
                seed=seed,
            )
            leftover = [lo for lo in out.granted if lo.source is LeaseSource.LEFTOVER]
            got += len(leftover)
            assert all(lo.app_id in participants for lo in leftover)
            assert lease_gpus(leftover) == frozenset(out.result.leftover)
            check_invariants(new)
    assert got > 0


@pytest.mark.parametrize("rounding", [Rounding.LEASE_TIME, Rounding.COUNT])
@pytest.mark.parametrize("seed", range(5))
def test_work_conservation_every_offered_gpu_covered_for_the_whole_lease(rounding, seed):
    now, lease = 321.5, 600.0
    bids, offered = random_instance(TESTBED, apps=5, gpus=20, rows=8, seed=seed)
    new, out = run_round(
        ArbiterState(TESTBED.gpu_ids),
        offered=offered,
        bids=bids,
        participants=[b.app_id for b in bids],
        non_participants=["np-0"],
        now=now,
        seed=seed,
        lease_seconds=lease,
        rounding=rounding,
    )
    assert lease_gpus(out.granted) == offered
    for g in offered:
        spans = coverage(out.granted, g)
        assert spans[0][0] == now
        assert spans[-1][1] == now + lease
        for (_, e1), (s2, _) in itertools.pairwise(spans):
            assert e1 == s2  # contiguous, no gap, no overlap
        assert sum(e - s for s, e in spans) == pytest.approx(lease, rel=1e-12)
    # The whole offer is leased at every instant of the lease, so nothing is free.
    for t in (now, now + 1.0, now + lease / 2, now + lease - 1e-6):
        assert not (offered & free_gpus(new, t))
    assert offered <= free_gpus(new, now + lease)


def test_room_limits_leftover_and_unused_gpus_stay_free():
    # c = 0.5: a, b hold g0/g1 on [0, 300); g0, g1 and g2 (unbid) are leftover. "c" has room
    # for 1 GPU, "d" for none, "e" is not in room (none): c gets exactly 1 leftover GPU, the
    # participants have room 1 each but already hold 1, so the two others stay unleased.
    state = ArbiterState(fs("g0", "g1", "g2"))
    new, out = run_round(
        state,
        offered=fs("g0", "g1", "g2"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c", "d", "e"],
        now=0.0,
        seed=5,
        room={"a": 1, "b": 1, "c": 1, "d": 0},
    )
    leftover = [lo for lo in out.granted if lo.source is LeaseSource.LEFTOVER]
    assert [lo.app_id for lo in leftover] == ["c"]
    assert len(leftover[0].gpus) == 1
    check_invariants(new)
    unused = fs("g0", "g1", "g2") - leftover[0].gpus
    assert len(unused) == 2
    assert free_gpus(new, 600.0) == fs("g0", "g1", "g2")
    # After the auction leases end at 300, the unleased ones are free for the next round.
    assert free_gpus(new, 300.0) == unused


def test_room_falls_back_to_participants_with_room():
    # c = 0.5; leftover: g0, g1 (from 300) and g2 (unbid, from 0). The only non-participant
    # has no room, so leftover falls back to participants with room: a has 3 - 1 (its PF GPU)
    # = 2 left, b has 1 - 1 = 0. So a gets exactly 2 of the 3 leftover GPUs, one stays
    # unleased.
    state = ArbiterState(fs("g0", "g1", "g2"))
    new, out = run_round(
        state,
        offered=fs("g0", "g1", "g2"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=1,
        room={"a": 3, "b": 1, "c": 0},
    )
    leftover = [lo for lo in out.granted if lo.source is LeaseSource.LEFTOVER]
    assert {lo.app_id for lo in leftover} == {"a"}
    assert len(lease_gpus(leftover)) == 2
    check_invariants(new)


# ------------------------------------------------------------------------------------------
# Multi-round property: no GPU in two live leases (spec B.6, D.20)


def _hand_bid(data, app_id: str, offer: list[str]) -> Bid:
    rho_old = data.draw(st.floats(min_value=1.0, max_value=50.0) | st.just(INF), label="old")
    rows: dict[frozenset[str], float] = {EMPTY: rho_old}
    if offer:
        n_rows = data.draw(st.integers(min_value=0, max_value=3), label="rows")
        for _ in range(n_rows):
            key = data.draw(
                st.lists(st.sampled_from(offer), min_size=1, max_size=4, unique=True),
                label="row",
            )
            rows[frozenset(key)] = data.draw(st.floats(min_value=0.05, max_value=60.0))
    return Bid(app_id, rows)


def _live(state: ArbiterState, t: float) -> frozenset[str]:
    return lease_gpus(lease for lease in state.leases if lease.live_at(t))


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_multi_round_no_gpu_in_two_live_leases(data):
    apps = [f"app-{k}" for k in range(data.draw(st.integers(2, 10), label="apps"))]
    f = data.draw(st.sampled_from([0.0, 0.5, 0.8, 1.0]), label="f")
    rounding = data.draw(st.sampled_from(list(Rounding)), label="rounding")
    use_room = data.draw(st.booleans(), label="room")
    state = ArbiterState(TESTBED.gpu_ids)
    for k in range(data.draw(st.integers(2, 8), label="rounds")):
        t = 150.0 * k
        before = state
        state, _freed = expire_leases(state, t)
        assert all(lease.end > t for lease in state.leases)
        assert [lo for lo in before.leases if lo.end > t] == list(state.leases)
        offer = free_gpus(state, t)
        # free GPUs are in no live lease and in no lease reserved for later
        assert offer.isdisjoint(_live(state, t))
        assert offer.isdisjoint(lease_gpus(state.leases))
        assert offer | lease_gpus(state.leases) == TESTBED.gpu_ids
        rho = {
            a: data.draw(st.floats(min_value=0.1, max_value=10.0) | st.just(INF), label="rho")
            for a in apps
        }
        participants = filter_participants(rho, f)
        # hand bids only on a small part of the offer, to keep the solve fast
        sub = sorted(offer)[: data.draw(st.integers(0, 12), label="sub")]
        bids = [_hand_bid(data, a, sub) for a in participants]
        others = [a for a in apps if a not in participants]
        lease = data.draw(st.sampled_from([100.0, 150.0, 400.0, 600.0, 1000.0]), label="lease")
        room = {a: data.draw(st.integers(0, 4), label="room") for a in apps} if use_room else None
        state, out = run_round(
            state,
            offered=offer,
            bids=bids,
            participants=participants,
            non_participants=others,
            now=t,
            seed=k,
            lease_seconds=lease,
            rounding=rounding,
            room=room,
        )
        check_invariants(state)
        assert state.round == k + 1
        assert lease_gpus(out.granted) <= offer
        for g in lease_gpus(out.granted):
            spans = coverage(out.granted, g)
            for (_, e1), (s2, _) in itertools.pairwise(spans):
                assert e1 <= s2
        for lo in out.granted:
            assert t <= lo.start < lo.end <= t + lease
            if lo.source is LeaseSource.LEFTOVER and others and room is None:
                assert lo.app_id in others
        if room is None:  # work conservation
            assert lease_gpus(out.granted) == offer
        for probe in (t, t + 75.0, t + 149.9):
            live = _live(state, probe)
            assert free_gpus(state, probe).isdisjoint(live)
            for g in live:
                assert sum(lo.live_at(probe) for lo in state.leases if g in lo.gpus) == 1


def test_multi_round_with_generated_bids_keeps_invariants():
    # The CLI's loop, with real bids (Eq. 1 estimators, generate_bid) on the 64-GPU testbed.
    rng = random.Random(11)
    population = {a.app_id: a for a in random_apps(8, rng)}
    estimators = {a: app.rho(TESTBED.num_gpus) for a, app in population.items()}
    state = ArbiterState(TESTBED.gpu_ids)
    rounds_run = 0
    for k in range(8):
        t = 150.0 * k
        state, _ = expire_leases(state, t)
        offer = free_gpus(state, t)
        assert offer.isdisjoint(_live(state, t))
        if not offer:
            continue
        rho = {a: rng.choice([0.5, 1.0, 2.0, 4.0, INF]) for a in population}
        participants = filter_participants(rho, 0.8)
        bids = [
            generate_bid(
                a,
                TESTBED,
                offer,
                estimators[a],
                demand_max=population[a].demand_max,
                max_rows=8,
            )
            for a in participants
        ]
        state, out = run_round(
            state,
            offered=offer,
            bids=bids,
            participants=participants,
            non_participants=[a for a in population if a not in participants],
            now=t,
            seed=k,
        )
        rounds_run += 1
        check_invariants(state)
        assert len(out.participants) == 2  # ceil(0.2 * 8) = 2
        assert lease_gpus(out.granted) == offer
    # Rounds at 0 and 600 (every GPU is leased until the lease ends at 600).
    assert rounds_run == 2
    assert state.round == 2


# ------------------------------------------------------------------------------------------
# Expiry (spec B.6, D.21)


def _state_for_expiry() -> ArbiterState:
    """a/b hold g0/g1 on [0, 300), c has leftover g0+g1 on [300, 600), plus hand leases:
    x: g2 [0, 599), y: g3 [0, 599.9), z: g4 [0, 700). g5 is never leased."""
    state = ArbiterState(fs("g0", "g1", "g2", "g3", "g4", "g5"))
    state, _ = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=0,
        lease_seconds=600.0,
    )
    extra = (
        Lease("x", fs("g2"), 0.0, 599.0, 0),
        Lease("y", fs("g3"), 0.0, 599.9, 0),
        Lease("z", fs("g4"), 0.0, 700.0, 0),
    )
    state = replace(state, leases=state.leases + extra)
    check_invariants(state)
    return state


def test_expire_at_lease_end_drops_every_round_lease():
    state = ArbiterState(fs("g0", "g1", "g2"))
    state, _ = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=0,
        lease_seconds=600.0,
    )
    assert free_gpus(state, 599.0) == fs("g2")
    new, _ = expire_leases(state, 600.0)
    assert new.leases == ()
    assert free_gpus(new, 600.0) == fs("g0", "g1", "g2")
    assert new.round == state.round
    assert new.last_bids == state.last_bids


def test_expire_at_599_9_drops_only_leases_ended_by_then():
    state = _state_for_expiry()
    new, _ = expire_leases(state, 599.9)
    # dropped: a, b (end 300), x (599), y (599.9 <= 599.9); kept: c (600), z (700)
    assert sorted(lease.app_id for lease in new.leases) == ["c", "z"]
    assert all(lease.end > 599.9 for lease in new.leases)
    assert free_gpus(new, 599.9) == fs("g2", "g3", "g5")


def test_expire_with_nothing_ended_is_a_no_op():
    state = _state_for_expiry()
    new, freed = expire_leases(state, 299.0)
    assert new is state
    assert freed == EMPTY


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # At 600 c's leftover lease and x, y end: g0, g1, g2, g3 become free (g4 is z's until
        # 700, g5 was free already).
        (600.0, fs("g0", "g1", "g2", "g3")),
        # At 599.9 only x and y's GPUs become free: g0/g1 are still c's until 600.
        (599.9, fs("g2", "g3")),
        # At 300 a's and b's leases end, but c has g0/g1 from 300: nothing becomes free.
        (300.0, EMPTY),
        # At 700 everything has ended.
        (700.0, fs("g0", "g1", "g2", "g3", "g4")),
    ],
)
def test_expire_returns_exactly_the_gpus_that_became_free(now, expected):
    state = _state_for_expiry()
    new, freed = expire_leases(state, now)
    # what "became free" means: free after expiry, not free before the leases ended
    assert free_gpus(new, now) - free_gpus(state, 0.0) == expected
    assert freed == expected


def test_expire_after_one_round_returns_all_offered_gpus():
    # D.21: an expired lease starts a round with the GPUs it freed.
    bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=3)
    state, _ = run_round(
        ArbiterState(TESTBED.gpu_ids),
        offered=offered,
        bids=bids,
        participants=[b.app_id for b in bids],
        non_participants=["np"],
        now=0.0,
        seed=0,
        lease_seconds=600.0,
    )
    new, freed = expire_leases(state, 600.0)
    assert new.leases == ()
    assert freed == offered


# ------------------------------------------------------------------------------------------
# check_invariants


def test_check_invariants_detects_overlap_on_one_gpu():
    state = ArbiterState(
        fs("g0", "g1"),
        leases=(
            Lease("a", fs("g0", "g1"), 0.0, 10.0, 1),
            Lease("b", fs("g1"), 9.5, 20.0, 1),
        ),
    )
    with pytest.raises(InvariantViolation, match="'g1'"):
        check_invariants(state)


def test_check_invariants_detects_nested_overlap_behind_an_earlier_lease():
    # g0: a [0, 100), b [10, 20), c [30, 40): c overlaps a though it does not touch b.
    state = ArbiterState(
        fs("g0"),
        leases=(
            Lease("c", fs("g0"), 30.0, 40.0, 1),
            Lease("a", fs("g0"), 0.0, 100.0, 1),
        ),
    )
    with pytest.raises(InvariantViolation):
        check_invariants(state)


def test_check_invariants_detects_overlap_with_equal_starts():
    state = ArbiterState(
        fs("g0"),
        leases=(Lease("a", fs("g0"), 5.0, 6.0, 1), Lease("b", fs("g0"), 5.0, 50.0, 1)),
    )
    with pytest.raises(InvariantViolation, match="'g0'"):
        check_invariants(state)


def test_check_invariants_detects_overlap_hidden_by_lease_order():
    # In tuple order the neighbours (a, b) and (b, c) are disjoint; a and c overlap on
    # [50, 60). Only a check independent of the order catches it.
    state = ArbiterState(
        fs("g0"),
        leases=(
            Lease("a", fs("g0"), 0.0, 100.0, 1),
            Lease("b", fs("g0"), 200.0, 300.0, 1),
            Lease("c", fs("g0"), 50.0, 60.0, 2),
        ),
    )
    with pytest.raises(InvariantViolation, match="'g0'"):
        check_invariants(state)


def test_check_invariants_detects_unknown_gpu():
    state = ArbiterState(fs("g0"), leases=(Lease("a", fs("g0", "ghost"), 0.0, 10.0, 1),))
    with pytest.raises(InvariantViolation, match="'ghost'"):
        check_invariants(state)


def test_check_invariants_detects_empty_interval():
    state = ArbiterState(fs("g0"), leases=(Lease("a", fs("g0"), 10.0, 10.0, 1),))
    with pytest.raises(InvariantViolation):
        check_invariants(state)


def test_check_invariants_accepts_touching_leases():
    state = ArbiterState(
        fs("g0", "g1"),
        leases=(
            Lease("b", fs("g0"), 10.0, 20.0, 1, LeaseSource.LEFTOVER),
            Lease("a", fs("g0", "g1"), 0.0, 10.0, 1),
            Lease("c", fs("g1"), 10.0, 20.0, 2),
        ),
    )
    check_invariants(state)  # no exception
    assert state.held_by("a", 9.999) == fs("g0", "g1")
    assert state.held_by("a", 10.0) == EMPTY
    assert state.held_by("b", 10.0) == fs("g0")


def test_invariant_violation_is_not_an_assertion_error():
    # the binding cycle catches InvariantViolation to drop a round; a real assertion failure
    # in the commit path must not be caught with it
    assert not issubclass(InvariantViolation, AssertionError)


def test_lease_live_at_and_overlaps_are_half_open():
    a = Lease("a", fs("g0"), 0.0, 10.0, 1)
    assert a.live_at(0.0)
    assert a.live_at(9.999)
    assert not a.live_at(10.0)
    assert not a.live_at(-0.001)
    assert not a.overlaps(Lease("b", fs("g0"), 10.0, 20.0, 1))
    assert a.overlaps(Lease("b", fs("g0"), 9.0, 20.0, 1))


# ------------------------------------------------------------------------------------------
# offer_due (batching)


def test_offer_due_batching_window():
    assert offer_due(None, 100.0, 2.0) is False
    assert offer_due(10.0, 10.0, 2.0) is False
    assert offer_due(10.0, 11.999, 2.0) is False
    assert offer_due(10.0, 12.0, 2.0) is True  # exactly the window
    assert offer_due(10.0, 15.0, 2.0) is True
    assert offer_due(10.0, 10.0, 0.0) is True  # no batching: offer at once


# ------------------------------------------------------------------------------------------
# rho_after_grant (spec B.7)

TABLE = Bid(
    "app",
    {
        EMPTY: 8.0,
        fs("g0"): 4.0,
        fs("g0", "g1"): 2.0,
        fs("g2"): 3.0,
        fs("g4", "g5"): 1.0,
    },
)


def test_rho_after_grant_exact_row():
    assert rho_after_grant(TABLE, fs("g0", "g1")) == 2.0
    assert rho_after_grant(TABLE, fs("g0")) == 4.0
    assert rho_after_grant(TABLE, EMPTY) == 8.0


def test_rho_after_grant_best_contained_row():
    # {g0, g2, g3}: contained rows ∅ 8, {g0} 4, {g2} 3 -> 3.
    assert rho_after_grant(TABLE, fs("g0", "g2", "g3")) == 3.0
    # {g0, g1, g2}: ∅ 8, {g0} 4, {g0,g1} 2, {g2} 3 -> 2.
    assert rho_after_grant(TABLE, fs("g0", "g1", "g2")) == 2.0
    # {g4, g5, g9}: {g4, g5} 1.
    assert rho_after_grant(TABLE, fs("g4", "g5", "g9")) == 1.0


def test_rho_after_grant_falls_back_to_rho_old():
    # {g1} and {g4, g9}: no non-empty row fits inside -> ρ_old 8.
    assert rho_after_grant(TABLE, fs("g1")) == 8.0
    assert rho_after_grant(TABLE, fs("g4", "g9")) == 8.0


def test_rho_after_grant_from_kept_leftover():
    # The leftover recipient "c" of the half-payment round had last bid {∅: inf, {g0}: 5};
    # with leftover g0 + g1 its kept table says ρ = 5.
    state = ArbiterState(fs("g0", "g1"), last_bids=MappingProxyType({}))
    c_bid = Bid("c", {EMPTY: INF, fs("g0"): 5.0})
    state, _ = run_round(
        state,
        offered=fs("g0"),
        bids=[c_bid],
        participants=["c"],
        non_participants=[],
        now=0.0,
        seed=0,
    )
    state, _ = expire_leases(state, 600.0)
    state, _ = run_round(
        state,
        offered=fs("g0", "g1"),
        bids=two_app_half_bids(),
        participants=["a", "b"],
        non_participants=["c"],
        now=600.0,
        seed=0,
    )
    got = state.held_by("c", 900.0)
    assert got == fs("g0", "g1")
    assert rho_after_grant(state.last_bids["c"], got) == 5.0


# ------------------------------------------------------------------------------------------
# last bids, round counter, seeds


def test_last_bids_kept_per_app_and_round_counter():
    gpus = fs("g0", "g1", "g2", "g3")
    state = ArbiterState(gpus)
    a1 = Bid("a", {EMPTY: 9.0, fs("g0"): 3.0})
    b1 = Bid("b", {EMPTY: 9.0, fs("g1"): 3.0})
    state, out1 = run_round(
        state,
        offered=gpus,
        bids=[a1, b1],
        participants=["a", "b"],
        non_participants=["c"],
        now=0.0,
        seed=0,
    )
    assert (state.round, out1.round) == (1, 1)
    assert dict(state.last_bids) == {"a": a1, "b": b1}
    assert all(lease.round == 1 for lease in state.leases)

    state, _ = expire_leases(state, 600.0)
    c2 = Bid("c", {EMPTY: INF, fs("g2"): 2.0})
    state, out2 = run_round(
        state,
        offered=free_gpus(state, 600.0),
        bids=[c2],
        participants=["c"],
        non_participants=["a", "b"],
        now=600.0,
        seed=0,
    )
    assert (state.round, out2.round) == (2, 2)
    assert dict(state.last_bids) == {"a": a1, "b": b1, "c": c2}
    assert {lease.round for lease in out2.granted} == {2}

    state, _ = expire_leases(state, 1200.0)
    a3 = Bid("a", {EMPTY: 4.0, fs("g3"): 1.5})
    state, out3 = run_round(
        state,
        offered=free_gpus(state, 1200.0),
        bids=[a3],
        participants=["a"],
        non_participants=["b", "c"],
        now=1200.0,
        seed=0,
    )
    assert (state.round, out3.round) == (3, 3)
    assert state.last_bids["a"] is a3
    assert state.last_bids["b"] is b1
    assert state.last_bids["c"] is c2
    # the kept table is read-only
    with pytest.raises(TypeError):
        state.last_bids["a"] = b1  # type: ignore[index]


def test_run_round_with_empty_offer_only_counts_the_round():
    state = ArbiterState(fs("g0"))
    new, out = run_round(
        state,
        offered=EMPTY,
        bids=[Bid("a", {EMPTY: 3.0})],
        participants=["a"],
        non_participants=["b"],
        now=0.0,
        seed=0,
    )
    assert out.granted == ()
    assert new.leases == ()
    assert new.round == 1


def _leftover_recipients(seed: int):
    bids, offered = random_instance(TESTBED, apps=4, gpus=16, rows=8, seed=4)
    _, out = run_round(
        ArbiterState(TESTBED.gpu_ids),
        offered=offered,
        bids=bids,
        participants=[b.app_id for b in bids],
        non_participants=["np-0", "np-1", "np-2"],
        now=0.0,
        seed=seed,
    )
    return sorted(
        (lo.app_id, tuple(sorted(lo.gpus)), lo.start)
        for lo in out.granted
        if lo.source is LeaseSource.LEFTOVER
    )


def test_same_seed_same_leftover_recipients_other_seed_can_differ():
    base = _leftover_recipients(0)
    assert base  # the instance has leftover
    assert _leftover_recipients(0) == base
    differing = next((s for s in range(1, 50) if _leftover_recipients(s) != base), None)
    assert differing is not None
    # the differing seed is itself reproducible
    assert _leftover_recipients(differing) == _leftover_recipients(differing)
