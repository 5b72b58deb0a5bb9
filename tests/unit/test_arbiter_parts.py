"""Unit tests of the live arbiter's four parts, each on its own (no gRPC, sockets or threads).

:class:`arbiter.core.ArbiterCore` is a thin facade holding the lock over four parts; here each
part is driven directly, with the time passed explicitly as ``now``:

* :class:`~arbiter.sessions.AppSessions`: app tokens authenticate only their own app, admin
  tokens, reconnects (CLOSE on the old stream, resend on the new), silent Agents, removal from
  the journal, ρ reports;
* :class:`~arbiter.lease_book.LeaseBook`: the invariant-checked commit, release, renew, drain,
  resize, expiry, end of an app, attained GPU-seconds;
* :class:`~arbiter.share_hub.ShareHub`: QOOP's 1/|J| share with external jobs, epochs, the
  query-service credential, unregister, ``set_analytics``;
* :class:`~arbiter.scheduler.SchedulerLoop`: Themis's call for bids, bid validation, closing a
  round, binding a decision made by the real policy (:func:`arbiter.decider.decide_inline`),
  dropping a round whose GPUs changed or whose winner finished meanwhile, and a one-phase
  policy (fifo) granting leases.
"""

from __future__ import annotations

import itertools
import math
import queue
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from support import drain

from arbiter.auction import Bid
from arbiter.cluster import Cluster, load_cluster
from arbiter.config import Config, load_config
from arbiter.decider import decide_inline
from arbiter.journal import AppRecord, SQLiteJournal, hash_token, lease_id
from arbiter.lease_book import LeaseBook
from arbiter.messages import CLOSE, Allocation, Code, Offer, Outbox, RequestError, Revocation
from arbiter.rounds import ArbiterState, InvariantViolation, Lease, LeaseSource
from arbiter.scheduler import SchedulerLoop, Work
from arbiter.sessions import AppSessions, Progress
from arbiter.share_hub import ShareHub
from arbiter.shares import Resources, ShareCause, ShareChange

ADMIN = "admin-token"
CLUSTER = load_cluster("nodes:2:2")  # node-000 and node-001, 2 GPUs each
N0G0, N0G1 = "node-000/s0/g0", "node-000/s0/g1"
N1G0, N1G1 = "node-001/s0/g0", "node-001/s0/g1"
NODE0, NODE1 = frozenset({N0G0, N0G1}), frozenset({N1G0, N1G1})


def token_of(app_id: str) -> str:
    return f"token-of-{app_id}"


def record(app_id: str, demand: int = 2, registered_at: float = 0.0) -> AppRecord:
    return AppRecord(
        app_id, hash_token(token_of(app_id)), app_id, "u", "default", demand, (), registered_at
    )


def sessions_with(*apps: AppRecord, journal: SQLiteJournal | None = None) -> AppSessions:
    s = AppSessions({}, journal or SQLiteJournal(":memory:"), admin_token=ADMIN)
    for app in apps:
        s.add(app)
    return s


def new_book(*leases: Lease, now: float = 0.0, cluster: Cluster = CLUSTER) -> LeaseBook:
    book = LeaseBook(ArbiterState(cluster.gpu_ids), SQLiteJournal(":memory:"), now=now)
    if leases:
        book.commit(ArbiterState(cluster.gpu_ids, tuple(leases), 1), now=now)
    return book


def lease(app: str, gpus: frozenset[str], start: float, end: float, rnd: int = 1) -> Lease:
    return Lease(app, gpus, start, end, rnd)


def code_of(exc: pytest.ExceptionInfo[RequestError]) -> Code:
    return exc.value.code


def messages(q: object) -> list[object]:
    assert isinstance(q, queue.Queue)
    return drain(q)


# ====================================================================== AppSessions


def test_sessions_token_authenticates_only_its_own_app() -> None:
    s = sessions_with(record("a"), record("b"))
    assert s.authenticate_app(token_of("a")) == "a"
    assert s.authenticate_app(token_of("b")) == "b"
    s.authorize_app(token_of("a"), "a")
    with pytest.raises(RequestError) as exc:
        s.authorize_app(token_of("a"), "b")
    assert code_of(exc) is Code.PERMISSION_DENIED
    for bad in (None, "", "not-a-token"):
        with pytest.raises(RequestError) as exc:
            s.authenticate_app(bad)
        assert code_of(exc) is Code.UNAUTHENTICATED


def test_sessions_admin_token() -> None:
    s = sessions_with(record("a"))
    s.authorize_admin(ADMIN)
    with pytest.raises(RequestError) as exc:
        s.authorize_admin("wrong")
    assert code_of(exc) is Code.PERMISSION_DENIED
    with pytest.raises(RequestError) as exc:
        s.authorize_admin(token_of("a"))  # an app token is no admin token
    assert code_of(exc) is Code.PERMISSION_DENIED
    with pytest.raises(RequestError) as exc:
        s.authorize_admin(None)
    assert code_of(exc) is Code.UNAUTHENTICATED


