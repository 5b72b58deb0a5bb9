"""Conformance: every registered policy, Themis included, runs live (a real arbiter, Agents over
a real gRPC socket) and in the simulator, and reaches the same allocation on a workload where
the outcome is determined: apps whose demands fill the cluster exactly (each must get its whole
demand), and one app alone (it must get all of it).

The live apps are Agents (:class:`arbiter.agent.Agent`): under Themis they answer offers with
bids; under the one-phase policies they receive policy leases. The simulator runs the same
policy object through :func:`arbiter.sim.engine.simulate` (Themis through its simulated Agents).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from arbiter.agent import Agent
from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.policies import POLICIES, make_policy
from arbiter.server import RunningArbiter
from arbiter.sim.engine import simulate
from arbiter.sim.perf import SimJob, SlowdownPerf

pytestmark = pytest.mark.slow

CLUSTER = "nodes:1:4"
WORKLOADS = {
    "fills-the-cluster": (2, 1, 1),  # demands, in arrival order
    "one-app": (4,),
}


def sim_holdings(policy: str, demands: tuple[int, ...]) -> dict[int, int]:
    """GPUs per app (by arrival index) after the simulator's first decision."""
    jobs = [SimJob(f"app{i}", 0.0, d, 1000.0, SlowdownPerf()) for i, d in enumerate(demands)]
    first: list[dict[str, int]] = []

    def hook(_snap, decision) -> None:
        if not first:
            first.append({k: len(v) for k, v in decision.allocation.items()})

    simulate(jobs, load_cluster(CLUSTER), make_policy(policy), on_decision=hook)
    return {i: first[0].get(f"app{i}", 0) for i in range(len(demands))}


def _estimator(work: float):
    def rho(gpus: frozenset[str], _placement) -> float:
        return work / len(gpus) / 100.0 if gpus else math.inf

    return rho


def live_holdings(tmp_path: Path, policy: str, demands: tuple[int, ...]) -> dict[int, int]:
    """GPUs per app once every app's Agent holds leases (or 20 s pass)."""
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / f"{policy}.db"),
        "ARBITER_POLICY": policy,
        "ARBITER_POLICY_INTERVAL_SECONDS": "0.2",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "2",
        "ARBITER_LEASE_SECONDS": "60",
    }
    arb = RunningArbiter(load_cluster(CLUSTER), load_config(environ=env), admin_token="adm")
    arb.start()
    agents: list[Agent] = []
    try:
        for i, d in enumerate(demands):
            agents.append(Agent(f"localhost:{arb.port}", estimator=_estimator(1000.0),
                                max_gpu_demand=d, app_name=f"app{i}",
                                heartbeat_seconds=0.2).start())  # fmt: skip
            # Arrival order matters to FIFO-like policies: each registers before the next.
            deadline = time.monotonic() + 10
            while agents[-1].app_id is None and time.monotonic() < deadline:
                time.sleep(0.01)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            held = {i: len(a.held()) for i, a in enumerate(agents)}
            if all(held[i] == d for i, d in enumerate(demands)):
                break
            time.sleep(0.05)
        return {i: len(a.held()) for i, a in enumerate(agents)}
    finally:
        for a in agents:
            a.stop()
        arb.stop(0)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_live_and_simulated_agree(tmp_path: Path, policy: str, workload: str) -> None:
    demands = WORKLOADS[workload]
    expected = dict(enumerate(demands))
    assert sim_holdings(policy, demands) == expected
    assert live_holdings(tmp_path, policy, demands) == expected
