"""``arbiter.wire``: every protobuf <-> domain pair round-trips (hypothesis), and the one-way
conversions fill the fields the clients read."""

from __future__ import annotations

import math
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arbiter.auction import RHO_MAX, RHO_MIN, Bid
from arbiter.cluster import GPU, shorthand_cluster
from arbiter.journal import AppRecord, lease_id
from arbiter.messages import Allocation, ArbiterView, Code, Offer, RequestError, Revocation
from arbiter.rounds import Lease, LeaseSource
from arbiter.shares import Resources, ShareCause, ShareChange
from arbiter.wire import (
    allocation_to_pb,
    app_info_to_pb,
    bid_from_pb,
    bid_to_pb,
    cluster_state_to_pb,
    gpu_from_pb,
    gpu_to_pb,
    job_from_pb,
    job_to_pb,
    lease_from_pb,
    lease_source_from_pb,
    lease_source_to_pb,
    lease_to_pb,
    offer_from_pb,
    offer_to_pb,
    resources_from_pb,
    resources_to_pb,
    revocation_to_pb,
    session_error_to_pb,
    share_change_from_pb,
    share_change_to_pb,
)
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

CLUSTER = shorthand_cluster("nodes:3:4")

names = st.text(st.characters(codec="utf-8"), max_size=12)  # proto strings are UTF-8
gpu_ids = st.text("abcdefgh/0123", min_size=1, max_size=6)
doubles = st.floats(allow_nan=False)  # proto doubles carry every other float exactly
uint32 = st.integers(0, 2**32 - 1)
uint64 = st.integers(0, 2**64 - 1)
rhos = st.one_of(st.floats(RHO_MIN, RHO_MAX), st.just(math.inf))

gpus = st.builds(GPU, names, names, names, names, names)
leases = st.builds(
    Lease,
    app_id=names,
    gpus=st.frozensets(gpu_ids, max_size=6),
    start=doubles,
    end=doubles,
    round=uint64,
    source=st.sampled_from(LeaseSource),
)
resources = st.builds(Resources, doubles, doubles, doubles, doubles)
share_changes = st.builds(
    ShareChange, uint64, resources, uint32, st.sampled_from(ShareCause)
)  # fmt: skip


@st.composite
def bids(draw: st.DrawFn) -> Bid:
    rows = draw(st.dictionaries(st.frozensets(gpu_ids, min_size=1, max_size=4), rhos, max_size=6))
    return Bid(draw(st.text("app-0123456789", min_size=1, max_size=8)),
               {frozenset(): draw(rhos), **rows})  # fmt: skip


# -- AppMaster ---------------------------------------------------------------------------------


@given(gpus)
def test_gpu_round_trip(g: GPU) -> None:
    assert gpu_from_pb(gpu_to_pb(g)) == g


@given(st.sampled_from(LeaseSource))
def test_lease_source_round_trip(source: LeaseSource) -> None:
    assert lease_source_from_pb(lease_source_to_pb(source)) is source


def test_unknown_lease_source() -> None:
    assert lease_source_from_pb(pb.LEASE_SOURCE_UNSPECIFIED) is None
    assert lease_source_from_pb(99) is None


@given(leases)
def test_lease_round_trip(lease: Lease) -> None:
    msg = lease_to_pb(lease)
    assert msg.lease_id == lease_id(lease) and list(msg.gpu_ids) == sorted(lease.gpus)
    assert lease_from_pb(msg) == lease


def test_a_lease_of_unknown_source_reads_as_auction() -> None:
    msg = lease_to_pb(Lease("app-1", frozenset({"g"}), 1.0, 2.0, 3, LeaseSource.LEFTOVER))
    msg.source = pb.LEASE_SOURCE_UNSPECIFIED
    assert lease_from_pb(msg).source is LeaseSource.AUCTION


@given(st.fixed_dictionaries({"job_id": names, "gang_size": uint32, "max_gpus": uint32,
                              "iters_total": uint64, "serial_iter_time_s": doubles}))  # fmt: skip
def test_job_round_trip(job: dict[str, object]) -> None:
    assert job_from_pb(job_to_pb(job)) == job


def test_job_defaults_and_unknown_keys() -> None:
    msg = job_to_pb({"job_id": "main", "gang_size": 2, "max_gpus": 4})
    assert msg == pb.JobSpec(job_id="main", gang_size=2, max_gpus=4)
    with pytest.raises(ValueError, match="gpus"):
        job_to_pb({"job_id": "main", "gpus": 4})
    with pytest.raises(TypeError):
        job_to_pb({"gang_size": "two"})


@given(bids(), uint64)
def test_bid_round_trip(bid: Bid, round_no: int) -> None:
    msg = bid_to_pb(bid, round_no)
    assert msg.round == round_no and len(msg.rows) == len(bid.rows) - 1
    assert bid_from_pb(bid.app_id, msg) == bid


