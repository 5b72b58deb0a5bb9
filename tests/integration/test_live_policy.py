"""Seed policies in the live arbiter (arbiter.live_policy + ArbiterCore's policy driver):
a decision becomes grants, renewals and revocations with a grace period; no GPU is ever in two
live leases; over a real socket an Agent receives policy leases."""

from __future__ import annotations

import queue
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from support import Clock, drain

from arbiter.cluster import load_cluster
from arbiter.config import ConfigError, load_config, parse_knobs
from arbiter.core import Allocation, ArbiterCore, Revocation
from arbiter.journal import SQLiteJournal
from arbiter.live_policy import plan_leases
from arbiter.policies import POLICIES
from arbiter.rounds import ArbiterState, Lease, LeaseSource, check_invariants
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

G = [f"g{i}" for i in range(4)]


def L(app: str, gpus, start: float, end: float, rnd: int = 1) -> Lease:
    return Lease(app, frozenset(gpus), start, end, rnd)


# --- plan_leases: the functional core ---------------------------------------------------------


def test_grant_renew_and_revoke() -> None:
    leases = (L("a", G[:2], 0, 50), L("b", G[2:3], 0, 50))
    plan = plan_leases(
        leases,
        {"a": frozenset(G[:1]), "b": frozenset(G[1:4])},
        apps=frozenset({"a", "b"}),
        now=10.0,
        lease_seconds=100.0,
        grace=5.0,
        round_no=7,
    )
    by = {(x.app_id, x.gpus): x for x in plan.leases}
    # a keeps g0 (renewed to now + 100), loses g1 (cut to now + grace)
    assert by[("a", frozenset({"g0"}))].end == 110.0
    assert by[("a", frozenset({"g1"}))].end == 15.0
    assert [x.gpus for x in plan.revoked] == [frozenset({"g1"})]
    # b keeps g2 (renewed), gets g3 now and g1 only when a's grace ends
    assert by[("b", frozenset({"g2"}))].end == 110.0
    assert by[("b", frozenset({"g3"}))].start == 10.0
    g1 = by[("b", frozenset({"g1"}))]
    assert (g1.start, g1.end, g1.source) == (15.0, 115.0, LeaseSource.POLICY)
    assert {x.gpus for x in plan.granted["b"]} == {
        frozenset({"g1"}),
        frozenset({"g2"}),
        frozenset({"g3"}),
    }
    check_invariants(ArbiterState(frozenset(G), plan.leases))


def test_apps_outside_the_decision_are_untouched_and_block_grants() -> None:
    leases = (L("gone", G[:2], 0, 30), L("old", G[3:], 0, 5))
    plan = plan_leases(
        leases,
        {"a": frozenset(G[:3])},
        apps=frozenset({"a"}),
        now=10.0,
        lease_seconds=60.0,
        grace=5.0,
        round_no=2,
    )
    assert L("gone", G[:2], 0, 30) in plan.leases  # another app's lease stays as it is
    assert all(x.app_id != "old" for x in plan.leases)  # expired leases are dropped
    starts = {x.gpus: x.start for x in plan.leases if x.app_id == "a"}
    assert starts == {frozenset(G[:2]): 30.0, frozenset({"g2"}): 10.0}
    assert plan.revoked == ()
    check_invariants(ArbiterState(frozenset(G), plan.leases))


def test_a_reserved_lease_not_started_is_withdrawn_without_revocation() -> None:
    leases = (L("a", G[:1], 20, 80),)
    plan = plan_leases(
        leases, {}, apps=frozenset({"a"}), now=10.0, lease_seconds=60, grace=5, round_no=3
    )
    assert plan.leases == () and plan.revoked == () and plan.granted == {}


def test_knob_parsing() -> None:
    assert parse_knobs("queues=3, promote-knob=8,fair=true,name=x,ratio=0.5") == {
        "queues": 3, "promote_knob": 8, "fair": True, "name": "x", "ratio": 0.5,
    }  # fmt: skip
    with pytest.raises(ValueError, match="name=value"):
        parse_knobs("queues")
    with pytest.raises(ConfigError, match=r"arbiter\.policy"):
        load_config(environ={"ARBITER_POLICY": "sjf-oracle"})
    with pytest.raises(ConfigError, match=r"arbiter\.policy\.knobs"):
        load_config(environ={"ARBITER_POLICY_KNOBS": "=3"})


