"""Faults and attacks on the arbiter over its real interface (gRPC on a real socket, the RM
emulator over HTTP, a real SQLite journal): each test reproduces one way the arbiter was
attacked or an operator was unlucky, and asserts what must hold.

The README's "Faults and attacks" table lists each with what happens.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from support import Clock, wait_for
from support.api import ADMIN, SERVICE, SMALL, SUBMIT, Api, md, serve, wait_held

from arbiter.auction import Bid
from arbiter.cluster import load_cluster
from arbiter.core import ArbiterCore
from arbiter.journal import AppRecord, SQLiteJournal, hash_token, new_token
from arbiter.policies.base import Decision, Policy, Snapshot
from arbiter.rounds import ArbiterState, Lease, LeaseSource
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_bridge.bridge_cli import Bridge, initial_cluster
from yarn_bridge.emulator import RMEmulator
from yarn_bridge.env import ML_APP_TAG
from yarn_bridge.rm_events import arbiter_app_tag

FAST = {"timeout": 1.0, "deadline": 2.0, "backoff": 0.02, "max_backoff": 0.1}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def arb(tmp_path: Path, clock: Clock) -> Iterator[RunningArbiter]:
    a = serve(tmp_path / "journal.db", clock)
    yield a
    a.stop(0)


@pytest.fixture
def api(arb: RunningArbiter) -> Iterator[Api]:
    client = Api(arb.port)
    yield client
    client.close()


def code(call, *args) -> grpc.StatusCode:
    """The status code ``call(*args)`` fails with (the test fails if it succeeds)."""
    with pytest.raises(grpc.RpcError) as exc:
        call(*args)
    return exc.value.code()


def app_ids(api: Api) -> set[str]:
    return {
        a.app_id for a in api.admin.ListApps(pb.ListAppsRequest(), metadata=md(admin=ADMIN)).apps
    }


# -- 1. a forged YARN tag ------------------------------------------------------------------------


def test_a_forged_yarn_tag_ends_no_app(tmp_path: Path, clock: Clock) -> None:
    """A YARN app tagged with another arbiter app's id that finishes must not finish that app:
    neither an app registered without a YARN application (a standalone AM) nor one bound to
    its own (test_yarn_bridge shows a bound app's own YARN application ending it)."""
    with RMEmulator(nodes=2, gpus_per_node=2, manual_clock=True, start_seconds=1,
                    app_seconds=60) as emu:  # fmt: skip
        a = serve(tmp_path / "journal.db", clock, initial_cluster(emu.url, rm_options=FAST))
        api = Api(a.port)
        try:
            real = emu.add_app(name="trainer", queue="ml", gpus=1, seconds=600,
                               tags=(ML_APP_TAG,))  # fmt: skip
            standalone, stok = api.register(2)
            bound_app, _ = api.register(1, yarn_application_id=real)
            session = api.session(standalone, stok)
            wait_held(api, standalone, 2, clock.t)
            for victim in (standalone, bound_app):
                emu.add_app(name="forged", queue="default", gpus=0, seconds=3,
                            tags=(ML_APP_TAG, arbiter_app_tag(victim)))  # fmt: skip
            bridge = Bridge(a.core, emu.url, poll_s=0.05, rm_options=FAST, slack_s=2.0)
            assert bridge.tick()
            emu.advance(10)  # the forged apps finish
            for _ in range(4):
                assert bridge.tick()
            assert {standalone, bound_app} <= app_ids(api)
            assert len(wait_held(api, standalone, 2, clock.t)) == 2
            bridge.stop()
            session.close()
        finally:
            api.close()
            a.stop(0)


# -- 2. RenewLease after a drain, and stacking --------------------------------------------------


def test_renew_neither_undoes_a_drain_nor_stacks(api: Api, clock: Clock) -> None:
    app, tok = api.register(2)
    s = api.session(app, tok)
    held = wait_held(api, app, 2, clock.t)
    machine = sorted(held)[0].split("/")[0]
    api.drain(machine, 5.0)
    clock.t += 1
    for x in api.leases(app):
        on_drained = any(g.startswith(machine + "/") for g in x.gpu_ids)
        if on_drained:
            for _ in range(3):
                assert code(api.renew, tok, x.lease_id) == grpc.StatusCode.FAILED_PRECONDITION
    clock.t += 10  # past the grace: the app is placed anew, off the drained machine
    held = wait_held(api, app, 2, clock.t)
    assert not any(g.startswith(machine + "/") for g in held)
    live = [x for x in api.leases(app) if x.end_unix_s > clock.t]
    lease_id = live[0].lease_id
    for _ in range(50):
        lease = api.renew(tok, lease_id)
        lease_id = lease.lease_id
        # a renewal gives one lease length from now, never more
        assert lease.end_unix_s <= clock.t + 60 + 1e-6
    s.close()


def test_renew_is_refused_while_a_registered_app_waits(api: Api, clock: Clock) -> None:
    """The "nobody waiting" check counts registered apps still within their heartbeat timeout,
    not only those whose session happens to be open (one reconnecting is still waiting)."""
    a, atok = api.register(4)
    s = api.session(a, atok)
    wait_held(api, a, 4, clock.t)
    api.register(1)  # waits: registered, not yet connected
    lease = api.leases(a)[0]
    assert code(api.renew, atok, lease.lease_id) == grpc.StatusCode.FAILED_PRECONDITION
    s.close()


# -- 3. an app finished while its round is solved ------------------------------------------------


class _Gate:
    """A decider that waits for the test before deciding (the solve outside the lock)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.go = threading.Event()

    def __call__(self, policy: Policy, snapshot: Snapshot) -> Decision:
        self.entered.set()
        assert self.go.wait(30)
        return policy.decide(snapshot)


def test_an_app_finished_during_a_solve_leaves_a_journal_that_loads(
    tmp_path: Path, clock: Clock
) -> None:
    from arbiter.config import load_config

    gate = _Gate()
    config = load_config(environ={"ARBITER_POLICY": "themis",
                                  "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
                                  "ARBITER_AUCTION_WORKER_PROCESS": "false"})  # fmt: skip
    path = tmp_path / "journal.db"
    core = ArbiterCore(SMALL, config, SQLiteJournal(path), admin_token=ADMIN, clock=clock,
                       decider=gate)  # fmt: skip
    a, _ = core.register_app(app_name="a", user="u", queue_name="q", max_gpu_demand=4)
    inbox = core.open_session(a)
    core.tick()  # call for bids
    offer = inbox.get_nowait()
    gpus = frozenset(sorted(g for g in offer.gpus))
    core.submit_bid(a, offer.round, Bid(a, {frozenset(): float("inf"), gpus: 1.0}))
    solving = threading.Thread(target=core.tick)
    solving.start()
    assert gate.entered.wait(30)
    core.finish_app(a, "killed while its round was solved")
    gate.go.set()
    solving.join(30)
    assert core.state.leases == ()
    core.journal.close()
    again = SQLiteJournal(path)
    recovered = again.load(SMALL.gpu_ids)
    assert recovered.state.leases == () and a not in recovered.apps
    again.close()


# -- 4. an app over its gang in its grace period ------------------------------------------------


@pytest.mark.parametrize("policy", ["fifo", "las", "tiresias"])
def test_an_app_in_grace_over_its_gang_freezes_no_policy(
    tmp_path: Path, clock: Clock, policy: str
) -> None:
    """An app of gang 4 that was placed anew on four GPUs while three it held before are in
    their grace period holds 7 > 4 (a release followed by a consolidating placement gets
    there): the policy must go on deciding, and a 1-GPU app gets a GPU that is free."""
    cluster = load_cluster("nodes:3:4")
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    big_token, small_token = new_token(), new_token()
    journal.put_app(AppRecord("app-big", hash_token(big_token), "big", "u", "q", 4))
    journal.put_app(AppRecord("app-small", hash_token(small_token), "small", "u", "q", 1, (), 1.0))
    n0 = sorted(g for g in cluster.gpu_ids if g.startswith("node-000"))
    n1 = frozenset(g for g in cluster.gpu_ids if g.startswith("node-001"))
    in_grace = Lease("app-big", frozenset(n0[1:]), clock.t - 10, clock.t + 50, 1)
    anew = Lease("app-big", n1, clock.t - 1, clock.t + 60, 2)
    journal.commit_round(ArbiterState(cluster.gpu_ids, (in_grace, anew), 2))
    journal.close()
    a = serve(path, clock, cluster, arbiter_policy=policy, arbiter_revocation_grace_seconds=60)
    api = Api(a.port)
    try:
        s = api.session("app-big", big_token)
        s2 = api.session("app-small", small_token)
        wait_held(api, "app-small", 1, clock.t)
        s.close()
        s2.close()
    finally:
        api.close()
        a.stop(0)


# -- 5. drains across a restart -----------------------------------------------------------------


def test_a_drain_survives_a_restart(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "journal.db"
    a = serve(path, clock)
    api = Api(a.port)
    api.drain("node-000", 0.0)
    assert list(api.state().drained_machines) == ["node-000"]
    api.close()
    a.stop(0)
    a = serve(path, clock)
    api = Api(a.port)
    try:
        assert list(api.state().drained_machines) == ["node-000"]
        app, tok = api.register(2)
        s = api.session(app, tok)
        held = wait_held(api, app, 2, clock.t)  # only node-001's two GPUs are offered
        assert all(g.startswith("node-001/") for g in held)
        s.close()
    finally:
        api.close()
        a.stop(0)


# -- the journal written by the previous release ---------------------------------------------


DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_journal_of_the_previous_release_opens_after_the_upgrade(tmp_path: Path) -> None:
    """``tests/data/journal-v1.db`` was written by the release before schema 2 (commit 9ea41a1,
    by ``tests/data/make_journal_v1.py``); it opens, upgraded in place, with everything in it."""
    import shutil
    import sqlite3

    from arbiter.journal import SCHEMA_VERSION

    path = tmp_path / "journal.db"
    shutil.copy(DATA / "journal-v1.db", path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (1,)
    journal = SQLiteJournal(path)
    got = journal.load(SMALL.gpu_ids)
    assert sorted(got.apps) == ["app-000000000001", "app-000000000002"]
    assert got.apps["app-000000000001"].yarn_app_id == "application_1_0001"
    assert got.apps["app-000000000001"].jobs == ({"job_id": "j1", "gang_size": 2},)
    assert sorted((x.app_id, x.end) for x in got.state.leases) == [
        ("app-000000000001", 1600.0),
        ("app-000000000002", 1601.0),
    ]
    assert got.state.round == 1 and set(got.state.last_bids) == {"app-000000000001"}
    assert dict(got.knobs) == {"arbiter.lease.seconds": "600"} and got.drained == frozenset()
    journal.commit_round(got.state, drained={"node-001"})  # the new table is there and used
    journal.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("2",)
    again = SQLiteJournal(path)  # opens again without a migration
    assert again.load(SMALL.gpu_ids).drained == frozenset({"node-001"})
    again.close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    from arbiter.journal import JournalCorrupt

    with pytest.raises(JournalCorrupt, match="schema version 3"):
        SQLiteJournal(path)  # a newer release's journal is refused, untouched
    older = tmp_path / "older.db"  # from before user_version: only the meta table says 1
    shutil.copy(DATA / "journal-v1.db", older)
    with sqlite3.connect(older) as db:
        db.execute("PRAGMA user_version=0")
    journal = SQLiteJournal(older)
    assert len(journal.load(SMALL.gpu_ids).apps) == 2
    journal.close()


# -- 6. admission: credentials, quotas, expiry, loopback ------------------------------------------


def _register_code(api: Api, **kwargs: object) -> grpc.StatusCode | None:
    try:
        api.register(1, **kwargs)  # type: ignore[arg-type]
    except grpc.RpcError as err:
        return err.code()
    return None


def test_grpc_listens_on_loopback_by_default(tmp_path: Path) -> None:
    """Not on every interface: the IPv6 loopback is another address than 127.0.0.1, and a
    server on [::] answered on it."""
    from arbiter.config import load_config

    env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db")}
    a = RunningArbiter(SMALL, load_config(environ=env), admin_token=ADMIN).start()
    try:
        assert a.core.config["arbiter.grpc.bind-host"] == "127.0.0.1"
        ok = Api(a.port)
        assert len(ok.state().gpus) == SMALL.num_gpus
        ok.close()
        with grpc.insecure_channel(f"[::1]:{a.port}") as other:
            stub = rpc.AdminStub(other)
            with pytest.raises(grpc.RpcError) as err:
                stub.GetClusterState(pb.ClusterStateRequest(), metadata=md(admin=ADMIN), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        a.stop(0)


def test_a_port_open_to_other_hosts_asks_every_registration_for_a_credential(
    tmp_path: Path, clock: Clock
) -> None:
    a = serve(tmp_path / "j.db", clock, arbiter_grpc_bind_host="0.0.0.0")
    api = Api(a.port)
    try:
        assert _register_code(api, token=None) == grpc.StatusCode.UNAUTHENTICATED  # anonymous
        assert _register_code(api, token="forged") == grpc.StatusCode.UNAUTHENTICATED
        assert _register_code(api) is None  # the submitters' credential
        reply = api.am.RegisterApp(pb.RegisterAppRequest(app_name="x", max_gpu_demand=1),
                                   metadata=md(admin=ADMIN))  # fmt: skip
        assert reply.app_id  # the admin credential, always
        with pytest.raises(grpc.RpcError) as err:
            api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="q"))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        via = api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="q", user="ann"),
                                      metadata=md(service=SERVICE))  # fmt: skip
        assert a.core.queries[via.job_id].via_service
        assert len(app_ids(api)) == 2 and len(a.core.queries) == 1  # the refused left nothing
    finally:
        api.close()
        a.stop(0)


@pytest.mark.parametrize(("mode", "anonymous_ok"), [("never", False), ("always", True)])
def test_anonymous_registration_setting(
    tmp_path: Path, clock: Clock, mode: str, anonymous_ok: bool
) -> None:
    a = serve(tmp_path / "j.db", clock, arbiter_admission_anonymous=mode,
              arbiter_grpc_bind_host="0.0.0.0" if anonymous_ok else "127.0.0.1")  # fmt: skip
    api = Api(a.port)
    try:
        got = _register_code(api, token=None)
        assert got == (None if anonymous_ok else grpc.StatusCode.UNAUTHENTICATED)
    finally:
        api.close()
        a.stop(0)


def test_registration_quotas_and_sizes(tmp_path: Path, clock: Clock) -> None:
    """The audit's 0.84 MB RegisterApp and unbounded apps per user are refused, and what is
    refused is neither kept nor journaled."""
    path = tmp_path / "j.db"
    a = serve(path, clock, arbiter_admission_max_apps_per_user=2,
              arbiter_admission_max_queries_per_user=2)  # fmt: skip
    api = Api(a.port)
    try:
        big = [pb.JobSpec(job_id="j" * 200, gang_size=1) for _ in range(4000)]  # ~0.84 MB
        with pytest.raises(grpc.RpcError) as err:
            api.am.RegisterApp(pb.RegisterAppRequest(app_name="x", max_gpu_demand=1, jobs=big),
                               metadata=md(submit=SUBMIT))  # fmt: skip
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit" in (err.value.details() or "")
        assert _register_code(api) is None and _register_code(api) is None
        assert _register_code(api) == grpc.StatusCode.RESOURCE_EXHAUSTED  # 3rd of user "u"
        assert _register_code(api, user="v") is None  # another user's first
        for k in range(3):
            try:
                api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="q", user="w"),
                                        metadata=md(submit=SUBMIT))  # fmt: skip
            except grpc.RpcError as e:
                assert k == 2 and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert len(a.core.queries) == 2
    finally:
        api.close()
        a.stop(0)
    again = SQLiteJournal(path)
    assert len(again.load(SMALL.gpu_ids).apps) == 3  # only the admitted ones were journaled
    again.close()


def test_an_abandoned_query_expires(tmp_path: Path, clock: Clock) -> None:
    """A query that registered and never listened (or stopped listening) leaves |J| after
    arbiter.query.idle-expiry.seconds: every real query's share comes back."""
    a = serve(tmp_path / "j.db", clock, arbiter_query_idle_expiry_seconds=60)
    api = Api(a.port)
    try:
        real = api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="real"),
                                       metadata=md(submit=SUBMIT))  # fmt: skip
        stream = api.share.SubscribeShare(pb.SubscribeShareRequest(job_id=real.job_id),
                                          metadata=md(app=real.job_token), timeout=60)  # fmt: skip
        assert next(stream).active_jobs == 1
        for _ in range(3):  # abandoned: registered, never subscribed
            api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="ghost"),
                                    metadata=md(submit=SUBMIT))  # fmt: skip
        assert [next(stream).active_jobs for _ in range(3)] == [2, 3, 4]
        clock.t += 61
        assert [next(stream).active_jobs for _ in range(3)] == [3, 2, 1]
        assert list(a.core.queries) == [real.job_id]  # the listening query stays
        stream.cancel()
    finally:
        api.close()
        a.stop(0)


