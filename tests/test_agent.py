"""The Agent library against a real arbiter: bids, leases, reconnect after a server restart."""

from __future__ import annotations

import time
from pathlib import Path

from test_service import ADMIN, CLUSTER, leases_of, wait_for  # type: ignore[import-not-found]

from arbiter.agent import Agent, estimator_from_scheduler
from arbiter.config import load_config
from arbiter.fairness import SuccessiveHalving, t_id
from arbiter.server import RunningArbiter


def serve(tmp_path: Path, port: int = 0) -> RunningArbiter:
    env = {
        "ARBITER_GRPC_PORT": str(port),
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_LEASE_SECONDS": "2",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "3",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "1.0",
    }
    return RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()


def hyperband_agent(port: int, demand: int) -> Agent:
    """A successive-halving app (B.9's bracket) priced with Eq. 2."""
    scheduler = SuccessiveHalving((8, 16, 36), (80.0, 100.0, 100.0, 120.0))
    started = time.time()
    estimator = estimator_from_scheduler(
        scheduler,
        t_id=t_id(scheduler.budget, CLUSTER.num_gpus, demand, 4.0),
        job_demand_max=8,
        elapsed=lambda: time.time() - started,
    )
    return Agent(
        f"localhost:{port}", estimator=estimator, max_gpu_demand=demand, heartbeat_seconds=0.2
    ).start()


def test_agents_bid_and_hold_leases(tmp_path: Path) -> None:
    a = serve(tmp_path)
    agents = [hyperband_agent(a.port, d) for d in (4, 8, 16)]
    try:
        # f = 0.8: one of the three bids per round; the others may be served by leftover.
        wait_for(lambda: any(x.rounds_bid for x in agents), timeout=10)
        wait_for(lambda: all(x.leases for x in agents), timeout=10)
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
        wait_for(lambda: agent.leases, timeout=10)
        a.stop(0)
        wait_for(lambda: not agent.connected.is_set(), timeout=5)
        rounds_before = len(agent.rounds_bid)
        b = serve(tmp_path, port)  # same journal, same port
        try:
            wait_for(agent.connected.is_set, timeout=10)
            wait_for(lambda: len(agent.rounds_bid) > rounds_before, timeout=10)
            assert not agent.errors, agent.errors  # same app id and token after the restart
        finally:
            b.stop(0)
    finally:
        agent.stop()