# --- the core's driver, with an injected clock ------------------------------------------------


def core(tmp_path: Path, policy: str, clock: Clock, **extra: str) -> ArbiterCore:
    env = {
        "ARBITER_POLICY": policy,
        "ARBITER_LEASE_SECONDS": "100",
        "ARBITER_REVOCATION_GRACE_SECONDS": "5",
        "ARBITER_POLICY_INTERVAL_SECONDS": "10",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "1000",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        **extra,
    }
    journal = SQLiteJournal(tmp_path / "j.db")
    return ArbiterCore(
        load_cluster("nodes:1:4"), load_config(environ=env), journal, admin_token="x", clock=clock
    )


def test_fifo_grants_in_registration_order(tmp_path: Path) -> None:
    clock = Clock()
    c = core(tmp_path, "fifo", clock)
    apps = []
    for name in ("a", "b"):
        app_id, _ = c.register_app(app_name=name, user="u", queue_name="", max_gpu_demand=4)
        apps.append((app_id, c.open_session(app_id)))
        clock.t += 1
    c.tick()
    (a, qa), (b, qb) = apps
    assert len(c.held(a)) == 4 and c.held(b) == frozenset()
    [alloc] = drain(qa)
    assert isinstance(alloc, Allocation) and alloc.leases[0].source == LeaseSource.POLICY
    assert drain(qb) == []
    clock.t += 20  # a's lease is renewed at the next decision, b still waits (FIFO)
    c.tick()
    assert len(c.held(a)) == 4 and max(x.end for x in c.state.leases) == clock.t + 100


def test_las_preempts_after_service_with_a_grace_period(tmp_path: Path) -> None:
    clock = Clock()
    c = core(tmp_path, "las", clock, ARBITER_POLICY_KNOBS="round_s=10")
    a, _ = c.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=4)
    qa = c.open_session(a)
    c.tick()
    assert len(c.held(a)) == 4
    clock.t += 30  # a attains 120 GPU-s alone
    b, _ = c.register_app(app_name="b", user="u", queue_name="", max_gpu_demand=4)
    qb = c.open_session(b)
    drain(qa)
    c.tick()  # LAS: b (0 GPU-s) before a (120 GPU-s): a is revoked, b gets the GPUs after grace
    revs = [m for m in drain(qa) if isinstance(m, Revocation)]
    assert revs and revs[0].grace_seconds == 5.0
    assert len(c.held(a)) == 4 and c.held(b) == frozenset()  # during the grace period
    [alloc] = [m for m in drain(qb) if isinstance(m, Allocation)]
    assert {x.start for x in alloc.leases} == {clock.t + 5}
    assert c.book.attained_by(a, clock.t) == pytest.approx(120.0)
    clock.t += 6
    c.tick()
    assert c.held(a) == frozenset() and len(c.held(b)) == 4
    check_invariants(c.state)
    assert c.book.attained_by(a, clock.t) == pytest.approx(4 * 35.0)  # 30 s alone + 5 s of grace


def test_afs_live_keeps_elastic_shares(tmp_path: Path) -> None:
    """AFS is elastic by default. Live (no perf model) its curves are linear: three apps asking
    for 4 GPUs each on nodes:1:4 settle to shares of 1, 1 and 2 (every app gets a GPU before any
    gets a second). Each partial share is shown to the policy as held (``holds_partial_gangs``),
    so later rounds renew the same GPUs: no migration, no revocation. (Shown holding nothing,
    the apps' shares would be re-placed from scratch and moved.) With ``elastic=false`` it is
    gang mode: the app with the least remaining time takes all 4."""
    clock = Clock()
    c = core(tmp_path, "afs-l", clock)
    apps = []
    for k, iters in enumerate((100, 300, 50)):
        app_id, _ = c.register_app(app_name=f"a{k}", user="u", queue_name="", max_gpu_demand=4)
        apps.append((app_id, c.open_session(app_id)))
        c.report_progress(app_id, 10, iters, 0.5)
        clock.t += 1
        c.tick()
    clock.t += 20  # past the grace periods of the first rounds' revocations
    c.tick()
    settled = {a: c.held(a) for a, _ in apps}
    assert sorted(len(g) for g in settled.values()) == [1, 1, 2]
    for _, q in apps:
        drain(q)
    for _ in range(3):
        clock.t += 20
        c.tick()
        check_invariants(c.state)
        assert {a: c.held(a) for a, _ in apps} == settled
    assert not [m for _, q in apps for m in drain(q) if isinstance(m, Revocation)]

    gang = core(tmp_path / "gang", "afs-l", Clock(), ARBITER_POLICY_KNOBS="elastic=false")
    ids = []
    for k, iters in enumerate((300, 100)):
        app_id, _ = gang.register_app(app_name=f"g{k}", user="u", queue_name="", max_gpu_demand=4)
        gang.open_session(app_id)
        gang.report_progress(app_id, 10, iters, 0.5)
        ids.append(app_id)
    gang.tick()
    assert (len(gang.held(ids[0])), len(gang.held(ids[1]))) == (0, 4)


