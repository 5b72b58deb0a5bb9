"""The ZooKeeper journal (arbiter.zk_journal) on a real ZooKeeper: the same round trip as the
SQLite journal, and fencing: once another arbiter claims the epoch, a deposed one commits
nothing (every write is a multi() checking the epoch znode's version)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from arbiter.auction import Bid
from arbiter.journal import AppRecord, JournalCorrupt
from arbiter.rounds import ArbiterState, Lease, LeaseSource
from arbiter.sqlite_store import StoreError
from arbiter.zk_journal import Fenced, ZooKeeperJournal, claim_epoch, current_epoch

pytestmark = pytest.mark.failover

GPUS = frozenset(f"m{m}/g{g}" for m in range(2) for g in range(4))
ROOT = "/yarn-arbiter/test"


@pytest.fixture
def client(zookeeper) -> Iterator[KazooClient]:
    zk = KazooClient(hosts=zookeeper.address, timeout=5.0)
    zk.start(timeout=30)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


def _state(rnd: int, *leases: Lease) -> ArbiterState:
    return ArbiterState(gpus=GPUS, leases=leases, round=rnd)


def test_round_trip_like_the_sqlite_journal(client: KazooClient) -> None:
    epoch = claim_epoch(client, ROOT, "a1@127.0.0.1:1")
    j = ZooKeeperJournal(client, ROOT, epoch)
    assert j.load(GPUS).state.round == 0
    j.put_app(AppRecord("app-1", "h1", "n", "u", "q", 4, ({"id": "j1"},), 1.0))
    j.put_app(AppRecord("app-2", "h2", max_gpu_demand=2))
    lease1 = Lease("app-1", frozenset({"m0/g0", "m0/g1"}), 10.0, 610.0, 3, LeaseSource.AUCTION)
    lease2 = Lease("app-2", frozenset({"m1/g0"}), 10.0, 610.0, 3, LeaseSource.LEFTOVER)
    bid = Bid("app-1", {frozenset({"m0/g0"}): 2.5, frozenset(): math.inf})
    j.commit_round(_state(3, lease1, lease2), [bid], drained={"m1"})
    j.put_knob("arbiter.lease.seconds", "30")
    # another arbiter (another client, as after a failover) reads the same state back
    epoch2 = claim_epoch(client, ROOT, "a2@127.0.0.1:2")
    assert epoch2 == epoch + 1
    got = ZooKeeperJournal(client, ROOT, epoch2).load(GPUS)
    assert got.state.round == 3
    assert set(got.state.leases) == {lease1, lease2}
    assert got.apps["app-1"].jobs == ({"id": "j1"},) and got.apps["app-2"].token_hash == "h2"
    assert got.state.last_bids["app-1"].rows == bid.rows
    assert dict(got.knobs) == {"arbiter.lease.seconds": "30"} and got.drained == {"m1"}
    assert current_epoch(client, ROOT) == (epoch2, "a2@127.0.0.1:2")


def test_a_deposed_active_cannot_commit(client: KazooClient) -> None:
    old = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a1"))
    old.load(GPUS)
    old.put_app(AppRecord("app-1", "h1"))
    lease = Lease("app-1", frozenset({"m0/g0"}), 0.0, 100.0, 1, LeaseSource.AUCTION)
    old.commit_round(_state(1, lease))
    new = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a2"))
    before = new.load(GPUS)
    stolen = Lease("app-1", frozenset({"m0/g1"}), 0.0, 100.0, 2, LeaseSource.AUCTION)
    for write in (
        lambda: old.commit_round(_state(2, lease, stolen)),
        lambda: old.put_app(AppRecord("app-9", "h9")),
        lambda: old.remove_app("app-1"),
        lambda: old.put_knob("k", "v"),
        old.probe,
    ):
        with pytest.raises(Fenced, match="fenced"):
            write()
    after = new.load(GPUS)
    assert after.state == before.state and set(after.apps) == {"app-1"} and not after.knobs
    new.commit_round(_state(2, lease))  # the new active commits
    assert new.load(GPUS).state.round == 2


def test_remove_app_drops_its_leases_and_bids(client: KazooClient) -> None:
    j = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a1"))
    j.load(GPUS)
    for a in ("app-1", "app-2"):
        j.put_app(AppRecord(a, "h"))
    leases = (
        Lease("app-1", frozenset({"m0/g0"}), 0.0, 100.0, 1, LeaseSource.AUCTION),
        Lease("app-2", frozenset({"m0/g1"}), 0.0, 100.0, 1, LeaseSource.AUCTION),
    )
    j.commit_round(
        _state(1, *leases), [Bid("app-1", {frozenset({"m0/g0"}): 1.0, frozenset(): 5.0})]
    )
    j.remove_app("app-1")
    got = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a2")).load(GPUS)
    assert set(got.apps) == {"app-2"} and got.state.leases == (leases[1],)
    assert "app-1" not in got.state.last_bids


def test_bad_state_is_refused_and_unknown_gpus_corrupt(client: KazooClient) -> None:
    j = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a1"))
    j.load(GPUS)
    j.put_app(AppRecord("app-1", "h"))
    lease = Lease("app-1", frozenset({"m0/g0"}), 0.0, 100.0, 1, LeaseSource.AUCTION)
    j.commit_round(_state(1, lease))
    with pytest.raises(JournalCorrupt, match="zookeeper:"):
        j.load(frozenset({"x/g0"}))
    assert j.load(frozenset({"x/g0"}), trim_unknown=True).state.leases == ()


def test_an_unreachable_zookeeper_is_a_store_error(zookeeper, client: KazooClient) -> None:
    j = ZooKeeperJournal(client, ROOT, claim_epoch(client, ROOT, "a1"))
    j.load(GPUS)
    zookeeper.kill()
    with pytest.raises(StoreError, match="ZooKeeper"):
        j.put_knob("k", "v")