def test_sessions_reconnect_closes_old_outbox_and_resends() -> None:
    s = sessions_with(record("a"))
    old = s.open("a", now=0.0)
    s.send("a", "first")
    new = s.open("a", now=5.0, resend=["r1", "r2"])
    assert new is not old
    assert messages(old) == ["first", CLOSE]
    assert messages(new) == ["r1", "r2"]
    s.send("a", "later")
    assert messages(new) == ["later"] and messages(old) == []
    # the old stream ending must not close the new session
    s.close("a", old)
    assert s.members() == ["a"] and s.sessions["a"].last_seen == 5.0
    s.close("a", new)
    assert s.members() == []


def test_sessions_open_uses_given_outbox() -> None:
    s = sessions_with(record("a"))
    mine: queue.Queue[object] = queue.Queue()
    assert s.open("a", mine, now=1.0, resend=["x"]) is mine
    assert messages(mine) == ["x"]


def test_sessions_silent_drops_only_agents_past_timeout_and_forgets_their_rho() -> None:
    s = sessions_with(record("a"), record("b"), record("c"))
    qa, qb, qc = (s.open(x, now=0.0) for x in "abc")
    s.report_rho("a", 2.0, now=1.0)
    s.report_rho("b", 3.0, now=1.0)
    s.heartbeat("b", now=20.0)
    s.heartbeat("c", now=11.0)  # silent exactly the timeout at t=41: kept (strictly past)
    s.report_progress("a", 1, 9, 2.0, now=1.0)
    assert s.silent(now=41.0, timeout=30.0) == ["a"]
    assert s.members() == ["b", "c"]
    assert messages(qa) == [CLOSE] and messages(qb) == [] and messages(qc) == []
    assert s.rho_reports == {"b": 3.0}
    assert s.progress["a"] == Progress(1.0, 9.0, 2.0)  # progress is not a session's state
    assert s.silent(now=41.5, timeout=30.0) == ["c"]


def test_sessions_heartbeat_and_send_without_session_are_no_ops() -> None:
    s = sessions_with(record("a"))
    s.heartbeat("a", now=3.0)
    s.send("a", "lost")
    assert s.sessions == {}
    # a session of an app not (or no longer) registered is not a member
    s.open("ghost", now=0.0)
    s.open("a", now=0.0)
    assert s.members() == ["a"]


def test_sessions_report_rho_validates_and_counts_as_heartbeat() -> None:
    s = sessions_with(record("a"))
    s.open("a", now=0.0)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(RequestError) as exc:
            s.report_rho("a", bad, now=5.0)
        assert code_of(exc) is Code.INVALID_ARGUMENT
    assert s.rho_reports == {} and s.sessions["a"].last_seen == 0.0
    s.report_rho("a", 1.5, now=7.0)
    assert s.rho_reports == {"a": 1.5} and s.sessions["a"].last_seen == 7.0


