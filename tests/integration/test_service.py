"""The arbiter over a real gRPC socket: registration, whole auction rounds, leases, security,
bad input, share streams, restart recovery."""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from support import wait_for
from support.arbiter import ADMIN, CLUSTER, admin_md, channel, leases_of

from arbiter.bids import generate_bid
from arbiter.config import load_config
from arbiter.fairness import rho_single_job, t_id
from arbiter.placement import LocalityModel
from arbiter.rounds import ArbiterState, Lease, check_invariants
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc


def start(tmp_path: Path, **overrides: str) -> RunningArbiter:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_LEASE_SECONDS": "4",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "1.5",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "1.0",
        **overrides,
    }
    return RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()


@pytest.fixture
def arbiter(tmp_path: Path) -> Iterator[RunningArbiter]:
    a = start(tmp_path)
    yield a
    a.stop(0)


def register(stub: rpc.AppMasterStub, demand: int, name: str = "search") -> pb.RegisterAppResponse:
    return stub.RegisterApp(pb.RegisterAppRequest(app_name=name, user="ann", max_gpu_demand=demand))


class Agent:
    """A minimal Agent: answers every offer with a bid from the real bid generator (Eq. 1)."""

    def __init__(self, a: RunningArbiter, demand: int, *, bidding: bool = True) -> None:
        self.stub = rpc.AppMasterStub(channel(a))
        reg = register(self.stub, demand)
        self.app_id, self.token, self.demand = reg.app_id, reg.app_token, demand
        self.bidding = bidding
        self.silent = threading.Event()
        self.outbox: queue.Queue = queue.Queue()
        self.received: list[pb.ArbiterMessage] = []
        self.closed = threading.Event()
        tid = t_id(3000.0, CLUSTER.num_gpus, demand, 4.0)

        def rho(gpus, placement):
            return rho_single_job(
                elapsed=0.0,
                iters_left=3000,
                iter_time_serial=1.0,
                slowdown=LocalityModel().slowdown(placement),
                gpus=len(gpus),
                demand_max=demand,
                t_id=tid,
            )

        self.rho = rho
        self.outbox.put(pb.AgentMessage(hello=pb.SessionHello(app_id=self.app_id)))
        self.stream = self.stub.Session(self._requests(), metadata=[("x-app-token", self.token)])
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._heartbeat, daemon=True).start()

    def _requests(self):
        while not self.closed.is_set():
            try:
                yield self.outbox.get(timeout=0.1)
            except queue.Empty:
                continue

    def _heartbeat(self) -> None:
        while not self.closed.is_set():
            if not self.silent.is_set():
                self.outbox.put(pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_s=time.time())))
            time.sleep(0.2)

    def _read(self) -> None:
        try:
            for msg in self.stream:
                self.received.append(msg)
                if msg.WhichOneof("kind") == "offer" and self.bidding and not self.silent.is_set():
                    self.bid(msg.offer)
        except grpc.RpcError:
            pass
        finally:
            self.closed.set()

    def bid(self, offer: pb.Offer) -> None:
        offered = frozenset(g.id for g in offer.gpus)
        bid = generate_bid(self.app_id, CLUSTER, offered, self.rho, demand_max=self.demand)
        rows = [pb.BidRow(gpu_ids=sorted(k), rho=v) for k, v in bid.rows.items() if k]
        self.send_bid(pb.Bid(round=offer.round, rho_old=bid.rho_old, rows=rows))

    def send_bid(self, bid: pb.Bid) -> None:
        self.outbox.put(pb.AgentMessage(bid=bid))

    def of_kind(self, kind: str) -> list:
        return [getattr(m, kind) for m in list(self.received) if m.WhichOneof("kind") == kind]

    def close(self) -> None:
        self.closed.set()
        self.stream.cancel()


def test_health_and_reflection(arbiter: RunningArbiter) -> None:
    health = health_pb2_grpc.HealthStub(channel(arbiter))
    for service in ("", "yarnarbiter.v1.AppMaster", "yarnarbiter.v1.Admin"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service)).status
        assert status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(channel(arbiter))
    reply = next(
        refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    )
    names = {s.name for s in reply.list_services_response.service}
    assert {
        "yarnarbiter.v1.AppMaster",
        "yarnarbiter.v1.QueryShare",
        "yarnarbiter.v1.Admin",
    } <= names