def test_anonymous_registrations_cannot_take_the_room_of_credentialed_ones(
    tmp_path: Path, clock: Clock
) -> None:
    """The outsider's second try: anonymous registrations on the loopback port with a new
    invented user each time stop at arbiter.admission.max-anonymous; the submitters still
    register."""
    a = serve(tmp_path / "j.db", clock, arbiter_admission_max_anonymous=2)
    api = Api(a.port)
    try:
        got = [_register_code(api, token=None, user=f"invented-{k}") for k in range(3)]
        assert got == [None, None, grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert _register_code(api, user="real") is None  # with the submitters' credential
        codes = []
        for k in range(3):
            try:
                api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="q", user=f"i{k}"))
                codes.append(None)
            except grpc.RpcError as e:
                codes.append(e.code())
        assert codes == [None, None, grpc.StatusCode.RESOURCE_EXHAUSTED]
        api.share.RegisterQuery(pb.RegisterQueryRequest(query_name="q"), metadata=md(submit=SUBMIT))
    finally:
        api.close()
        a.stop(0)


def test_an_app_that_never_connects_is_removed(tmp_path: Path, clock: Clock) -> None:
    a = serve(tmp_path / "j.db", clock, arbiter_admission_app_idle_expiry_seconds=100)
    api = Api(a.port)
    try:
        ghost, _ = api.register(1)
        real, tok = api.register(1)
        s = api.session(real, tok)
        wait_held(api, real, 1, clock.t)
        clock.t += 101
        wait_for("the ghost app to go", lambda: ghost not in app_ids(api), timeout=30)
        assert real in app_ids(api)
        s.close()
    finally:
        api.close()
        a.stop(0)


