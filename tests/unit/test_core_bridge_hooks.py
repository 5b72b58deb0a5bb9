"""The arbiter core's hooks for the YARN bridge: an app finished on YARN, nodes lost or added,
analytics apps and capacity reported by the ResourceManager (QOOP's |J| and R)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import Clock, drain

from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.core import CLOSE, ArbiterCore, RequestError, Revocation
from arbiter.journal import SQLiteJournal
from arbiter.rounds import check_invariants
from arbiter.shares import Resources, ShareCause


def make(tmp_path: Path, spec: str = "nodes:2:2") -> tuple[ArbiterCore, Clock]:
    clock = Clock(500.0)
    env = {
        "ARBITER_POLICY": "fifo",
        "ARBITER_LEASE_SECONDS": "100",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "1000",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
    }
    core = ArbiterCore(
        load_cluster(spec),
        load_config(environ=env),
        SQLiteJournal(tmp_path / "j.db"),
        admin_token="adm",
        clock=clock,
    )
    return core, clock


def test_finish_app_frees_its_gpus_and_forgets_it(tmp_path: Path) -> None:
    core, clock = make(tmp_path)
    a, token = core.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=4)
    q = core.open_session(a)
    core.tick()
    assert len(core.held(a)) == 4
    freed = core.finish_app(a, "FINISHED")
    assert len(freed) == 4 and core.state.leases == () and a not in core.apps
    assert drain(q)[-1] is CLOSE
    with pytest.raises(RequestError):
        core.authenticate_app(token)
    assert core.finish_app(a, "FINISHED") == frozenset()  # idempotent
    # the journal forgot it too: a restart does not bring it back
    again = ArbiterCore(
        core.cluster, core.config, SQLiteJournal(tmp_path / "j.db"), admin_token="adm", clock=clock
    )
    assert a not in again.apps


def test_lost_node_cuts_leases_and_new_node_is_used(tmp_path: Path) -> None:
    core, clock = make(tmp_path)
    a, _ = core.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=4)
    q = core.open_session(a)
    core.tick()
    drain(q)
    smaller = load_cluster("nodes:1:2")  # node-001 is gone
    gone_machine = {m.name for m in core.cluster.machines} - {m.name for m in smaller.machines}
    added, removed = core.update_topology(smaller)
    assert added == frozenset() and len(removed) == 2
    assert {core.cluster.gpu(g).machine for g in core.held(a)} - {"node-000"} == set()
    assert len(core.held(a)) == 2 and gone_machine
    [rev] = [m for m in drain(q) if isinstance(m, Revocation)]
    assert rev.grace_seconds == 0.0 and rev.lease.gpus == removed and rev.reason == "node lost"
    check_invariants(core.state)
    added, removed = core.update_topology(load_cluster("nodes:2:2"))  # the node comes back
    assert len(added) == 2 and removed == frozenset()
    clock.t += 1
    core.tick()
    assert len(core.held(a)) == 4  # fifo gives the returning GPUs to the waiting gang
    check_invariants(core.state)
    assert core.update_topology(load_cluster("nodes:2:2")) == (frozenset(), frozenset())


def test_analytics_apps_and_capacity_change_every_share(tmp_path: Path) -> None:
    core, _ = make(tmp_path)
    job, _ = core.register_query("q1")
    sub = core.subscribe_share(job)
    first = drain(sub)[-1][1]
    assert first.active_jobs == 1
    assert core.set_analytics(3) is True
    change = drain(sub)[-1][1]
    assert change.active_jobs == 4 and change.cause == ShareCause.JOB_ARRIVED
    assert change.fair_share == core.capacity() / 4 and change.epoch > first.epoch
    assert core.set_analytics(3) is False and drain(sub) == []  # nothing changed: no update
    assert core.set_analytics(1, Resources(64.0, 262144.0)) is True
    change = drain(sub)[-1][1]
    assert change.cause == ShareCause.CAPACITY_CHANGED
    assert change.fair_share == Resources(32.0, 131072.0)
    assert core.set_analytics(0, Resources(64.0, 262144.0))
    assert drain(sub)[-1][1].cause == ShareCause.JOB_DEPARTED
    with pytest.raises(RequestError, match="external_jobs"):
        core.set_analytics(-1)