def test_whole_rounds_give_disjoint_leases(tmp_path: Path) -> None:
    # A 1.5 s batching window lets all six Agents connect before the first offer; at the
    # paper's f = 0.8 two of the six bid.
    arbiter = start(tmp_path, ARBITER_OFFER_BATCH_WINDOW_SECONDS="1.5",
                    ARBITER_THEMIS_FAIRNESS_KNOB="0.8")  # fmt: skip
    agents = [Agent(arbiter, d) for d in (2, 4, 8, 8, 16, 32)]
    try:
        wait_for("two allocations", lambda: all(a.of_kind("allocation") for a in agents[:2]), 10)
        leases = leases_of(arbiter)
        domain = tuple(
            Lease(x.app_id, frozenset(x.gpu_ids), x.start_unix_s, x.end_unix_s, x.round)
            for x in leases
        )
        check_invariants(ArbiterState(CLUSTER.gpu_ids, domain))
        for a in agents:
            held = {g for x in leases if x.app_id == a.app_id for g in x.gpu_ids}
            assert len(held) <= a.demand
            for alloc in a.of_kind("allocation"):
                assert 0.0 <= alloc.hidden_payment < 1.0
                assert all(lease.app_id == a.app_id for lease in alloc.leases)
        # f = 0.8 with 6 connected apps: ceil(1.2) = 2 bid in the first round.
        first = min(a.of_kind("offer")[0].round for a in agents if a.of_kind("offer"))
        offered_first = [a for a in agents if any(o.round == first for o in a.of_kind("offer"))]
        assert len(offered_first) == 2
    finally:
        for a in agents:
            a.close()
        arbiter.stop(0)


def test_leases_expire_and_are_reauctioned(tmp_path: Path) -> None:
    a = start(tmp_path, ARBITER_LEASE_SECONDS="1.0")
    agents = [Agent(a, 8), Agent(a, 8)]
    seen: set[int] = set()

    def rounds_seen() -> bool:
        seen.update(x.round for x in leases_of(a))
        return len(seen) >= 3

    try:
        # leases of 1 s expire and new rounds re-auction
        wait_for("re-auction rounds", rounds_seen, timeout=15)
        assert all(x.end_unix_s - x.start_unix_s <= 1.0 + 1e-6 for x in leases_of(a))
    finally:
        for x in agents:
            x.close()
        a.stop(0)


def test_silent_agent_loses_its_leases(arbiter: RunningArbiter) -> None:
    agent = Agent(arbiter, 4)

    def held() -> bool:
        return any(x.app_id == agent.app_id for x in leases_of(arbiter))

    try:
        wait_for("a lease", held, timeout=10)
        agent.silent.set()
        wait_for("the leases gone", lambda: not held(), timeout=6)
        wait_for("the session closed", agent.closed.is_set, timeout=3)
    finally:
        agent.close()


def test_credentials(arbiter: RunningArbiter) -> None:
    stub = rpc.AppMasterStub(channel(arbiter))
    a, b = register(stub, 2), register(stub, 2)
    admin = rpc.AdminStub(channel(arbiter))
    with pytest.raises(grpc.RpcError) as err:
        admin.ListApps(pb.ListAppsRequest())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as err:
        admin.ListApps(pb.ListAppsRequest(), metadata=[("x-admin-token", a.app_token)])
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # A's token cannot open B's session.
    hello = pb.AgentMessage(hello=pb.SessionHello(app_id=b.app_id))
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Session(iter([hello]), metadata=[("x-app-token", a.app_token)]))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as err:
        stub.ReleaseLease(pb.ReleaseLeaseRequest(lease_id="x"), metadata=[("x-app-token", "nope")])
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    apps = admin.ListApps(pb.ListAppsRequest(), metadata=admin_md()).apps
    assert {x.app_id for x in apps} == {a.app_id, b.app_id}


def test_cross_app_lease_release_is_denied_and_changes_nothing(arbiter: RunningArbiter) -> None:
    owner = Agent(arbiter, 4)
    other = register(rpc.AppMasterStub(channel(arbiter)), 2)
    try:
        wait_for("a lease", lambda: any(x.app_id == owner.app_id for x in leases_of(arbiter)), 10)
        lease = next(x for x in leases_of(arbiter) if x.app_id == owner.app_id)
        with pytest.raises(grpc.RpcError) as err:
            owner.stub.ReleaseLease(
                pb.ReleaseLeaseRequest(lease_id=lease.lease_id),
                metadata=[("x-app-token", other.app_token)],
            )
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert lease.lease_id in {x.lease_id for x in leases_of(arbiter)}
        released = owner.stub.ReleaseLease(
            pb.ReleaseLeaseRequest(lease_id=lease.lease_id), metadata=[("x-app-token", owner.token)]
        )
        assert set(released.released_gpu_ids) == set(lease.gpu_ids)
    finally:
        owner.close()