def test_bad_decision_changes_nothing(tmp_path: Path) -> None:
    clock = Clock()
    c = core(tmp_path, "fifo", clock)
    a, _ = c.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=2)
    c.open_session(a)

    class Broken:
        name, round_s = "broken", None

        def decide(self, snapshot):
            from arbiter.policies.base import Decision

            return Decision({a: frozenset({"nope-gpu"})})

    c.scheduler.configure(c.config)
    c.scheduler._policy = Broken()
    c.tick()
    assert c.state.leases == () and c.held(a) == frozenset()


# --- over a real socket ---------------------------------------------------------------------


def test_agents_receive_policy_leases_over_grpc(tmp_path: Path) -> None:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_POLICY": "las",
        "ARBITER_POLICY_INTERVAL_SECONDS": "0.5",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
    }
    arb = RunningArbiter(
        load_cluster("nodes:1:4"), load_config(environ=env), admin_token="adm"
    ).start()
    try:
        ch = grpc.insecure_channel(f"localhost:{arb.port}")
        stub = rpc.AppMasterStub(ch)
        reg = stub.RegisterApp(pb.RegisterAppRequest(app_name="x", user="u", max_gpu_demand=2))
        out: queue.Queue = queue.Queue()
        out.put(pb.AgentMessage(hello=pb.SessionHello(app_id=reg.app_id)))

        def requests():
            while True:
                item = out.get()
                if item is None:
                    return
                yield item

        stream = stub.Session(requests(), metadata=[("x-app-token", reg.app_token)])
        msg = next(iter(stream))
        assert msg.WhichOneof("kind") == "allocation"
        [lease] = msg.allocation.leases
        assert lease.source == pb.LEASE_SOURCE_POLICY and len(lease.gpu_ids) == 2
        ack = stub.ReportProgress(
            pb.ProgressReport(job_id="j", iters_done=5, iters_remaining=50, iter_time_s=0.2),
            metadata=[("x-app-token", reg.app_token)],
        )
        assert ack.rho > 0
        assert arb.core.sessions.progress[reg.app_id].iters_remaining == 50
        state = rpc.AdminStub(ch).GetClusterState(
            pb.ClusterStateRequest(), metadata=[("x-admin-token", "adm")]
        )
        assert state.policy == "las"
        out.put(None)
        stream.cancel()
        time.sleep(0.1)
    finally:
        arb.stop(0)


@pytest.mark.parametrize("name", sorted(set(POLICIES) - {"themis"}))
def test_every_seed_policy_runs_live(tmp_path: Path, name: str, caplog) -> None:
    """Each policy decides from what the live arbiter knows (no perf model; progress reports
    for remaining time), its decisions become leases, and the invariant holds throughout."""
    clock = Clock()
    c = core(tmp_path, name, clock)
    apps = []
    for k, demand in enumerate((1, 2, 4, 3)):
        app_id, _ = c.register_app(app_name=f"a{k}", user="u", queue_name="", max_gpu_demand=demand)
        c.open_session(app_id)
        c.report_progress(app_id, 10, 100 * (k + 1), 0.5)
        apps.append(app_id)
        clock.t += 1
    with caplog.at_level("ERROR", logger="yarn_arbiter.core"):
        for _ in range(6):
            c.tick()
            check_invariants(c.state)
            clock.t += 7
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    held = {a: len(c.held(a)) for a in apps}
    assert sum(held.values()) > 0, held
    assert all(n <= d for n, d in zip(held.values(), (1, 2, 4, 3), strict=True))


