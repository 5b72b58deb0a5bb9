"""The Agent library against a real arbiter: bids, leases, reconnect after a server restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import wait_for
from support.arbiter import ADMIN, CLUSTER, hyperband_agent, leases_of

from arbiter.agent import estimator_from_scheduler
from arbiter.config import load_config
from arbiter.fairness import SuccessiveHalving, t_id
from arbiter.server import RunningArbiter


def serve(tmp_path: Path, port: int = 0, lease_seconds: float = 2) -> RunningArbiter:
    env = {
        "ARBITER_GRPC_PORT": str(port),
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_LEASE_SECONDS": str(lease_seconds),
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "3",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "1.0",
    }
    return RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()


def test_agents_bid_and_hold_leases(tmp_path: Path) -> None:
    a = serve(tmp_path)
    agents = [hyperband_agent(a.port, d) for d in (4, 8, 16)]
    try:
        # f = 0.8: one of the three bids per round; the others may be served by leftover.
        wait_for("a bid", lambda: any(x.rounds_bid for x in agents), timeout=10)
        wait_for("leases for all", lambda: all(x.leases for x in agents), timeout=10)
        for x in agents:
            assert not x.errors, x.errors
            held = {g for lease in leases_of(a) if lease.app_id == x.app_id for g in lease.gpu_ids}
            assert len(held) <= x.max_gpu_demand
    finally:
        for x in agents:
            x.stop()
        a.stop(0)


def test_agent_reconnects_and_resumes_after_restart(tmp_path: Path) -> None:
    a = serve(tmp_path)
    port = a.port
    agent = hyperband_agent(port, 8)
    try:
        wait_for("a lease", lambda: agent.leases, timeout=10)
        a.stop(0)
        wait_for("disconnected", lambda: not agent.connected.is_set(), timeout=5)
        rounds_before = len(agent.rounds_bid)
        b = serve(tmp_path, port)  # same journal, same port
        try:
            wait_for("reconnected", agent.connected.is_set, timeout=10)
            wait_for("a new bid", lambda: len(agent.rounds_bid) > rounds_before, timeout=10)
            assert not agent.errors, agent.errors  # same app id and token after the restart
        finally:
            b.stop(0)
    finally:
        agent.stop()


def test_a_drain_cut_is_booked_and_the_remainder_renews(tmp_path: Path) -> None:
    """A drain cuts one machine's GPUs out of a lease under a new id: the Agent holds the cut
    (until the grace ends) and the remainder under the ids the arbiter knows, so renewing the
    remainder works, and renewing the cut is refused (its machine is drained)."""
    a = serve(tmp_path, lease_seconds=60)
    cuts: list = []
    agent = hyperband_agent(a.port, 16)
    agent.on_revocation = lambda cut, grace: cuts.append((cut, grace))
    try:
        wait_for("a lease over two machines",
                 lambda: any(len({CLUSTER.gpu(g).machine for g in x.gpus}) > 1
                             for x in agent.leases.values()), timeout=15)  # fmt: skip
        lease = next(x for x in agent.leases.values()
                     if len({CLUSTER.gpu(g).machine for g in x.gpus}) > 1)  # fmt: skip
        machine = CLUSTER.gpu(min(lease.gpus)).machine
        a.core.drain(machine, grace=20.0)
        wait_for("a cut", lambda: cuts, timeout=5)
        cut, grace = cuts[0]
        assert grace == 20.0
        assert cut.gpus == {g for g in lease.gpus if CLUSTER.gpu(g).machine == machine}
        held = dict(agent.leases)
        assert lease.lease_id not in held and cut.lease_id in held
        [rest] = [x for x in held.values() if x.gpus == lease.gpus - cut.gpus]
        live = {x.lease_id for x in leases_of(a)}
        assert {cut.lease_id, rest.lease_id} <= live  # both ids are the arbiter's
        assert agent.renew(cut.lease_id) is None  # a drained machine's GPUs are not renewed
        # The remainder renews unless another app waits (none does here).
        renewed = agent.renew(rest.lease_id)
        assert renewed is not None and renewed.gpus == rest.gpus and renewed.end > rest.end
    finally:
        agent.stop()
        a.stop(0)


def test_rho_waiting_is_finite_and_prices_one_more_lease() -> None:
    """Gap 2 as decided: an app holding nothing bids a finite ρ_old, "nothing for one more
    lease, then the ideal allocation", which grows with the lease and beats no real row."""
    from arbiter.placement import placement_of

    scheduler = SuccessiveHalving((8, 16, 36), (80.0, 100.0, 100.0, 120.0))
    tid = t_id(scheduler.budget, CLUSTER.num_gpus, 8, 4.0)
    est = estimator_from_scheduler(scheduler, t_id=tid, job_demand_max=8, elapsed=lambda: 100.0)
    short, long = est.rho_waiting(60.0), est.rho_waiting(600.0)
    assert 0 < short < long < float("inf")
    assert long - short == pytest.approx(540.0 / tid)
    gpus = frozenset(g.id for g in CLUSTER.gpus[:8])
    assert est(gpus, placement_of(CLUSTER, gpus)) < long  # eight GPUs now beat waiting 10 min