def test_bad_bids_are_rejected_with_the_field_named(arbiter: RunningArbiter) -> None:
    agent = Agent(arbiter, 4, bidding=False)
    try:
        wait_for("an offer", lambda: agent.of_kind("offer"), 10)
        offer = agent.of_kind("offer")[0]
        gpu = offer.gpus[0].id
        agent.send_bid(
            pb.Bid(
                round=offer.round, rho_old=math.inf, rows=[pb.BidRow(gpu_ids=[gpu], rho=math.nan)]
            )
        )
        agent.send_bid(
            pb.Bid(
                round=offer.round,
                rho_old=math.inf,
                rows=[pb.BidRow(gpu_ids=["nope/s0/g0"], rho=1.0)],
            )
        )
        agent.send_bid(
            pb.Bid(
                round=offer.round + 7, rho_old=math.inf, rows=[pb.BidRow(gpu_ids=[gpu], rho=1.0)]
            )
        )
        agent.send_bid(pb.Bid(round=offer.round, rho_old=-1.0))
        wait_for("four errors", lambda: len(agent.of_kind("error")) >= 4, 10)
        errors = agent.of_kind("error")
        assert [e.code for e in errors[:4]] == [
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "FAILED_PRECONDITION",
            "INVALID_ARGUMENT",
        ]
        assert "bid.rows[0].rho" in errors[0].message
        assert "not offered" in errors[1].message
        assert "rho_old" in errors[3].message
        assert not any(x.app_id == agent.app_id for x in leases_of(arbiter))  # nothing allocated
    finally:
        agent.close()


def test_share_stream_follows_arrivals_and_departures(arbiter: RunningArbiter) -> None:
    shares = rpc.QueryShareStub(channel(arbiter))
    q1 = shares.RegisterQuery(pb.RegisterQueryRequest(query_name="q1"))
    updates: list[pb.ShareUpdate] = []
    stream = shares.SubscribeShare(
        pb.SubscribeShareRequest(job_id=q1.job_id), metadata=[("x-app-token", q1.job_token)]
    )

    def read() -> None:
        try:
            for u in stream:
                updates.append(u)
        except grpc.RpcError:
            pass

    threading.Thread(target=read, daemon=True).start()
    wait_for("an update", lambda: len(updates) >= 1, 10)
    q2 = shares.RegisterQuery(pb.RegisterQueryRequest(query_name="q2"))
    wait_for("two updates", lambda: len(updates) >= 2, 10)
    shares.UnregisterQuery(
        pb.UnregisterQueryRequest(job_id=q2.job_id), metadata=[("x-app-token", q2.job_token)]
    )
    wait_for("three updates", lambda: len(updates) >= 3, 10)
    stream.cancel()
    assert [u.active_jobs for u in updates[:3]] == [1, 2, 1]
    assert updates[0].fair_share.vcores == CLUSTER.vcores  # 384 vCPUs, one job
    assert updates[1].fair_share.vcores == CLUSTER.vcores / 2
    assert [u.epoch for u in updates[:3]] == sorted({u.epoch for u in updates[:3]})
    assert updates[1].cause == pb.SHARE_CAUSE_JOB_ARRIVED
    assert updates[2].cause == pb.SHARE_CAUSE_JOB_DEPARTED
    with pytest.raises(grpc.RpcError) as err:
        next(
            shares.SubscribeShare(
                pb.SubscribeShareRequest(job_id=q1.job_id), metadata=[("x-app-token", q2.job_token)]
            )
        )
    assert err.value.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND)