def test_live_themis_is_the_policy_and_calls_every_app_by_rho(tmp_path: Path) -> None:
    """The live arbiter's Themis is the registered two-phase policy: it ranks every connected
    app by reported ρ (one that cannot use more GPUs included), calls the top (1 - f) for bids,
    auctions what they bid, and leaves the call closed in its state."""
    from arbiter.auction import Bid
    from arbiter.core import Offer
    from arbiter.policies.themis import Themis

    clock = Clock()
    c = core(tmp_path, "themis", clock, ARBITER_THEMIS_FAIRNESS_KNOB="0.5")
    apps, outs = [], []
    for k, rho in enumerate((1.0, 3.0, 2.0)):
        app_id, _ = c.register_app(app_name=f"a{k}", user="u", queue_name="", max_gpu_demand=2)
        outs.append(c.open_session(app_id))
        c.report_rho(app_id, rho)
        apps.append(app_id)
    c.tick()
    assert isinstance(c.scheduler.configure(c.config), Themis)
    offered = [i for i, q in enumerate(outs) if any(isinstance(m, Offer) for m in drain(q))]
    assert offered == [1, 2]  # ceil(0.5 x 3) = 2 bidders: the two largest ρ
    rnd = c.scheduler.pending.round
    gpus = sorted(c.scheduler.pending.offered)
    c.submit_bid(apps[1], rnd, Bid(apps[1], {frozenset(): 3.0, frozenset(gpus[:2]): 1.5}))
    c.submit_bid(apps[2], rnd, Bid(apps[2], {frozenset(): 2.0, frozenset(gpus[2:]): 1.0}))
    c.tick()  # every participant answered: the auction step runs and binds
    assert c.scheduler.pending is None and c.scheduler.policy_state.call is None
    assert c.held(apps[1]) == frozenset(gpus[:2]) and c.held(apps[2]) == frozenset(gpus[2:])
    assert c.state.round == rnd


def test_a_round_whose_gpus_were_leased_meanwhile_is_dropped(tmp_path: Path, caplog) -> None:
    """Decide and bind are separate cycles: if a GPU the auction grants was leased while it
    was decided, binding fails the lease invariant, the round is dropped (nothing of it is
    journaled) and its GPUs are offered again; the lease taken meanwhile stands."""
    from arbiter.auction import Bid
    from arbiter.core import ArbiterCore
    from arbiter.decider import decide_inline

    clock = Clock()
    meanwhile: list[Lease] = []

    def racing(policy, snapshot):
        decision = decide_inline(policy, snapshot)
        g = sorted(decision.outcome.granted[0].gpus)[0]
        lease = Lease(apps[1], frozenset([g]), clock.t, clock.t + 50, 99, LeaseSource.POLICY)
        meanwhile.append(lease)
        c.book.state = replace(c.state, leases=(*c.state.leases, lease))
        return decision

    env = {
        "ARBITER_POLICY": "themis",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "1000",
        "ARBITER_THEMIS_FAIRNESS_KNOB": "0.5",
    }
    c = ArbiterCore(load_cluster("nodes:1:4"), load_config(environ=env),
                    SQLiteJournal(tmp_path / "j.db"), admin_token="x", clock=clock,
                    decider=racing)  # fmt: skip
    apps = []
    for k in range(2):
        app_id, _ = c.register_app(app_name=f"a{k}", user="u", queue_name="", max_gpu_demand=4)
        c.open_session(app_id)
        apps.append(app_id)
    c.tick()
    p = c.scheduler.pending
    gpus = frozenset(sorted(p.offered))
    c.submit_bid(p.participants[0], p.round, Bid(p.participants[0], {frozenset(): 2.0, gpus: 1.0}))
    with caplog.at_level("WARNING", logger="yarn_arbiter.core"):
        c.tick()
    assert "dropped" in caplog.text
    assert c.state.leases == tuple(meanwhile)  # the auction's grant was not bound
    assert c.book.first_freed_at is not None  # its GPUs are offered again