# -- 7. a full or read-only journal volume ------------------------------------------------------


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs the test fills or makes read-only (a real file system: root cannot write
    a read-only mount either). Needs mount(8) and the right to mount (root, as CI runs)."""
    import subprocess

    mnt = tmp_path / "vol"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        # Only an unprivileged developer run may pass over these tests (mounting needs root);
        # as root (CI), a mount that fails is a failure, not a skip.
        assert os.geteuid() != 0, f"mount failed as root: {done.stderr.strip()}"
        pytest.skip(f"mounting a tmpfs needs root (euid {os.geteuid()}): {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:

    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.close(fd)


def _health(a: RunningArbiter) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return reply.status


def _healthz(a: RunningArbiter) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    assert a.metrics is not None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{a.metrics.port}/healthz", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _unwritable_journal_is_told_and_changes_nothing(
    a: RunningArbiter, api: Api, clock: Clock, recover
) -> None:
    from grpc_health.v1 import health_pb2

    lease = api.leases()[0]
    for call in (lambda: api.register(1), lambda: api.drain("node-001", 1.0),
                 lambda: api.admin.SetKnob(pb.SetKnobRequest(key="arbiter.lease.seconds",
                                                             value="7"), metadata=md(admin=ADMIN)),
                 lambda: api.release(TOKENS[lease.app_id], lease.lease_id)):  # fmt: skip
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "journal" in (err.value.details() or "")
    assert _health(a) == health_pb2.HealthCheckResponse.NOT_SERVING
    status, body = _healthz(a)
    assert status == 503 and "journal" in body
    assert list(api.state().drained_machines) == []  # the failed drain changed nothing
    assert a.core.config["arbiter.lease.seconds"] == 60.0  # nor the failed SetKnob
    assert [x.lease_id for x in api.leases()] == [lease.lease_id]  # nor the failed release
    clock.t += 120  # the lease's term passes while its expiry cannot be journaled
    assert api.leases() == []
    recover()
    wait_for("the journal to commit again", lambda: _health(a) == 1, timeout=30)
    assert _healthz(a)[0] == 200
    api.drain("node-001", 1.0)
    assert list(api.state().drained_machines) == ["node-001"]


TOKENS: dict[str, str] = {}


def _leased(volume: Path, clock: Clock) -> tuple[RunningArbiter, Api]:
    a = serve(volume / "journal.db", clock, arbiter_metrics_port=0)
    api = Api(a.port)
    app, tok = api.register(2)
    TOKENS[app] = tok
    api.session(app, tok)
    wait_held(api, app, 2, clock.t)
    return a, api


def test_a_full_journal_volume(volume: Path, clock: Clock) -> None:
    a, api = _leased(volume, clock)
    try:
        _fill(volume / "filler")
        _unwritable_journal_is_told_and_changes_nothing(
            a, api, clock, recover=lambda: (volume / "filler").unlink()
        )
    finally:
        api.close()
        a.stop(0)


def test_a_read_only_journal_volume_at_start(volume: Path, clock: Clock, tmp_path: Path) -> None:
    """The journal's volume mounted read-only (a real read-only mount: root cannot write it
    either) when serve starts: one line naming the journal, exit 1, no traceback."""
    import subprocess
    import sys

    from support import REPO

    a = serve(volume / "journal.db", clock)  # a journal with an app in it
    Api(a.port).register(1)
    a.stop(0)
    subprocess.run(["mount", "-o", "remount,ro", str(volume)], check=True)
    tokens = {}  # the credentials elsewhere: what fails is the journal
    for key in ("ADMIN_TOKEN_FILE", "QUERY_SERVICE_TOKEN_FILE", "ADMISSION_SUBMIT_TOKEN_FILE"):
        (tmp_path / key).write_text("secret\n")
        tokens[f"ARBITER_{key}"] = str(tmp_path / key)
    done = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "nodes:2:2",
         "--port", "0", "--journal", str(volume / "journal.db")],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **tokens},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "yarn-arbiter: error: journal " in done.stderr
    assert "journal.db cannot be opened or written" in done.stderr


def test_a_read_only_journal(tmp_path: Path, clock: Clock) -> None:
    """A journal that turns read-only under the running arbiter (SQLite's ``PRAGMA
    query_only`` on its connection: every write fails as SQLITE_READONLY, as on a volume
    remounted read-only, which the kernel refuses to do while the file is open for writing)."""
    a, api = _leased(tmp_path, clock)
    try:
        a.journal._db.execute("PRAGMA query_only=ON")
        _unwritable_journal_is_told_and_changes_nothing(
            a, api, clock, recover=lambda: a.journal._db.execute("PRAGMA query_only=OFF")
        )
    finally:
        api.close()
        a.stop(0)


def test_a_yarn_app_that_ends_while_the_journal_cannot_commit_is_finished_later(
    tmp_path: Path, clock: Clock
) -> None:
    """The bridge's finish_app is refused (UNAVAILABLE) while the journal is read-only: the
    watcher keeps its view, so the same AppEnded comes again and ends the app once the journal
    commits (it was lost: the view moved on before the arbiter took the event)."""
    with RMEmulator(nodes=2, gpus_per_node=2, manual_clock=True, start_seconds=1,
                    app_seconds=60) as emu:  # fmt: skip
        a = serve(tmp_path / "journal.db", clock, initial_cluster(emu.url, rm_options=FAST))
        api = Api(a.port)
        try:
            yid = emu.cluster.new_application_id()
            app, _ = api.register(2, yarn_application_id=yid)
            with emu.cluster.state.lock:
                emu.cluster.ops.submit(
                    app_id=yid, name="trainer", user="u", queue="default", gpus=0, seconds=5,
                    memory_mb=1024, vcores=1, tags=(ML_APP_TAG, arbiter_app_tag(app)),
                    priority=None, app_type="YARN", max_attempts=1, unmanaged=False,
                )  # fmt: skip
            bridge = Bridge(a.core, emu.url, poll_s=0.05, rm_options=FAST, slack_s=2.0)
            assert bridge.tick()
            a.journal._db.execute("PRAGMA query_only=ON")
            emu.advance(10)  # the YARN app finishes
            for _ in range(2):
                assert not bridge.tick()  # refused: the events come again
            assert app in app_ids(api)
            a.journal._db.execute("PRAGMA query_only=OFF")
            wait_for("the journal to commit again", lambda: a.core.healthy, timeout=30)
            assert bridge.tick()
            assert app not in app_ids(api)
            bridge.stop()
        finally:
            api.close()
            a.stop(0)


# -- 8. calls to methods that do not exist -------------------------------------------------------


def test_unknown_methods_add_no_metrics_series(tmp_path: Path, clock: Clock) -> None:
    import urllib.request

    a = serve(tmp_path / "j.db", clock, arbiter_metrics_port=0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
            for k in range(25):
                call = ch.unary_unary(f"/yarnarbiter.v1.Admin/Invented{k}")
                with pytest.raises(grpc.RpcError) as err:
                    call(b"", timeout=10)
                assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert a.metrics is not None
        url = f"http://127.0.0.1:{a.metrics.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            page = r.read().decode()
        assert "Invented" not in page  # no series of any metric is named after them
        counts = {
            name: float(value)
            for name, _, value in (line.rpartition(" ") for line in page.splitlines())
            if name.startswith("yarn_arbiter_rpc_calls_total{")
        }
        assert counts['yarn_arbiter_rpc_calls_total{method="unknown"}'] == 25
    finally:
        a.stop(0)


# -- 9. a drain issued while a round is solved ---------------------------------------------------


def test_a_drain_during_a_solve_leases_nothing_on_the_drained_machine(
    tmp_path: Path, clock: Clock
) -> None:
    gate = _Gate()
    a = serve(tmp_path / "j.db", clock, decider=gate, arbiter_policy="themis",
              arbiter_lease_seconds=600)  # fmt: skip
    api = Api(a.port)
    try:
        app, tok = api.register(4)
        s = api.session(app, tok)
        offer = wait_for("an offer", lambda: _next_offer(s), timeout=30)
        gpus = [g.id for g in offer.gpus]
        s.send(pb.AgentMessage(bid=pb.Bid(round=offer.round, rho_old=float("inf"),
                                          rows=[pb.BidRow(gpu_ids=gpus, rho=1.0)])))  # fmt: skip
        assert gate.entered.wait(30)  # the round is being solved, outside the lock
        api.drain("node-000", 0.0)
        gate.go.set()
        held = wait_held(api, app, 2, clock.t)
        assert all(g.startswith("node-001/") for g in held)
        clock.t += 1
        assert not [x for x in api.leases() if any(g.startswith("node-000/") for g in x.gpu_ids)]
        s.close()
    finally:
        gate.go.set()
        api.close()
        a.stop(0)


def _next_offer(s) -> pb.Offer | None:
    import queue

    try:
        while True:
            msg = s.inbox.get(timeout=0.1)
            if msg.WhichOneof("kind") == "offer":
                return msg.offer
    except queue.Empty:
        return None


# -- 10. renewing over another app's reserved leftover -------------------------------------------


def test_a_renewal_over_a_reserved_leftover_is_refused_by_name(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    mine, theirs = new_token(), new_token()
    journal.put_app(AppRecord("app-mine", hash_token(mine), "a", "u", "q", 1))
    journal.put_app(AppRecord("app-theirs", hash_token(theirs), "b", "u", "q", 1))
    g = frozenset({"node-000/s0/g0"})
    now_lease = Lease("app-mine", g, clock.t - 10, clock.t + 20, 1)
    leftover = Lease("app-theirs", g, clock.t + 20, clock.t + 50, 1, LeaseSource.LEFTOVER)
    journal.commit_round(ArbiterState(SMALL.gpu_ids, (now_lease, leftover), 1))
    journal.close()
    # registered long ago and silent since: nobody waits, so only the reservation refuses
    a = serve(path, clock, arbiter_policy="themis", arbiter_heartbeat_timeout_seconds=10)
    api = Api(a.port)
    try:
        lid = next(x.lease_id for x in api.leases("app-mine"))
        with pytest.raises(grpc.RpcError) as err:
            api.renew(mine, lid)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "reserved for app-theirs" in (err.value.details() or "")
    finally:
        api.close()
        a.stop(0)


# -- 11. app names with terminal escapes -------------------------------------------------------


def test_admin_apps_prints_names_as_text(
    api: Api, arb: RunningArbiter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yarn_arbiter.cli import main

    api.register(1, app_name="evil\x1b[2J\x1b]0;owned\x07\nfake-app  x  y")
    token = tmp_path / "admin-token"
    token.write_text(ADMIN + "\n")
    assert main(["admin", "--address", f"127.0.0.1:{arb.port}", "--token-file", str(token),
                 "apps"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert len(out.strip().splitlines()) == 3  # header, rule, one app
    assert "evil\\x1b[2J" in out


# -- 12. qoop-hive and a server that never answers ----------------------------------------------


def test_qoop_hive_gives_up_on_a_server_that_accepts_and_never_answers() -> None:
    import socket

    from hive_hooks.beeline.errors import CliError
    from hive_hooks.beeline.session import CONNECT_TIMEOUT_S, Session
    from hive_hooks.jdbc import parse_jdbc_url

    assert CONNECT_TIMEOUT_S <= 60
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)  # accepted by the kernel, never answered
        url = parse_jdbc_url(f"jdbc:hive2://127.0.0.1:{srv.getsockname()[1]}/default")
        session = Session(url, user=None, password=None, hiveconf={}, hivevar={},
                          connect_timeout_s=0.5)  # fmt: skip
        with pytest.raises(CliError, match="cannot reach HiveServer2"):
            _ = session.conn


# -- 13. the README's emulator command -----------------------------------------------------------


def test_the_readmes_emulator_command_runs() -> None:
    import subprocess
    import sys

    from support import REPO

    done = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "emulate-rm", "--nodes", "4",
         "--gpus-per-node", "4", "--port", "0", "--duration", "0.2"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "YARN_ARBITER_RM_URL=http://127.0.0.1:" in done.stdout


# -- 14. job specs that no policy can use --------------------------------------------------------


@pytest.mark.parametrize(
    "jobs",
    [
        [pb.JobSpec(job_id="j", gang_size=1, serial_iter_time_s=float("nan"))],
        [pb.JobSpec(job_id="j", gang_size=99_999)],
        [pb.JobSpec(job_id="j", max_gpus=99_999)],
        [pb.JobSpec(job_id="j", serial_iter_time_s=float("inf"))],
        [pb.JobSpec(job_id=f"j{k}", gang_size=1) for k in range(50_000)],
    ],
    ids=["nan", "gang", "max-gpus", "inf", "50000-jobs"],
)
def test_bad_job_specs_are_refused_and_not_journaled(
    arb: RunningArbiter, api: Api, jobs: list[pb.JobSpec]
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        api.am.RegisterApp(pb.RegisterAppRequest(app_name="x", max_gpu_demand=1, jobs=jobs),
                           metadata=md(submit=SUBMIT), timeout=30)  # fmt: skip
    assert err.value.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                                grpc.StatusCode.RESOURCE_EXHAUSTED)  # fmt: skip
    assert app_ids(api) == set()
    assert arb.journal.load(SMALL.gpu_ids).apps == {}


@pytest.mark.parametrize("iter_time", [float("nan"), float("inf"), -1.0])
def test_a_progress_report_no_policy_can_use_is_refused(api: Api, iter_time: float) -> None:
    _, tok = api.register(1)
    report = pb.ProgressReport(job_id="j", iters_done=1, iters_remaining=10,
                               iter_time_s=iter_time)  # fmt: skip
    with pytest.raises(grpc.RpcError) as err:
        api.am.ReportProgress(report, metadata=md(app=tok), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- 15. a TLS key that does not match, a bad --checkpoint-db -----------------------------------


def test_a_tls_key_of_another_certificate_is_a_clear_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    from support import REPO
    from support.pki import make_pki

    pki = make_pki(tmp_path)
    env = {"ARBITER_GRPC_TLS_ENABLED": "true", "ARBITER_GRPC_TLS_CERT": str(pki["server.crt"]),
           "ARBITER_GRPC_TLS_KEY": str(pki["client.key"]), "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "serve", "--cluster", "nodes:2:2",
         "--port", "0", "--journal", str(tmp_path / "j.db")],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "does not go with arbiter.grpc.tls.cert" in done.stderr


def test_a_bad_checkpoint_db_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from hive_hooks.cli import main

    code = main(["-u", "jdbc:hive2://127.0.0.1:1/default", "--checkpoint-db", "bad db;",
                 "-e", "select 1"])  # fmt: skip
    assert code == 2
    assert "--checkpoint-db" in capsys.readouterr().err


# -- the RM flapping -----------------------------------------------------------------------------


def test_an_rm_that_flaps_changes_nothing_and_kills_nothing(tmp_path: Path, clock: Clock) -> None:
    """For two polls (fewer than the bridge's confirm_polls, 3) the RM lists neither the ML app
    nor one of the nodes, and answers 404 for the app itself: the arbiter keeps the app, its
    leases and the topology, and the enforcer kills nothing (test_yarn_bridge shows a node
    gone for good being lost)."""
    with RMEmulator(nodes=2, gpus_per_node=2, manual_clock=True, start_seconds=1,
                    app_seconds=600) as emu:  # fmt: skip
        a = serve(tmp_path / "journal.db", clock, initial_cluster(emu.url, rm_options=FAST))
        api = Api(a.port)
        try:
            yid = emu.cluster.new_application_id()
            app, tok = api.register(4, yarn_application_id=yid)
            with emu.cluster.state.lock:
                emu.cluster.ops.submit(
                    app_id=yid, name="trainer", user="u", queue="default", gpus=4, seconds=600,
                    memory_mb=1024, vcores=1, tags=(ML_APP_TAG, arbiter_app_tag(app)),
                    priority=None, app_type="YARN", max_attempts=1, unmanaged=False,
                )  # fmt: skip
            s = api.session(app, tok)
            held = wait_held(api, app, 4, clock.t)
            bridge = Bridge(a.core, emu.url, poll_s=0.05, rm_options=FAST, slack_s=2.0)
            emu.advance(2)
            assert bridge.tick() and bridge.tick()
            assert bridge.view.apps[yid].arbiter_id == app

            def without_app(doc):
                apps = (doc.get("apps") or {}).get("app") or []
                return {"apps": {"app": [x for x in apps if x.get("id") != yid]}}

            def without_node(doc):
                nodes = (doc.get("nodes") or {}).get("node") or []
                return {"nodes": {"node": [n for n in nodes if n.get("nodeHostName") != "node-01"]}}

            for _ in range(2):
                emu.inject("/apps", transform=without_app)
                emu.inject(f"/apps/{yid}", status=404, body='{"RemoteException": {}}')
                emu.inject("/nodes", transform=without_node)
                assert bridge.tick()
            for _ in range(3):  # the RM answers truly again
                assert bridge.tick()
            assert app in app_ids(api)
            assert wait_held(api, app, 4, clock.t) == held
            assert a.core.cluster.num_gpus == 4 and not api.state().drained_machines
            assert emu.cluster.app_state(yid) == "RUNNING"  # the enforcer killed nothing
            bridge.stop()
            s.close()
        finally:
            api.close()
            a.stop(0)