def test_admin_knobs_and_drain(arbiter: RunningArbiter) -> None:
    admin = rpc.AdminStub(channel(arbiter))
    r = admin.SetKnob(
        pb.SetKnobRequest(key="arbiter.themis.fairness-knob", value="0.5"), metadata=admin_md()
    )
    assert r.previous_value == "0.9"
    with pytest.raises(grpc.RpcError) as err:
        admin.SetKnob(
            pb.SetKnobRequest(key="arbiter.themis.fairness-knob", value="2"), metadata=admin_md()
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fairness-knob" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        admin.DrainNode(pb.DrainNodeRequest(machine="no-such-host"), metadata=admin_md())
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    admin.DrainNode(
        pb.DrainNodeRequest(machine="nc24-a-00", grace_seconds=0.5), metadata=admin_md()
    )
    state = admin.GetClusterState(pb.ClusterStateRequest(), metadata=admin_md())
    assert "nc24-a-00" in state.drained_machines
    assert not any(g.startswith("nc24-a-00/") for g in state.free_gpu_ids)


def test_restart_recovers_apps_leases_and_tokens(tmp_path: Path) -> None:
    a = start(tmp_path)
    agent = Agent(a, 4)
    try:
        wait_for("a lease", lambda: any(x.app_id == agent.app_id for x in leases_of(a)), 10)
        before = {x.lease_id for x in leases_of(a)}
    finally:
        agent.close()
        a.stop(0)
    b = start(tmp_path, ARBITER_HEARTBEAT_TIMEOUT_SECONDS="30")
    try:
        after = {x.lease_id for x in leases_of(b)}
        assert before & after  # the leases survived (those not yet expired)
        admin = rpc.AdminStub(channel(b))
        apps = admin.ListApps(pb.ListAppsRequest(), metadata=admin_md()).apps
        assert agent.app_id in {x.app_id for x in apps}
        # The old token still authenticates the app after the restart.
        stub = rpc.AppMasterStub(channel(b))
        ack = stub.ReportProgress(
            pb.ProgressReport(job_id="j", iter_time_s=1.0), metadata=[("x-app-token", agent.token)]
        )
        assert ack.rho > 0
    finally:
        b.stop(0)


def test_oversized_and_unknown_inputs(tmp_path: Path) -> None:
    a = start(tmp_path, ARBITER_GRPC_MAX_MESSAGE_BYTES="4096", ARBITER_BID_MAX_ROWS="8")
    try:
        stub = rpc.AppMasterStub(channel(a))
        with pytest.raises(grpc.RpcError) as err:  # a message above the size limit
            stub.RegisterApp(pb.RegisterAppRequest(app_name="x" * 10_000, max_gpu_demand=1))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.RpcError) as err:
            stub.RegisterApp(pb.RegisterAppRequest(app_name="big", max_gpu_demand=10_000))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "max_gpu_demand" in err.value.details()
        agent = Agent(a, 8, bidding=False)
        try:
            wait_for("an offer", lambda: agent.of_kind("offer"), 10)
            offer = agent.of_kind("offer")[0]
            ids = [g.id for g in offer.gpus]
            rows = [pb.BidRow(gpu_ids=[g], rho=1.0) for g in ids[:9]]  # 9 rows > limit 8
            agent.send_bid(pb.Bid(round=offer.round, rho_old=math.inf, rows=rows))
            wait_for("an error", lambda: agent.of_kind("error"), 10)
            assert agent.of_kind("error")[0].code == "INVALID_ARGUMENT"
            assert "limit 8" in agent.of_kind("error")[0].message
        finally:
            agent.close()
        admin = rpc.AdminStub(channel(a))
        with pytest.raises(grpc.RpcError) as err:
            admin.SetKnob(
                pb.SetKnobRequest(key="arbiter.journal.path", value="/tmp/x"), metadata=admin_md()
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as err:
            stub.RenewLease(
                pb.RenewLeaseRequest(lease_id="nope"), metadata=[("x-app-token", agent.token)]
            )
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        a.stop(0)


def test_reconnect_with_resume_resends_missed_allocations(arbiter: RunningArbiter) -> None:
    """An Agent that reconnects saying the last round it saw gets the leases granted since."""
    agent = Agent(arbiter, 4)
    try:
        wait_for("an allocation", lambda: agent.of_kind("allocation"), 10)
        held = [x for x in leases_of(arbiter) if x.app_id == agent.app_id]
        first_round = min(x.round for x in held)
    finally:
        agent.close()
    hello = pb.AgentMessage(
        hello=pb.SessionHello(app_id=agent.app_id, resume_after_round=first_round - 1)
    )
    stream = agent.stub.Session(iter([hello]), metadata=[("x-app-token", agent.token)])
    msg = next(stream)
    stream.cancel()
    assert msg.WhichOneof("kind") == "allocation"
    assert msg.allocation.round >= first_round
    assert {g for x in msg.allocation.leases for g in x.gpu_ids} <= {
        g for x in held for g in x.gpu_ids
    }


def test_query_service_credential(tmp_path: Path) -> None:
    """A query service (HiveServer2's hook) registers its users' queries with the credential
    the arbiter issued to it; a wrong one is refused and registers nothing."""
    a = RunningArbiter(
        CLUSTER,
        load_config(
            environ={"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db")}
        ),
        admin_token=ADMIN,
        service_token="svc-secret",
    ).start()
    try:
        shares = rpc.QueryShareStub(channel(a))
        ok = shares.RegisterQuery(
            pb.RegisterQueryRequest(query_name="hive_q1", user="ann"),
            metadata=[("x-service-token", "svc-secret")],
        )
        job = a.core.queries[ok.job_id]
        assert job.via_service and job.user == "ann" and job.name == "hive_q1"
        for wrong in ("svc-secrex", "", ADMIN):
            with pytest.raises(grpc.RpcError) as err:
                shares.RegisterQuery(
                    pb.RegisterQueryRequest(query_name="forged"),
                    metadata=[("x-service-token", wrong)],
                )
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert [q.name for q in a.core.queries.values()] == ["hive_q1"]
    finally:
        a.stop(0)