@pytest.mark.parametrize(
    ("msg", "field"),
    [
        (pb.Bid(rho_old=math.nan), "bid.rho_old"),
        (pb.Bid(rho_old=0.0), "bid.rho_old"),
        (pb.Bid(rho_old=1.0, rows=[pb.BidRow(gpu_ids=[], rho=1.0)]), "bid.rows[0].gpu_ids"),
        (pb.Bid(rho_old=1.0, rows=[pb.BidRow(gpu_ids=["a", "a"], rho=1.0)]), "bid.rows[0].gpu_ids"),
        (pb.Bid(rho_old=1.0, rows=[pb.BidRow(gpu_ids=["a"], rho=-1.0)]), "bid.rows[0].rho"),
        (pb.Bid(rho_old=1.0, rows=[pb.BidRow(gpu_ids=["a"], rho=1.0),
                                   pb.BidRow(gpu_ids=["a"], rho=2.0)]), "bid.rows[1]"),
        (pb.Bid(rho_old=1e300), "rho"),
    ],
)  # fmt: skip
def test_malformed_bids_are_refused_naming_the_field(msg: pb.Bid, field: str) -> None:
    with pytest.raises(RequestError) as err:
        bid_from_pb("app-1", msg)
    assert err.value.code is Code.INVALID_ARGUMENT and field in err.value.message


@settings(max_examples=50)
@given(st.frozensets(st.sampled_from([g.id for g in CLUSTER.gpus])), uint64, doubles, doubles)
def test_offer_round_trip(ids: frozenset[str], round_no: int, lease_s: float, due: float) -> None:
    offer = Offer(round_no, ids, lease_s, due)
    back, placed = offer_from_pb(offer_to_pb(offer, CLUSTER))
    assert back == offer
    assert placed == tuple(CLUSTER.gpu(g) for g in sorted(ids))


def test_allocation_to_pb() -> None:
    a = Lease("app-1", frozenset({"g1", "g0"}), 10.0, 20.0, 4)
    b = Lease("app-1", frozenset({"g2"}), 12.0, 20.0, 4, LeaseSource.LEFTOVER)
    msg = allocation_to_pb(Allocation(4, (a, b), 0.25))
    assert (msg.round, msg.hidden_payment) == (4, 0.25)
    assert [lease_from_pb(x) for x in msg.leases] == [a, b]
    assert [x.lease_id for x in msg.leases] == [lease_id(a), lease_id(b)]


def test_revocation_to_pb() -> None:
    original = Lease("app-1", frozenset({"g0", "g1"}), 0.0, 60.0, 2)
    cut = Lease("app-1", frozenset({"g1"}), 0.0, 35.0, 2)
    rest = Lease("app-1", frozenset({"g0"}), 0.0, 60.0, 2)
    msg = revocation_to_pb(Revocation(cut, 5.0, "drain", original, rest))
    assert (msg.lease_id, list(msg.gpu_ids), msg.grace_seconds, msg.reason) == (
        lease_id(cut), ["g1"], 5.0, "drain")  # fmt: skip
    assert msg.original_lease_id == lease_id(original)
    assert lease_from_pb(msg.remainder) == rest and msg.remainder.lease_id == lease_id(rest)
    bare = revocation_to_pb(Revocation(cut, 0.0, "policy"))
    assert bare.original_lease_id == "" and not bare.HasField("remainder")


def test_session_error_to_pb() -> None:
    msg = session_error_to_pb(RequestError(Code.FAILED_PRECONDITION, "round 3 is closed"))
    assert (msg.code, msg.message) == ("FAILED_PRECONDITION", "round 3 is closed")


# -- QueryShare --------------------------------------------------------------------------------


@given(resources)
def test_resources_round_trip(r: Resources) -> None:
    assert resources_from_pb(resources_to_pb(r)) == r


@given(names, share_changes)
def test_share_change_round_trip(job_id: str, change: ShareChange) -> None:
    msg = share_change_to_pb(job_id, change)
    assert msg.job_id == job_id
    assert share_change_from_pb(msg) == change


@pytest.mark.parametrize("cause", [pb.SHARE_CAUSE_UNSPECIFIED, 42])
def test_a_share_update_without_a_known_cause_is_refused(cause: int) -> None:
    with pytest.raises(ValueError, match="cause"):
        share_change_from_pb(pb.ShareUpdate(epoch=1, cause=cast(pb.ShareCause, cause)))


# -- Admin -------------------------------------------------------------------------------------


def test_cluster_state_to_pb() -> None:
    free = frozenset(g.id for g in CLUSTER.gpus[:3])
    view = ArbiterView(round=9, free=free, leases=(), apps={}, connected=frozenset(),
                       drained=frozenset({"node-002", "node-001"}), now=0.0, cluster=CLUSTER,
                       queries=0, subscribers=0, external_jobs=0, epoch=0)  # fmt: skip
    msg = cluster_state_to_pb(view, "themis")
    assert (msg.cluster_name, msg.round, msg.policy) == (CLUSTER.name, 9, "themis")
    assert [gpu_from_pb(g) for g in msg.gpus] == list(CLUSTER.gpus)
    assert list(msg.free_gpu_ids) == sorted(free)
    assert list(msg.drained_machines) == ["node-001", "node-002"]


def test_app_info_to_pb() -> None:
    app = AppRecord("app-1", "hash", "resnet", "ann", "ml", 8)
    msg = app_info_to_pb(app, rho=1.5, held=frozenset({"b", "a"}), connected=True)
    assert msg == pb.AppInfo(app_id="app-1", app_name="resnet", user="ann", queue="ml",
                             max_gpu_demand=8, rho=1.5, held_gpu_ids=["a", "b"],
                             connected=True)  # fmt: skip