def test_sessions_remove_deletes_journaled_record(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    s = sessions_with(record("a"), record("b"), journal=SQLiteJournal(path))
    q = s.open("a", now=0.0)
    s.report_rho("a", 2.0, now=0.0)
    s.report_progress("a", 1, 2, 3.0, now=0.0)
    assert s.remove("a") == record("a")
    assert messages(q) == [CLOSE]
    assert "a" not in s.apps and s.rho_reports == {} and s.progress == {}
    with pytest.raises(RequestError) as exc:
        s.authenticate_app(token_of("a"))
    assert code_of(exc) is Code.UNAUTHENTICATED
    assert s.remove("a") is None  # idempotent
    # a restart reads the journal: only b is back, and its token still works
    apps = SQLiteJournal(path).load(CLUSTER.gpu_ids).apps
    assert set(apps) == {"b"}
    again = AppSessions(apps, SQLiteJournal(path), admin_token=ADMIN)
    assert again.authenticate_app(token_of("b")) == "b"


# ====================================================================== LeaseBook


def test_book_commit_with_gpu_in_two_live_leases_raises_and_changes_nothing(
    tmp_path: Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    for app in ("a", "b"):
        journal.put_app(record(app))
    book = LeaseBook(ArbiterState(CLUSTER.gpu_ids), journal, now=0.0)
    first = ArbiterState(CLUSTER.gpu_ids, (lease("a", NODE0, 0.0, 100.0),), 1)
    book.commit(first, now=0.0)
    clash = replace(
        first, leases=(*first.leases, lease("b", frozenset({N0G1}), 50.0, 150.0)), round=2
    )
    with pytest.raises(InvariantViolation):
        book.commit(clash, now=60.0)
    assert book.state is first
    assert SQLiteJournal(tmp_path / "j.db").load(CLUSTER.gpu_ids).state.leases == first.leases
    unknown = replace(first, leases=(lease("b", frozenset({"nowhere/s0/g0"}), 0.0, 1.0),))
    with pytest.raises(InvariantViolation):
        book.commit(unknown, now=60.0)
    assert book.state is first
    # touching leases (one ends when the next starts) are fine
    book.commit(replace(first, leases=(*first.leases, lease("b", NODE0, 100.0, 200.0))), now=1.0)
    assert len(book.state.leases) == 2


def test_book_release_part_of_a_lease_keeps_the_rest() -> None:
    both = lease("a", NODE0 | NODE1, 0.0, 100.0)
    book = new_book(both)
    assert book.offerable(10.0, CLUSTER) == frozenset()
    assert book.release("a", lease_id(both), frozenset({N0G0}), 10.0) == {N0G0}
    (rest,) = book.state.leases
    assert rest.gpus == both.gpus - {N0G0} and (rest.start, rest.end) == (0.0, 100.0)
    assert book.held("a", 10.0) == rest.gpus
    assert book.offerable(10.0, CLUSTER) == {N0G0}
    assert book.first_freed_at == 10.0
    rid = lease_id(rest)
    for app, lid, gpus, code in (
        ("a", rid, frozenset({N0G0}), Code.INVALID_ARGUMENT),  # already given back
        ("b", rid, frozenset(), Code.PERMISSION_DENIED),
        ("a", "0123456789abcdef", frozenset(), Code.NOT_FOUND),
    ):
        with pytest.raises(RequestError) as exc:
            book.release(app, lid, gpus, 11.0)
        assert code_of(exc) is code
    assert book.state.leases == (rest,)
    # no GPUs named: the whole lease; first_freed_at keeps the first time
    assert book.release("a", rid, frozenset(), 12.0) == rest.gpus
    assert book.state.leases == () and book.first_freed_at == 10.0


def test_book_renew_refused_on_drained_machine_and_when_others_wait() -> None:
    x = lease("a", NODE0, 0.0, 100.0)
    y = lease("a", NODE1, 0.0, 100.0, rnd=2)
    book = new_book(x, y)
    with pytest.raises(RequestError) as exc:
        book.renew("a", lease_id(x), now=50.0, cluster=CLUSTER, waiting=1, seconds=600.0)
    assert code_of(exc) is Code.FAILED_PRECONDITION and "wait" in exc.value.message
    longer = book.renew("a", lease_id(x), now=50.0, cluster=CLUSTER, waiting=0, seconds=600.0)
    assert (longer.start, longer.end, longer.gpus) == (0.0, 650.0, NODE0)  # 600 s from now
    assert longer in book.state.leases and x not in book.state.leases
    again = book.renew("a", lease_id(longer), now=51.0, cluster=CLUSTER, waiting=0, seconds=600.0)
    assert again.end == 651.0  # renewals do not stack
    longer = again
    book.drain("node-001", 1000.0, now=60.0, cluster=CLUSTER)  # grace past its term: no cut
    assert y in book.state.leases
    with pytest.raises(RequestError) as exc:
        book.renew("a", lease_id(y), now=60.0, cluster=CLUSTER, waiting=0, seconds=600.0)
    assert code_of(exc) is Code.FAILED_PRECONDITION and "node-001" in exc.value.message
    with pytest.raises(RequestError) as exc:
        book.renew("b", lease_id(longer), now=60.0, cluster=CLUSTER, waiting=0, seconds=1.0)
    assert code_of(exc) is Code.PERMISSION_DENIED


def test_book_renew_over_a_reserved_later_lease_is_a_request_error() -> None:
    mine = lease("a", frozenset({N0G0}), 0.0, 10.0)
    later = lease("b", frozenset({N0G0}), 10.0, 20.0)  # b's leftover, from a's end on
    book = new_book(mine, later)
    with pytest.raises(RequestError) as exc:
        book.renew("a", lease_id(mine), now=5.0, cluster=CLUSTER, waiting=0, seconds=100.0)
    assert code_of(exc) is Code.FAILED_PRECONDITION
    assert book.state.leases == (mine, later)


def test_book_drain_cuts_only_the_drained_machines_gpus() -> None:
    span = lease("a", NODE0 | NODE1, 0.0, 600.0)
    book = new_book(span)
    revs = book.drain("node-000", 30.0, now=100.0, cluster=CLUSTER)
    (r,) = revs
    assert isinstance(r, Revocation)
    assert r.lease == replace(span, gpus=NODE0, end=130.0) and r.grace_seconds == 30.0
    assert r.original == span and r.remainder == replace(span, gpus=NODE1)
    assert set(book.state.leases) == {r.lease, r.remainder}
    assert book.drained == {"node-000"}
    assert book.held("a", 129.0) == NODE0 | NODE1 and book.held("a", 130.0) == NODE1
    # the drained machine's GPUs are never offered again, even once free
    assert book.offerable(131.0, CLUSTER) == frozenset()
    book.expire(131.0)
    assert book.offerable(131.0, CLUSTER) == frozenset()
    assert book.state.leases == (r.remainder,)


def test_book_drain_leaves_leases_ending_within_grace_and_other_machines() -> None:
    soon = lease("a", NODE0, 0.0, 110.0)
    other = lease("b", NODE1, 0.0, 600.0)
    book = new_book(soon, other)
    assert book.drain("node-000", 30.0, now=100.0, cluster=CLUSTER) == []
    assert set(book.state.leases) == {soon, other}


def test_book_resize_ends_leases_on_removed_gpus() -> None:
    span = lease("a", NODE0 | NODE1, 0.0, 600.0)
    book = new_book(span)
    book.drain("node-001", 1000.0, now=1.0, cluster=CLUSTER)
    smaller = load_cluster("nodes:1:2")  # node-001 is gone
    revs = book.resize(smaller, NODE1, now=50.0)
    (r,) = revs
    assert r.lease == replace(span, gpus=NODE1, end=50.0) and r.grace_seconds == 0.0
    assert r.original == span and r.remainder == replace(span, gpus=NODE0)
    assert book.state.leases == (r.remainder,)  # the cut part ends now: not kept
    assert book.state.gpus == smaller.gpu_ids
    assert book.drained == set()  # a machine that left is no longer "drained"


def test_book_attained_gpu_seconds_accrue_across_a_commit() -> None:
    x = lease("a", NODE0, 0.0, 100.0)
    book = new_book(x, now=0.0)
    assert book.attained_by("a", 10.0) == pytest.approx(20.0)  # 2 GPUs x 10 s
    book.release("a", lease_id(x), frozenset({N0G0}), 30.0)  # 60 GPU-s accrued at the cut
    assert book.attained == {"a": pytest.approx(60.0)}
    assert book.attained_by("a", 50.0) == pytest.approx(80.0)  # + 1 GPU x 20 s
    assert book.attained_by("a", 500.0) == pytest.approx(130.0)  # capped at the lease's end
    assert book.attained_by("b", 50.0) == 0.0
    book.expire(200.0)
    assert book.attained == {"a": pytest.approx(130.0)}
    assert book.attained_by("a", 300.0) == pytest.approx(130.0)


def test_book_expire_frees_gpus_and_sets_first_freed_at() -> None:
    book = new_book(lease("a", NODE0, 0.0, 10.0), lease("b", NODE1, 0.0, 20.0))
    book.expire(5.0)
    assert book.first_freed_at is None and len(book.state.leases) == 2
    book.expire(10.0)  # [start, end): gone at its end
    assert book.first_freed_at == 10.0 and book.offerable(10.0, CLUSTER) == NODE0
    book.expire(25.0)
    assert book.first_freed_at == 10.0  # the batch window counts from the first freed GPU
    assert book.state.leases == () and book.offerable(25.0, CLUSTER) == CLUSTER.gpu_ids


def test_book_reserved_later_lease_is_held_only_from_its_start() -> None:
    now_lease = lease("a", NODE0, 0.0, 10.0)
    later = lease("b", NODE0, 10.0, 20.0)
    book = new_book(now_lease, later)
    assert book.held("b", 5.0) == frozenset() and book.held("b", 10.0) == NODE0
    assert book.holdings(5.0) == {"a": NODE0}
    assert book.offerable(5.0, CLUSTER) == NODE1  # reserved GPUs are not offered
    assert book.offerable(10.0, CLUSTER) == NODE1


def test_book_end_app_ends_its_leases_only() -> None:
    book = new_book(lease("a", NODE0, 0.0, 100.0), lease("b", NODE1, 0.0, 100.0))
    assert book.end_app("a", 40.0) == NODE0
    assert [x.app_id for x in book.state.leases] == ["b"] and book.first_freed_at == 40.0
    assert book.end_app("a", 50.0) == frozenset()
    assert book.first_freed_at == 40.0


# ====================================================================== ShareHub

CAPACITY = Resources(64.0, 256_000.0)


def changes(q: object) -> list[ShareChange]:
    out = []
    for item in messages(q):
        assert isinstance(item, tuple)
        out.append(item[1])
    return out


def test_hub_share_is_one_over_j_with_external_jobs() -> None:
    hub = ShareHub(lambda: CAPACITY)
    job, _ = hub.register("q1")
    q = hub.subscribe(job)
    (first,) = changes(q)
    assert first.fair_share == CAPACITY and first.active_jobs == 1
    assert first.cause is ShareCause.SUBSCRIBED
    assert hub.set_analytics(3, None) is True
    (second,) = changes(q)
    assert second.active_jobs == 4 and second.cause is ShareCause.JOB_ARRIVED
    assert second.fair_share == Resources(16.0, 64_000.0)
    hub.register("q2")
    (third,) = changes(q)
    assert third.active_jobs == 5 and third.fair_share.vcores == pytest.approx(12.8)
    assert hub.set_analytics(1, None) is True
    assert changes(q)[0].cause is ShareCause.JOB_DEPARTED


def test_hub_epochs_strictly_increase() -> None:
    hub = ShareHub(lambda: CAPACITY)
    job, _ = hub.register("q1")
    q = hub.subscribe(job)
    other, _ = hub.register("q2")
    hub.subscribe(other)
    hub.set_analytics(2, None)
    hub.set_analytics(2, Resources(8.0, 1000.0))
    hub.unregister(other)
    epochs = [c.epoch for c in changes(q)]
    assert len(epochs) == 5
    assert all(a < b for a, b in itertools.pairwise(epochs))
    assert epochs[-1] == hub.epoch


def test_hub_wrong_service_token_registers_nothing() -> None:
    hub = ShareHub(lambda: CAPACITY, service_token="svc-secret")
    job, _ = hub.register("q1")
    q = hub.subscribe(job)
    changes(q)
    epoch = hub.epoch
    for wrong in ("nope", ""):
        with pytest.raises(RequestError) as exc:
            hub.register("evil", service_token=wrong)
        assert code_of(exc) is Code.UNAUTHENTICATED
    assert list(hub.queries) == [job] and hub.epoch == epoch and changes(q) == []
    via, _ = hub.register("ok", user="alice", service_token="svc-secret")
    assert hub.queries[via].via_service and hub.queries[via].user == "alice"
    assert not hub.queries[job].via_service
    # a hub that issued no service credential refuses every one
    bare = ShareHub(lambda: CAPACITY)
    with pytest.raises(RequestError) as exc:
        bare.register("q", service_token="svc-secret")
    assert code_of(exc) is Code.UNAUTHENTICATED and bare.queries == {}


def test_hub_authorize() -> None:
    hub = ShareHub(lambda: CAPACITY)
    job, token = hub.register("q1")
    _, other_token = hub.register("q2")
    hub.authorize(token, job)
    for tok, jid, code in (
        (other_token, job, Code.PERMISSION_DENIED),
        (None, job, Code.UNAUTHENTICATED),
        (token, "query-unknown", Code.NOT_FOUND),
    ):
        with pytest.raises(RequestError) as exc:
            hub.authorize(tok, jid)
        assert code_of(exc) is code


def test_hub_unregister_closes_subscribers_and_tells_the_others() -> None:
    hub = ShareHub(lambda: CAPACITY)
    gone, _ = hub.register("q1")
    stays, _ = hub.register("q2")
    q1a, q1b, q2 = hub.subscribe(gone), hub.subscribe(gone), hub.subscribe(stays)
    for q in (q1a, q1b, q2):
        messages(q)
    hub.unregister(gone)
    assert messages(q1a) == [CLOSE] and messages(q1b) == [CLOSE]
    (change,) = changes(q2)
    assert change.cause is ShareCause.JOB_DEPARTED and change.active_jobs == 1
    assert change.fair_share == CAPACITY
    assert hub.subscribers() == 1
    with pytest.raises(RequestError) as exc:
        hub.unregister(gone)
    assert code_of(exc) is Code.NOT_FOUND


def test_hub_set_analytics_without_change_returns_false() -> None:
    hub = ShareHub(lambda: CAPACITY)
    job, _ = hub.register("q1")
    q = hub.subscribe(job)
    changes(q)
    epoch = hub.epoch
    assert hub.set_analytics(0, None) is False
    assert hub.set_analytics(2, Resources(8.0, 800.0)) is True
    assert hub.set_analytics(2, Resources(8.0, 800.0)) is False
    assert len(changes(q)) == 1 and hub.epoch == epoch + 1
    with pytest.raises(RequestError) as exc:
        hub.set_analytics(-1, None)
    assert code_of(exc) is Code.INVALID_ARGUMENT
    assert hub.external_jobs == 2


def test_hub_capacity_from_the_resource_manager_overrides_the_declared_one() -> None:
    declared = [CAPACITY]
    hub = ShareHub(lambda: declared[0])
    job, _ = hub.register("q1")
    q = hub.subscribe(job)
    changes(q)
    hub.set_analytics(0, Resources(10.0, 100.0))
    (c,) = changes(q)
    assert c.cause is ShareCause.CAPACITY_CHANGED and c.fair_share == Resources(10.0, 100.0)
    assert hub.capacity() == Resources(10.0, 100.0)
    hub.set_analytics(0, None)  # back to the declared cluster, read afresh
    declared[0] = Resources(32.0, 128.0)
    assert hub.capacity() == Resources(32.0, 128.0)
    hub.broadcast(ShareCause.CAPACITY_CHANGED)
    assert changes(q)[-1].fair_share == Resources(32.0, 128.0)


def test_hub_unsubscribe_stops_delivery() -> None:
    hub = ShareHub(lambda: CAPACITY)
    job, _ = hub.register("q1")
    a, b = hub.subscribe(job), hub.subscribe(job)
    messages(a), messages(b)
    hub.unsubscribe(job, a)
    hub.unsubscribe("query-unknown", a)  # no-op
    hub.register("q2")
    assert messages(a) == [] and len(changes(b)) == 1 and hub.subscribers() == 1


# ====================================================================== SchedulerLoop


@dataclass
class Rig:
    """A scheduler loop over its own sessions and lease book."""

    loop: SchedulerLoop
    sessions: AppSessions
    book: LeaseBook
    config: Config
    cluster: Cluster

    def step(self, now: float) -> Work | None:
        return self.loop.step(now, self.config, self.cluster)


def rig(
    *apps: AppRecord,
    cluster: Cluster = CLUSTER,
    journal: SQLiteJournal | None = None,
    **settings: str,
) -> Rig:
    """``apps`` registered (not connected), both parts on one journal (as in ArbiterCore);
    ``settings`` override the config, keys spelled with ``__`` for ``.`` and ``_`` for ``-``."""
    config = load_config(environ={})
    for key, value in settings.items():
        config = config.with_value(key.replace("__", ".").replace("_", "-"), value)
    journal = journal or SQLiteJournal(":memory:")
    sessions = sessions_with(*apps, journal=journal)
    book = LeaseBook(ArbiterState(cluster.gpu_ids), journal, now=0.0)
    loop = SchedulerLoop(sessions, book)
    loop.configure(config)
    return Rig(loop, sessions, book, config, cluster)


def themis_rig(*apps: AppRecord, journal: SQLiteJournal | None = None) -> Rig:
    """Themis with every connected app bidding (f = 0), exact solves, a 2 s batch window,
    5 s bid deadline and 600 s leases (the defaults)."""
    return rig(
        *apps,
        journal=journal,
        arbiter__policy="themis",
        arbiter__themis__fairness_knob="0",
        arbiter__auction__time_budget__seconds="0",
        arbiter__heartbeat__timeout__seconds="1000",
    )


def offered_round(r: Rig, *connected: str) -> dict[str, Outbox]:
    """Connect ``connected`` at t=0 and step past the batch window (t=2): the call is out."""
    outs = {a: r.sessions.open(a, now=0.0) for a in connected}
    assert r.step(0.0) is None
    assert r.step(2.0) is None
    assert r.loop.pending is not None
    return outs


def test_loop_themis_offers_free_gpus_to_participants_after_batch_window() -> None:
    r = themis_rig(record("a"), record("b"), record("c"))
    qa, qb = r.sessions.open("a", now=0.0), r.sessions.open("b", now=0.0)
    assert r.step(0.0) is None
    assert r.loop.pending is None and messages(qa) == [] and messages(qb) == []
    assert r.book.first_freed_at == 0.0
    assert r.step(1.9) is None and r.loop.pending is None  # still inside the window
    assert r.step(2.0) is None
    p = r.loop.pending
    assert p is not None and set(p.participants) == {"a", "b"} and p.offered == CLUSTER.gpu_ids
    offer = Offer(1, CLUSTER.gpu_ids, 600.0, 7.0)
    assert messages(qa) == [offer] and messages(qb) == [offer]
    assert "c" not in p.participants + p.others  # registered, not connected


def test_loop_themis_no_offer_when_no_app_has_room_or_no_gpu_is_free() -> None:
    r = themis_rig(record("a", demand=2))
    r.book.commit(ArbiterState(CLUSTER.gpu_ids, (lease("a", NODE0, 0.0, 600.0),), 1), now=0.0)
    qa = r.sessions.open("a", now=0.0)
    for t in (0.0, 5.0, 10.0):
        assert r.step(t) is None
    assert r.loop.pending is None and messages(qa) == []
    full = themis_rig(record("a", demand=4), record("b", demand=4))
    full.book.commit(
        ArbiterState(CLUSTER.gpu_ids, (lease("b", NODE0 | NODE1, 0.0, 600.0),), 1), now=0.0
    )
    q = full.sessions.open("a", now=0.0)
    for t in (0.0, 5.0, 10.0):
        assert full.step(t) is None
    assert full.loop.pending is None and messages(q) == []


def test_loop_bid_refusals_carry_the_right_code() -> None:
    r = themis_rig(record("a", demand=2), record("b", demand=2), record("c", demand=2))
    offered_round(r, "a", "b")
    ok = Bid("a", {frozenset(): 4.0, NODE0: 1.0})

    def refused(app: str, rnd: int, bid: Bid, limit: int = 32) -> Code:
        with pytest.raises(RequestError) as exc:
            r.loop.submit_bid(app, rnd, bid, now=3.0, limit=limit)
        return code_of(exc)

    assert refused("a", 2, ok) is Code.FAILED_PRECONDITION  # not the open round
    assert refused("c", 1, Bid("c", {frozenset(): 4.0})) is Code.PERMISSION_DENIED
    assert refused("a", 1, ok, limit=1) is Code.INVALID_ARGUMENT  # 2 rows > 1
    three = frozenset({N0G0, N0G1, N1G0})
    assert refused("a", 1, Bid("a", {frozenset(): 4.0, three: 1.0})) is Code.INVALID_ARGUMENT
    stray = frozenset({"node-009/s0/g0"})
    assert refused("a", 1, Bid("a", {frozenset(): 4.0, stray: 1.0})) is Code.INVALID_ARGUMENT
    assert r.loop.pending is not None and r.loop.pending.bids == {}
    r.loop.submit_bid("a", 1, ok, now=3.0, limit=32)
    assert refused("a", 1, ok) is Code.ALREADY_EXISTS
    assert r.loop.pending.bids == {"a": ok}


def test_loop_no_open_round_refuses_bids() -> None:
    r = themis_rig(record("a"))
    with pytest.raises(RequestError) as exc:
        r.loop.submit_bid("a", 1, Bid("a", {frozenset(): 1.0}), now=0.0, limit=32)
    assert code_of(exc) is Code.FAILED_PRECONDITION


def test_loop_round_closes_when_all_bid_or_at_deadline() -> None:
    r = themis_rig(record("a"), record("b"))
    offered_round(r, "a", "b")
    bid_a = Bid("a", {frozenset(): 4.0, NODE0: 1.0})
    r.loop.submit_bid("a", 1, bid_a, now=3.0, limit=32)
    assert r.step(3.0) is None  # b has not answered, deadline 7
    assert r.loop.pending is not None
    work = r.step(7.0)
    assert work is not None and r.loop.pending is None and r.book.first_freed_at is None
    assert work.round.round == 1 and work.snapshot.bids == {"a": bid_a}
    assert work.snapshot.offerable == CLUSTER.gpu_ids and work.snapshot.now == 7.0
    assert set(work.snapshot.rho) == {"a", "b"} and work.snapshot.demand == {"a": 2, "b": 2}
    assert work.policy is r.loop.configure(r.config)  # same knobs: same policy object


def test_loop_bind_commits_leases_and_sends_allocation_with_payment() -> None:
    r = themis_rig(record("a"), record("b"))
    outs = offered_round(r, "a", "b")
    for q in outs.values():
        messages(q)
    bids = {
        "a": Bid("a", {frozenset(): 4.0, NODE0: 1.0, NODE1: 1.5}),
        "b": Bid("b", {frozenset(): 4.0, NODE0: 1.2, NODE1: 2.0}),
    }
    for app, bid in bids.items():
        r.loop.submit_bid(app, 1, bid, now=3.0, limit=32)
    r.sessions.report_rho("a", 3.0, now=3.0)
    work = r.step(3.0)  # every participant answered: closes before the deadline
    assert work is not None and work.snapshot.bids == bids
    decision = decide_inline(work.policy, work.snapshot)
    assert decision.outcome is not None and decision.outcome.granted
    r.loop.bind(work.round, decision, now=4.0)
    state = r.book.state
    assert state.leases == decision.outcome.granted and state.round == 1
    assert dict(state.last_bids) == bids
    assert "a" not in r.sessions.rho_reports  # ρ now comes from the kept table
    c = decision.outcome.result.c
    for app, q in outs.items():
        mine = tuple(x for x in state.leases if x.app_id == app)
        got = messages(q)
        if mine:
            (msg,) = got
            assert isinstance(msg, Allocation) and (msg.round, msg.leases) == (1, mine)
            assert msg.hidden_payment == pytest.approx(1.0 - c.get(app, 1.0))
            assert 0.0 <= 1.0 - c.get(app, 1.0) < 1.0
        else:
            assert got == []
    # proportional fairness maximises the product of 1/ρ: a on node-001 (1.5) and b on
    # node-000 (1.2) beat the other way round (1.0 x 2.0); a's presence costs b, so b pays
    assert r.book.held("a", 4.0) == NODE1 and r.book.held("b", 4.0) == NODE0
    assert c["a"] == pytest.approx(1.0) and 0.0 < 1.0 - c["b"] < 1.0
    assert r.loop.rho_current("a", 4.0) == 1.5  # what its kept table says of node-001
    assert r.loop.policy_state is decision.policy_state


def test_loop_bind_of_outcome_whose_gpus_were_leased_meanwhile_drops_the_round() -> None:
    r = themis_rig(record("a"), record("b"))
    outs = offered_round(r, "a", "b")
    for q in outs.values():
        messages(q)
    r.loop.submit_bid("a", 1, Bid("a", {frozenset(): 4.0, NODE0: 1.0}), now=3.0, limit=32)
    r.loop.submit_bid("b", 1, Bid("b", {frozenset(): 4.0, NODE1: 1.0}), now=3.0, limit=32)
    work = r.step(3.0)
    assert work is not None
    decision = decide_inline(work.policy, work.snapshot)
    assert decision.outcome is not None
    # while it was decided, node-000 went to x (say a drain's reshuffle or a release/regrant)
    meanwhile = ArbiterState(CLUSTER.gpu_ids, (lease("x", NODE0, 3.5, 600.0, rnd=0),), 0)
    r.book.commit(meanwhile, now=3.5)
    assert r.book.first_freed_at is None
    r.loop.bind(work.round, decision, now=4.0)
    assert r.book.state is meanwhile  # nothing of the round was bound
    assert r.book.first_freed_at == 4.0  # the GPUs are offered again
    assert all(messages(q) == [] for q in outs.values())


def test_loop_bind_without_outcome_counts_the_round() -> None:
    r = themis_rig(record("a"))
    outs = offered_round(r, "a")
    messages(outs["a"])
    work = r.step(7.0)  # deadline passed, nobody bid
    assert work is not None and work.snapshot.bids == {}
    decision = decide_inline(work.policy, work.snapshot)
    assert decision.outcome is None and decision.closed_round == 1
    r.loop.bind(work.round, decision, now=7.5)
    assert r.book.state.round == 1 and r.book.state.leases == ()
    assert messages(outs["a"]) == []
    r.loop.undecided(8.0)
    assert r.loop.policy_state is None and r.book.first_freed_at == 8.0


def test_loop_step_drops_silent_agents_and_ends_their_leases() -> None:
    r = rig(
        record("a"), record("b"),
        arbiter__policy="themis", arbiter__heartbeat__timeout__seconds="30",
    )  # fmt: skip
    r.book.commit(
        ArbiterState(
            CLUSTER.gpu_ids,
            (lease("a", NODE0, 0.0, 600.0), lease("b", NODE1, 0.0, 600.0)),
            1,
        ),
        now=0.0,
    )
    qa, qb = r.sessions.open("a", now=0.0), r.sessions.open("b", now=0.0)
    r.sessions.heartbeat("b", now=20.0)
    r.step(40.0)
    assert messages(qa) == [CLOSE] and messages(qb) == []
    assert r.book.held("a", 40.0) == frozenset() and r.book.held("b", 40.0) == NODE1
    assert r.book.first_freed_at == 40.0


def test_loop_rho_current_sources() -> None:
    r = themis_rig(record("a"), record("b"), record("c"))
    table = Bid("b", {frozenset(): 4.0, frozenset({N1G0}): 2.5, NODE1: 1.5})
    leases = (lease("b", frozenset({N1G0}), 0.0, 600.0), lease("c", NODE0, 0.0, 600.0))
    r.book.commit(
        replace(ArbiterState(CLUSTER.gpu_ids, leases, 1), last_bids={"b": table}), now=0.0
    )
    assert r.loop.rho_current("a", 1.0) == math.inf  # holds nothing
    assert r.loop.rho_current("b", 1.0) == 2.5  # from its kept table
    assert r.loop.rho_current("c", 1.0) == 1.0  # holds GPUs, no table
    r.sessions.report_rho("c", 1.7, now=1.0)
    assert r.loop.rho_current("c", 1.0) == 1.7  # a report wins


def test_loop_configure_rebuilds_only_on_change_and_forgets_the_round() -> None:
    r = themis_rig(record("a"))
    same = r.loop.configure(r.config)
    assert r.loop.configure(r.config) is same
    offered_round(r, "a")
    changed = r.config.with_value("arbiter.themis.fairness-knob", "0.5")
    assert r.loop.configure(changed) is not same
    assert r.loop.pending is None and r.loop.policy_state is None


def test_loop_one_phase_fifo_grants_leases_and_sends_allocation() -> None:
    r = rig(
        record("a", demand=2, registered_at=1.0),
        record("b", demand=2, registered_at=2.0),
        record("c", demand=2, registered_at=3.0),
        arbiter__policy="fifo",
        arbiter__offer__batch_window__seconds="0",
        arbiter__lease__seconds="100",
    )
    outs = {a: r.sessions.open(a, now=0.0) for a in "abc"}
    assert r.step(10.0) is None and r.loop.pending is None
    state = r.book.state
    assert state.round == 1
    held = r.book.holdings(10.0)
    assert set(held) == {"a", "b"} and held["a"] | held["b"] == CLUSTER.gpu_ids
    for app in "ab":
        (msg,) = messages(outs[app])
        assert isinstance(msg, Allocation) and msg.round == 1 and msg.hidden_payment == 0.0
        (x,) = msg.leases
        assert x.gpus == held[app] and (x.start, x.end) == (10.0, 110.0)
        assert x.source is LeaseSource.POLICY and x in state.leases
        assert r.book.first_start[app] == 10.0
    assert messages(outs["c"]) == []  # first come, first served: no GPU left
    assert r.step(11.0) is None and r.book.state is state  # not due, nothing changed


def test_loop_one_phase_grant_of_a_gpu_still_leased_starts_when_that_lease_ends() -> None:
    r = rig(
        record("a", demand=4),
        record("x", demand=1),
        arbiter__policy="fifo",
        arbiter__offer__batch_window__seconds="0",
        arbiter__lease__seconds="100",
    )
    # x holds a GPU but has no session: the policy does not see it, and a keeps its lease
    r.book.commit(ArbiterState(CLUSTER.gpu_ids, (lease("x", frozenset({N0G0}), 0.0, 50.0),), 1),
                  now=0.0)  # fmt: skip
    q = r.sessions.open("a", now=0.0)
    r.step(10.0)
    (msg,) = messages(q)
    assert isinstance(msg, Allocation)
    starts = {x.start: x.gpus for x in msg.leases}
    assert starts == {10.0: CLUSTER.gpu_ids - {N0G0}, 50.0: frozenset({N0G0})}
    assert r.book.held("a", 49.0) == CLUSTER.gpu_ids - {N0G0}
    assert r.book.held("a", 50.0) == CLUSTER.gpu_ids


def test_loop_bind_skips_apps_removed_while_the_round_was_decided(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    r = themis_rig(record("a"), record("b"), journal=SQLiteJournal(path))
    offered_round(r, "a", "b")
    r.loop.submit_bid("a", 1, Bid("a", {frozenset(): 4.0, NODE0: 1.0}), now=3.0, limit=32)
    r.loop.submit_bid("b", 1, Bid("b", {frozenset(): 4.0, NODE1: 1.0}), now=3.0, limit=32)
    work = r.step(3.0)
    assert work is not None
    decision = decide_inline(work.policy, work.snapshot)
    assert decision.outcome is not None
    assert any(x.app_id == "a" for x in decision.outcome.granted)
    r.book.end_app("a", 3.5)  # what ArbiterCore.finish_app does, under the lock
    r.sessions.remove("a")
    r.loop.bind(work.round, decision, now=4.0)
    assert SQLiteJournal(path).load(CLUSTER.gpu_ids).state.leases == r.book.state.leases
    assert all(x.app_id in r.sessions.apps for x in r.book.state.leases)
