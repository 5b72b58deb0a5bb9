"""The YARN bridge end to end: the watcher, the enforcer and ``yarn-arbiter submit`` against the
RM emulator over real HTTP, with an in-process :class:`ArbiterCore` (manual clock) or a
:class:`RunningArbiter` on a real gRPC socket.

App and node life cycles reach the arbiter as the right events; Hive apps change every query's
share; a revoked lease ends in a kill after the grace period and not before; outages, restarts,
HA failover and malformed answers change nothing they should not; ``submit`` registers the app
and hands the RM the right submission context.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import queue
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import Clock, drain

from arbiter.config import load_config
from arbiter.core import CLOSE, ArbiterCore, RequestError, Revocation
from arbiter.journal import SQLiteJournal
from arbiter.rounds import check_invariants
from arbiter.server import RunningArbiter
from arbiter.shares import Resources, ShareCause
from yarn_bridge.auth import auth_hook_from_args, header_command_hook
from yarn_bridge.bridge_cli import (
    Bridge,
    add_parsers,
    add_serve_arguments,
    bridge_settings,
    initial_cluster,
    start_bridge,
)
from yarn_bridge.emulator import EMULATOR_GPUS_ENV, RMEmulator, RMHAPair, SimCluster
from yarn_bridge.enforcer import (
    DONE,
    FAILED,
    KILL,
    QUEUE,
    SKIPPED,
    EnforcerState,
    decide,
    held_counts,
    settle,
    with_gpus,
)
from yarn_bridge.env import (
    ENV_APP_ID,
    ENV_APP_TOKEN,
    ENV_ARBITER_ADDRESS,
    ENV_ARBITER_TLS_CA,
    ENV_RM_URL,
    ML_APP_TAG,
)
from yarn_bridge.rm import RMAuthError, RMClient, RMUnavailable, SchedConfUpdate
from yarn_bridge.rm_events import (
    ANALYTICS,
    ML,
    AppArrived,
    AppEnded,
    AppView,
    NodeChanged,
    NodeView,
    Observation,
    RMView,
    analytics_capacity,
    arbiter_app_tag,
    cluster_from_nodes,
    diff,
    query_tag,
)
from yarn_bridge.submit import SubmitError, SubmitSpec, application_tags, build_submission

FAST: dict[str, Any] = {"timeout": 1.0, "deadline": 2.0, "backoff": 0.02, "max_backoff": 0.1}
TOTAL = Resources(64.0, 131072.0)  # the emulator's 2 nodes x (32 vcores, 65536 MB)


def make_core(tmp_path: Path, cluster, clock: Clock) -> ArbiterCore:
    env = {
        "ARBITER_POLICY": "fifo",
        "ARBITER_LEASE_SECONDS": "100",
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "100000",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        "ARBITER_REVOCATION_GRACE_SECONDS": "5",
    }
    return ArbiterCore(
        cluster,
        load_config(environ=env),
        SQLiteJournal(tmp_path / "journal.db"),
        admin_token="adm",
        clock=clock,
    )


@pytest.fixture
def emu() -> Iterator[RMEmulator]:
    rm = RMEmulator(nodes=2, gpus_per_node=4, manual_clock=True, start_seconds=1, app_seconds=60)
    rm.start()
    yield rm
    rm.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def core(tmp_path: Path, emu: RMEmulator, clock: Clock) -> Iterator[ArbiterCore]:
    c = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
    yield c
    c.journal.close()


def bridge(core: ArbiterCore, urls, **kwargs: Any) -> Bridge:
    kwargs.setdefault("slack_s", 2.0)
    return Bridge(core, urls, poll_s=0.05, rm_options=FAST, **kwargs)


def leased_app(core: ArbiterCore, demand: int) -> tuple[str, queue.Queue]:
    """Register an arbiter app and let fifo lease it ``demand`` GPUs."""
    app_id, _ = core.register_app(app_name="ml", user="u", queue_name="ml", max_gpu_demand=demand)
    q: queue.Queue = queue.Queue()
    core.open_session(app_id, q)
    core.tick()
    assert len(core.held(app_id)) == demand
    drain(q)
    return app_id, q


def yarn_ml_app(
    emu: RMEmulator,
    arbiter_id: str,
    gpus: int,
    seconds: float = 60.0,
    core: ArbiterCore | None = None,
) -> str:
    """A YARN ML app tagged with ``arbiter_id``; given the ``core``, the arbiter app is bound to
    it as ``yarn-arbiter submit`` binds it (registered with the YARN id): only a bound app is
    ended by its YARN app (a tag alone is no evidence)."""
    yid = emu.add_app(
        name="trainer",
        queue="ml",
        gpus=gpus,
        seconds=seconds,
        tags=(ML_APP_TAG, arbiter_app_tag(arbiter_id)),
    )
    if core is not None:
        core.sessions.add(replace(core.apps[arbiter_id], yarn_app_id=yid))
    return yid


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


# -- the pure core -----------------------------------------------------------------------------


def _node(nid: str, state: str = "RUNNING", gpus: int = 4) -> NodeView:
    return NodeView(f"{nid}:8041", nid, "/r", state, gpus, 32, 65536)


def test_diff_acts_on_evidence_at_once_and_on_absence_after_n_polls() -> None:
    ml = AppView("application_1_0001", "RUNNING", ML, arbiter_id="app-a", gpus_used=4)
    tez = AppView("application_1_0002", "RUNNING", ANALYTICS, application_type="TEZ")
    n0, n1 = _node("n0"), _node("n1")
    obs = Observation(
        apps={ml.yarn_id: ml, tez.yarn_id: tez},
        nodes={n0.node_id: n0, n1.node_id: n1},
        capacity=TOTAL,
        active_nodes=2,
    )
    view, ev = diff(RMView(), obs)
    assert kinds(ev) == ["AppArrived", "AppArrived", "NodeAdded", "NodeAdded", "CapacityChanged"]
    assert diff(view, obs)[1] == ()  # the same answer again: nothing

    # Absence: nothing for confirm_polls - 1 polls, then the app and the node are gone.
    empty = Observation(capacity=Resources(), active_nodes=0)
    v = view
    for _ in range(2):
        v, ev = diff(v, empty, confirm_polls=3)
        assert ev == ()  # capacity 0 with 0 active nodes disagrees with 2 confirmed: kept
    v, ev = diff(v, empty, confirm_polls=3)
    assert sorted(kinds(ev)) == ["AppEnded"] * 2 + ["CapacityChanged"] + ["NodeRemoved"] * 2
    assert {e.confirmed_by for e in ev if isinstance(e, AppEnded)} == {"absence"}
    assert v.capacity == Resources() and not v.apps and not v.nodes

    # Evidence: a final state ends the app, a LOST node is gone, at once.
    killed = AppView(ml.yarn_id, "KILLED", ML, arbiter_id="app-a", final_status="KILLED")
    lost = _node("n1", "LOST")
    obs2 = Observation(
        apps={killed.yarn_id: killed, tez.yarn_id: tez},
        nodes={n0.node_id: n0, lost.node_id: lost},
        capacity=Resources(32.0, 65536.0),
        active_nodes=1,
    )
    v, ev = diff(view, obs2)
    assert kinds(ev) == ["AppEnded", "NodeRemoved", "CapacityChanged"]
    assert ev[0].confirmed_by == "state" and "KILLED" in ev[0].reason
    assert ev[1].reason == "node n1:8041 LOST"

    # Resize, graceful decommission, a node that comes back.
    small, leaving = _node("n0", gpus=2), _node("n1", "DECOMMISSIONING")
    v, ev = diff(view, Observation(nodes={small.node_id: small, leaving.node_id: leaving}))
    assert kinds(ev) == ["NodeChanged", "NodeDraining"]
    assert isinstance(ev[0], NodeChanged) and ev[0].old.gpus == 4 and ev[0].new.gpus == 2
    v, ev = diff(v, Observation(nodes={small.node_id: small, n1.node_id: n1}))
    assert ev == ()  # recommissioned: present all along, same capacity
    # An ML app that ended while nobody watched is still reported (arbiter link present).
    v, ev = diff(RMView(), Observation(apps={killed.yarn_id: killed}))
    assert kinds(ev) == ["AppEnded"] and not v.apps
    # ... an analytics app that did is not an event.
    done_tez = AppView("application_1_0009", "FINISHED", ANALYTICS)
    assert diff(RMView(), Observation(apps={done_tez.yarn_id: done_tez}))[1] == ()
    with pytest.raises(ValueError, match="confirm_polls"):
        diff(RMView(), obs, confirm_polls=0)


def test_docstring_examples() -> None:
    import doctest

    from yarn_bridge import auth, enforcer, rm_events, submit

    for module in (rm_events, enforcer, submit, auth):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_cluster_from_nodes_and_tags() -> None:
    nodes = [
        _node("b"),
        NodeView("a:1", "a", "/rack-1", "RUNNING", 2, 8, 4096),
        NodeView("a:2", "a", "/rack-1", "RUNNING", 1, 8, 4096),  # two NMs on one host
        NodeView("cpu:1", "cpu", "/r", "RUNNING", 0, 64, 1 << 20),  # no GPU: not a machine
        NodeView("gone:1", "gone", "/r", "LOST", 4, 8, 4096),
    ]
    c = cluster_from_nodes(nodes)
    assert [m.name for m in c.machines] == ["a:1", "a:2", "b"]
    assert c.num_gpus == 7 and c.machine("a:1").rack == "rack-1"
    assert c.machine("b").vcores == 32 and c.machine("b").memory_mb == 65536
    assert application_tags(["Team-A", ML_APP_TAG, "team-a"], "app-x") == (
        ML_APP_TAG,
        "yarn-arbiter-app:app-x",
        "team-a",
    )
    for bad in ("a,b", "x" * 101, "yarn-arbiter-app:app-y"):
        with pytest.raises(SubmitError):
            application_tags([bad], "app-x")
    assert query_tag("query-1") == "yarn-arbiter-query:query-1"


def test_enforcer_decision_and_vectors() -> None:
    app = AppView("application_1_0001", "RUNNING", ML, arbiter_id="a", gpus_used=4)
    reg = frozenset({"a"})
    s, acts = decide(EnforcerState(), [app], {"a": 4}, reg, 0.0, slack_s=5)
    assert acts == () and not s.over_since  # within its leases
    s, acts = decide(s, [app], {"a": 2}, reg, 10.0, slack_s=5)
    assert acts == () and s.over_since == {app.yarn_id: 10.0}
    s, acts = decide(s, [app], {"a": 4}, reg, 12.0, slack_s=5)  # released in time: reset
    assert acts == () and not s.over_since
    s, _ = decide(s, [app], {"a": 2}, reg, 20.0, slack_s=5)
    s, acts = decide(s, [app], {"a": 2}, reg, 24.9, slack_s=5)
    assert acts == ()
    s, acts = decide(s, [app], {"a": 2}, reg, 25.0, slack_s=5)
    assert [a.kind for a in acts] == [KILL] and "uses 4" in acts[0].reason
    failed = settle(s, acts[0], "failed")  # the RM was down: the next tick tries again
    assert (
        decide(failed, [app], {"a": 2}, reg, 26.0, slack_s=5)[1][0].action_id == acts[0].action_id
    )
    s = settle(s, acts[0], DONE)
    assert decide(s, [app], {"a": 2}, reg, 99.0, slack_s=5)[1] == ()  # never twice
    # Unregistered, unlinked, or unreported GPU use: never killed.
    for other in (
        AppView("y1", "RUNNING", ML, arbiter_id="stranger", gpus_used=8),
        AppView("y2", "RUNNING", ML, gpus_used=8),
        AppView("y3", "RUNNING", ML, arbiter_id="a", gpus_used=None),
        AppView("y4", "RUNNING", ANALYTICS, gpus_used=8),
    ):
        st, _ = decide(EnforcerState(), [other], {}, reg, 0.0, slack_s=0)
        assert decide(st, [other], {}, reg, 100.0, slack_s=0)[1] == ()
    # The GPU queue follows the leased total, once per change.
    s, acts = decide(EnforcerState(), [], {"a": 2, "b": 3}, reg, 0.0, gpu_queue="root.gpu")
    assert [(a.kind, a.gpus) for a in acts] == [(QUEUE, 5)]
    s = settle(s, acts[0], DONE)
    assert decide(s, [], {"a": 2, "b": 3}, reg, 1.0, gpu_queue="root.gpu")[1] == ()
    assert with_gpus("[memory=4096,vcores=4,yarn.io/gpu=8]", 5) == (
        "[memory=4096,vcores=4,yarn.io/gpu=5]"
    )
    assert with_gpus("40", 5) is None
    assert held_counts([], 0.0) == {}


# -- the watcher over HTTP ---------------------------------------------------------------------


def test_initial_cluster_comes_from_the_rm(emu: RMEmulator) -> None:
    c = initial_cluster(emu.url, rm_options=FAST)
    assert c.num_gpus == 8 and [m.name for m in c.machines] == ["node-00", "node-01"]
    assert c.racks == ("default-rack",) and c.vcores == 64 and c.memory_mb == 131072
    emu.set_outage("refused")  # no made-up cluster: a clear error after waiting
    with pytest.raises(RMUnavailable, match="no active ResourceManager"):
        initial_cluster(emu.url, wait_s=0.3, rm_options=FAST)


def test_ml_app_finished_frees_its_leases(emu: RMEmulator, core: ArbiterCore) -> None:
    app_id, q = leased_app(core, 4)
    yid = yarn_ml_app(emu, app_id, gpus=4, seconds=30, core=core)
    b = bridge(core, emu.url)
    events = b.watcher.poll_once()
    assert events is not None
    assert any(isinstance(e, AppArrived) and e.app.arbiter_id == app_id for e in events)
    assert b.view.apps[yid].arbiter_id == app_id and b.view.apps[yid].kind == ML
    emu.advance(2)  # RUNNING with its 4 GPU containers
    assert b.watcher.poll_once() == () and b.view.apps[yid].gpus_used == 4
    assert app_id in core.apps and len(core.held(app_id)) == 4
    emu.advance(40)  # FINISHED: gone from the live listing, looked up, final: one poll
    events = b.watcher.poll_once()
    assert kinds(events) == ["AppEnded"] and events[0].confirmed_by == "state"
    assert "FINISHED" in events[0].reason and "SUCCEEDED" in events[0].reason
    assert app_id not in core.apps and core.state.leases == ()
    assert drain(q)[-1] is CLOSE
    assert b.watcher.poll_once() == ()  # settled
    b.stop()


def test_nodes_lost_added_and_resized_reach_the_topology(
    emu: RMEmulator, core: ArbiterCore, clock: Clock
) -> None:
    app_id, q = leased_app(core, 8)  # fifo: all 8 GPUs of both nodes
    b = bridge(core, emu.url)
    assert b.tick() and b.watcher.stats.applied.get("update_topology") is None  # same cluster
    emu.lose_node("node-01:8041")
    events = b.watcher.poll_once()
    assert kinds(events) == ["NodeRemoved", "CapacityChanged"]
    assert events[0].reason == "node node-01:8041 LOST" and events[1].new == TOTAL / 2
    assert core.cluster.num_gpus == 4 and {m.name for m in core.cluster.machines} == {"node-00"}
    assert len(core.held(app_id)) == 4
    assert {core.cluster.gpu(g).machine for g in core.held(app_id)} == {"node-00"}
    [rev] = [m for m in drain(q) if isinstance(m, Revocation)]
    assert rev.reason == "node lost" and len(rev.lease.gpus) == 4
    check_invariants(core.state)

    emu.add_node("node-02", gpus=2, rack="/rack-b")
    assert kinds(b.watcher.poll_once()) == ["NodeAdded", "CapacityChanged"]
    assert core.cluster.num_gpus == 6 and core.cluster.machine("node-02").rack == "rack-b"

    with emu.cluster.lock:  # the NodeManager restarts with 2 of its 4 GPUs
        emu.cluster.nodes["node-00:8041"].gpus = 2
    events = b.watcher.poll_once()
    assert kinds(events) == ["NodeChanged"]
    assert core.cluster.machine("node-00").num_gpus == 2 and core.cluster.num_gpus == 4
    assert len(core.held(app_id)) == 2  # the leases on the GPUs that left were cut
    check_invariants(core.state)

    emu.recover_node("node-01:8041")
    assert kinds(b.watcher.poll_once()) == ["NodeAdded", "CapacityChanged"]
    assert core.cluster.num_gpus == 8
    clock.t += 1
    core.tick()  # fifo hands the returned GPUs to the gang that lost them
    check_invariants(core.state)
    b.stop()


def test_decommissioning_node_is_drained_then_removed(
    emu: RMEmulator, core: ArbiterCore, clock: Clock
) -> None:
    app_id, q = leased_app(core, 8)
    b = bridge(core, emu.url)
    b.tick()
    with emu.cluster.lock:
        emu.cluster.nodes["node-01:8041"].state = "DECOMMISSIONING"
    assert kinds(b.watcher.poll_once()) == ["NodeDraining", "CapacityChanged"]
    assert core.snapshot().drained == {"node-01"}
    [rev] = [m for m in drain(q) if isinstance(m, Revocation)]
    assert rev.grace_seconds == 5.0 and "drained" in rev.reason
    assert len(core.held(app_id)) == 8  # in their grace period
    emu.remove_node("node-01:8041")
    assert kinds(b.watcher.poll_once()) == ["NodeRemoved"] and core.cluster.num_gpus == 4
    assert core.snapshot().drained == set()
    b.stop()


def test_hive_apps_change_every_query_share(emu: RMEmulator, core: ArbiterCore) -> None:
    subs = []
    for name in ("q1", "q2"):
        job, _ = core.register_query(name)
        subs.append(core.subscribe_share(job))
    for s in subs:
        drain(s)
    b = bridge(core, emu.url)
    b.tick()  # the RM's capacity replaces the declared one
    for s in subs:
        change = drain(s)[-1][1]
        assert change.cause == ShareCause.CAPACITY_CHANGED and change.active_jobs == 2
        assert change.fair_share == TOTAL / 2
    tez = [emu.add_app(name=f"hive-{k}", queue="hive", app_type="TEZ", seconds=20)
           for k in range(3)]  # fmt: skip
    emu.add_app(name="own", queue="hive", app_type="TEZ", tags=(query_tag("query-abc"),))
    yarn_ml_app(emu, "app-unknown", gpus=1)  # an ML app is not an analytics job
    events = b.watcher.poll_once()
    assert kinds(events).count("AppArrived") == 5
    for s in subs:
        [(_, change)] = drain(s)
        assert change.cause == ShareCause.JOB_ARRIVED and change.active_jobs == 5
        assert change.fair_share == TOTAL / 5
    emu.cluster.kill(tez[0])
    emu.advance(25)  # the other two finish
    b.watcher.poll_once()
    for s in subs:
        [(_, change)] = drain(s)
        assert change.cause == ShareCause.JOB_DEPARTED and change.active_jobs == 2
    assert b.watcher.poll_once() == () and all(drain(s) == [] for s in subs)
    b.stop()


def test_fair_scheduler_shares_are_the_capacity(tmp_path: Path, clock: Clock) -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, scheduler="fair", manual_clock=True) as emu:
        core = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
        job, _ = core.register_query("q1")
        sub = core.subscribe_share(job)
        emu.add_app(name="hive", queue="hive", app_type="TEZ")
        b = bridge(core, emu.url)
        b.tick()  # hive alone is active: its fair share is the whole cluster
        change = drain(sub)[-1][1]
        assert change.fair_share == TOTAL / 2 and change.active_jobs == 2
        emu.add_app(name="train", queue="ml", gpus=2, tags=(ML_APP_TAG,))
        b.watcher.poll_once()  # ml active too: weights 2 and 2, hive's share halves
        [(_, change)] = drain(sub)
        assert change.cause == ShareCause.CAPACITY_CHANGED
        assert change.fair_share == Resources(32.0, 65536.0) / 2
        b.stop()


#: The compose cluster's queues (deploy/conf/capacity-scheduler.xml: default, analytics, gpu in
#: absolute-resource mode), scaled to the emulator's two nodes of 65536 MB, 32 vcores, 4 GPUs.
COMPOSE_QUEUES = {
    "default": "[memory=32768,vcores=16]",
    "analytics": "[memory=65536,vcores=32]",
    "gpu": "[memory=32768,vcores=16,yarn.io/gpu=8]",
}


def _share(sub: queue.Queue) -> Any:
    return drain(sub)[-1][1]


@pytest.mark.parametrize("version", ["3.4", "3.3"])
def test_capacity_scheduler_analytics_queue_is_the_capacity(
    tmp_path: Path, clock: Clock, version: str
) -> None:
    queues = {"default": 25, "analytics": 50, "ml": 25}
    with RMEmulator(nodes=2, gpus_per_node=4, queues=queues, manual_clock=True,
                    hadoop_version=version) as emu:  # fmt: skip
        core = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
        job, _ = core.register_query("q1")
        sub = core.subscribe_share(job)
        drain(sub)
        b = bridge(core, emu.url)  # the default analytics queue: "analytics"
        assert b.tick()
        change = _share(sub)
        assert change.cause == ShareCause.CAPACITY_CHANGED and change.active_jobs == 1
        assert change.fair_share == TOTAL / 2 and b.view.capacity == TOTAL / 2
        with RMClient(emu.url, **FAST) as rm:  # the operator shrinks the analytics queue
            rm.update_scheduler_conf(SchedConfUpdate(update_queue={
                "root.analytics": {"capacity": 25}, "root.default": {"capacity": 50}}))  # fmt: skip
        assert kinds(b.watcher.poll_once()) == ["CapacityChanged"]
        [(_, change)] = drain(sub)
        assert change.cause == ShareCause.CAPACITY_CHANGED and change.fair_share == TOTAL / 4
        emu.add_app(name="etl", queue="analytics", app_type="TEZ")  # |J| grows, R does not
        b.watcher.poll_once()
        assert _share(sub).fair_share == TOTAL / 8
        emu.lose_node("node-01:8041")  # the RM's effective capacity follows the nodes
        b.watcher.poll_once()
        change = _share(sub)
        assert change.cause == ShareCause.CAPACITY_CHANGED and change.fair_share == TOTAL / 16
        b.stop()
        other = bridge(core, emu.url, analytics_queues=["root.default"])  # configurable
        assert other.tick() and other.view.capacity == TOTAL / 4  # 50 % of one node
        other.stop()


def test_compose_absolute_queues_and_a_missing_analytics_queue(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, queues=COMPOSE_QUEUES, manual_clock=True) as emu:
        core = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
        job, _ = core.register_query("q1")
        sub = core.subscribe_share(job)
        drain(sub)
        b = bridge(core, emu.url)
        assert b.tick() and _share(sub).fair_share == Resources(32.0, 65536.0)
        emu.lose_node("node-01:8041")  # guarantees above the cluster: scaled down by the RM
        b.watcher.poll_once()
        assert _share(sub).fair_share == Resources(16.0, 32768.0)
        b.stop()
        with RMClient(emu.url, **FAST) as rm:
            metrics, sched = rm.cluster_metrics(), rm.scheduler()
        both = analytics_capacity(metrics, sched, ["analytics", "root.default", "default"])
        assert both == Resources(24.0, 49152.0)  # two queues, "default" counted once
        caplog.set_level(logging.WARNING, logger="yarn_arbiter.bridge.watcher")
        lost = bridge(core, emu.url, analytics_queues=["etl"])  # no such queue: the total
        assert lost.tick() and lost.view.capacity == TOTAL / 2
        assert lost.tick()
        warnings = [r for r in caplog.records if "no analytics queue etl" in r.getMessage()]
        assert len(warnings) == 1 and "root.analytics" in warnings[0].getMessage()
        lost.stop()


# -- the enforcer over HTTP --------------------------------------------------------------------


def _state_puts(emu: RMEmulator) -> int:
    return sum(1 for r in emu.requests if r.method == "PUT" and r.path.endswith("/state"))


def test_revoked_lease_ends_in_a_kill_after_the_grace_period_not_before(
    emu: RMEmulator, core: ArbiterCore, clock: Clock
) -> None:
    app_id, q = leased_app(core, 8)
    yid = yarn_ml_app(emu, app_id, gpus=8, seconds=3600, core=core)
    emu.advance(2)
    b = bridge(core, emu.url, slack_s=2.0)
    assert b.tick() and b.view.apps[yid].gpus_used == 8 and b.enforcer.log == []
    revoked = core.drain("node-01", 5.0)  # a revocation with 5 s of grace
    assert len(revoked) == 1 and any(isinstance(m, Revocation) for m in drain(q))
    t0 = clock.t
    for dt in (1.0, 4.99):  # in the grace period: the GPUs are still its own
        clock.t = t0 + dt
        assert b.tick() and b.enforcer.log == [] and not b.enforcer.state.over_since
    clock.t = t0 + 5.0  # the lease ended; the AM still holds 8 containers: slack starts
    assert b.tick() and b.enforcer.log == [] and b.enforcer.state.over_since == {yid: t0 + 5}
    clock.t = t0 + 6.99
    assert b.tick() and b.enforcer.log == [] and emu.cluster.app_state(yid) == "RUNNING"
    clock.t = t0 + 7.0
    b.enforcer.tick(b.view.apps.values())
    [rec] = b.enforcer.log
    assert (rec.action.kind, rec.action.target, rec.outcome, rec.attempt) == (KILL, yid, DONE, 1)
    # drain revokes only the drained machine's 4 GPUs: the app keeps leases for the other 4
    assert "uses 8" in rec.action.reason and "leases for 4" in rec.action.reason
    assert emu.cluster.app_state(yid) == "KILLED" and _state_puts(emu) == 1
    b.enforcer.tick(b.view.apps.values())  # the same tick again: no second kill
    assert len(b.enforcer.log) == 1 and _state_puts(emu) == 1
    assert b.tick()  # the watcher sees KILLED and finishes the app in the arbiter
    assert app_id not in core.apps and core.state.leases == ()
    assert len(b.enforcer.log) == 1 and _state_puts(emu) == 1
    b.stop()


def test_an_am_that_releases_in_time_is_not_killed(
    emu: RMEmulator, core: ArbiterCore, clock: Clock
) -> None:
    app_id, _ = leased_app(core, 8)
    yid = yarn_ml_app(emu, app_id, gpus=8, seconds=3600, core=core)
    emu.advance(2)
    b = bridge(core, emu.url, slack_s=0.0)
    b.tick()
    core.drain("node-01", 5.0)
    clock.t += 3.0
    with emu.cluster.lock:  # the AM checkpoints and releases its GPU containers in time
        app = emu.cluster.apps[yid]
        app.gpus = 0
        app.containers = [c for c in app.containers if not c.gpus]
    for dt in (2.0, 10.0, 100.0):
        clock.t += dt
        assert b.tick() and b.view.apps[yid].gpus_used == 0
    assert b.enforcer.log == [] and emu.cluster.app_state(yid) == "RUNNING"
    b.stop()


def test_gpu_queue_update_is_skipped_once_without_absolute_vectors(
    emu: RMEmulator, core: ArbiterCore
) -> None:
    leased_app(core, 3)
    b = bridge(core, emu.url, gpu_queue="root.ml")
    b.tick()
    [rec] = b.enforcer.log
    assert (rec.action.kind, rec.action.gpus, rec.outcome) == (QUEUE, 3, SKIPPED)
    assert "absolute-resource mode" in rec.detail and "capacity=40" in rec.detail
    b.tick()
    assert len(b.enforcer.log) == 1 and emu.cluster.conf_log == []
    b.stop()


@pytest.mark.parametrize("version", ["3.4", "3.3"])
def test_gpu_queue_capacity_follows_the_leases(tmp_path: Path, clock: Clock, version: str) -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, queues=COMPOSE_QUEUES, manual_clock=True,
                    start_seconds=0, hadoop_version=version) as emu:  # fmt: skip
        with RMClient(emu.url, **FAST) as rm:  # as deploy/conf: a maximum vector too
            rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.gpu": {
                "maximum-capacity": "[memory=131072,vcores=64,yarn.io/gpu=8]"}}))  # fmt: skip
        core = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
        leased_app(core, 3)
        b = bridge(core, emu.url, gpu_queue="root.gpu")
        assert b.tick()
        [rec] = b.enforcer.log
        assert (rec.action.kind, rec.action.gpus, rec.outcome) == (QUEUE, 3, DONE)
        assert rec.detail == (
            "capacity=[memory=32768,vcores=16,yarn.io/gpu=3], "
            "maximum-capacity=[memory=131072,vcores=64,yarn.io/gpu=3]"
        )
        with RMClient(emu.url, **FAST) as rm:
            conf = rm.scheduler_conf()
            gpu = rm.scheduler().queue("root.gpu")
        assert conf["yarn.scheduler.capacity.root.gpu.capacity"].endswith("yarn.io/gpu=3]")
        assert gpu.effective_min is not None and gpu.effective_min.gpus == 3
        assert gpu.effective_max is not None and gpu.effective_max.gpus == 3
        # YARN itself now refuses GPU containers beyond the leases in that queue
        big = emu.add_app(name="greedy", queue="gpu", gpus=4, seconds=100)
        ok = emu.add_app(name="fits", queue="gpu", gpus=3, seconds=100)
        emu.advance(1)
        assert (emu.cluster.app_state(big), emu.cluster.app_state(ok)) == ("ACCEPTED", "RUNNING")
        assert b.tick() and len(b.enforcer.log) == 1  # same leases: nothing sent again
        assert len(emu.cluster.conf_log) == 2
        leased_app(core, 2)  # two more GPUs under lease: the queue follows
        assert b.tick()
        rec = b.enforcer.log[-1]
        assert (rec.action.gpus, rec.outcome, len(emu.cluster.conf_log)) == (5, DONE, 3)
        assert "yarn.io/gpu=5" in rec.detail
        b.stop()


# -- outages, restarts, HA, bad answers ---------------------------------------------------------


def _baseline(
    emu: RMEmulator, core: ArbiterCore
) -> tuple[str, str, queue.Queue, queue.Queue, Bridge]:
    app_id, q = leased_app(core, 4)
    yid = yarn_ml_app(emu, app_id, gpus=4, seconds=3600, core=core)
    emu.advance(2)
    job, _ = core.register_query("q")
    sub = core.subscribe_share(job)
    b = bridge(core, emu.url)
    assert b.tick()
    drain(sub)
    return app_id, yid, q, sub, b


def _unchanged(core: ArbiterCore, app_id: str, leases, q: queue.Queue, sub: queue.Queue) -> None:
    assert app_id in core.apps and core.state.leases == leases and core.cluster.num_gpus == 8
    assert drain(q) == [] and drain(sub) == []  # no revocation, no close, no share update


def _no_nodes_yet(doc: dict) -> dict:
    zero = {"activeNodes": 0, "totalMB": 0, "totalVirtualCores": 0}
    return {"clusterMetrics": {**doc["clusterMetrics"], **zero}}


def test_outage_and_restart_cause_retries_and_no_spurious_change(
    emu: RMEmulator, core: ArbiterCore
) -> None:
    app_id, yid, q, sub, b = _baseline(emu, core)
    b.watcher.node_resync_s = 0  # count node absences at once (the resync rule: next test)
    leases = core.state.leases
    for mode in ("refused", "503", "drop"):
        emu.set_outage(mode)
        assert b.tick() is False and b.tick() is False
        assert "no active ResourceManager" in (b.watcher.stats.last_error or "")
        _unchanged(core, app_id, leases, q, sub)
        emu.set_outage(None)
        assert b.tick() is True and b.watcher.stats.consecutive_failures == 0
        _unchanged(core, app_id, leases, q, sub)
    assert b.watcher.stats.failures == 6
    # A recovering RM: empty lists, the app unknown by id, no capacity yet, for two polls;
    # then everything is back. Nothing is finished, cut or re-shared.
    not_found = json.dumps({"RemoteException": {"exception": "NotFoundException",
                            "message": f"app with id: {yid} not found"}})  # fmt: skip
    # 3 listings: the live list twice, plus once the ended ML apps (asked when the arbiter app
    # lost its live YARN app: did it end while nobody watched?)
    emu.inject("/apps", transform=lambda d: {"apps": None}, times=3)
    emu.inject(f"/apps/{yid}", status=404, body=not_found, times=2)
    emu.inject("/nodes", transform=lambda d: {"nodes": None}, times=2)
    emu.inject("/metrics", times=2, transform=_no_nodes_yet)
    assert b.watcher.poll_once() == () and b.watcher.poll_once() == ()
    assert dict(b.view.missing_nodes) == {"node-00:8041": 2, "node-01:8041": 2}
    assert dict(b.view.missing_apps) == {yid: 2}
    assert b.watcher.poll_once() == () and not b.view.missing_nodes and not b.view.missing_apps
    _unchanged(core, app_id, leases, q, sub)
    # A restart with work-preserving recovery: the apps are still there.
    emu.restart(keep_apps=True)
    assert b.watcher.poll_once() == ()
    _unchanged(core, app_id, leases, q, sub)
    # A restart without recovery: the apps are really gone; finished after 3 polls, not before.
    emu.restart(keep_apps=False)
    assert b.watcher.poll_once() == () and b.watcher.poll_once() == ()
    _unchanged(core, app_id, leases, q, sub)
    events = b.watcher.poll_once()
    assert kinds(events) == ["AppEnded"] and events[0].confirmed_by == "absence"
    assert app_id not in core.apps and core.state.leases == () and drain(q)[-1] is CLOSE
    b.stop()


def test_nodes_missing_from_a_young_rm_are_not_lost() -> None:
    """NodeManagers re-register over seconds after an RM restart: while the RM has been up
    less than node_resync_s, a node it does not list is not counted missing; a node it lists
    LOST still goes at once, and absence counts again once the RM is older."""
    n1 = NodeView("h:1", "h", "/r", "RUNNING", 4, 8, 8192)
    n2 = NodeView("h:2", "h", "/r", "RUNNING", 4, 8, 8192)
    view, _ = diff(RMView(), Observation(nodes={"h:1": n1, "h:2": n2}))
    young = Observation(nodes={}, rm_uptime_s=3.0)
    for _ in range(5):
        view, events = diff(view, young, confirm_polls=2, node_resync_s=60)
        assert events == () and not view.missing_nodes
    lost = replace(n2, state="LOST")
    view, events = diff(view, Observation(nodes={"h:2": lost}, rm_uptime_s=3.0),
                        confirm_polls=2, node_resync_s=60)  # fmt: skip
    assert kinds(events) == ["NodeRemoved"] and set(view.nodes) == {"h:1"}
    old = Observation(nodes={}, rm_uptime_s=61.0)
    view, _ = diff(view, old, confirm_polls=2, node_resync_s=60)
    view, events = diff(view, old, confirm_polls=2, node_resync_s=60)
    assert kinds(events) == ["NodeRemoved"] and not view.nodes


@pytest.mark.parametrize("mode", ["redirect", "refresh"])
def test_rm_ha_failover_mid_run(tmp_path: Path, clock: Clock, mode: str) -> None:
    with RMHAPair(nodes=2, gpus_per_node=4, manual_clock=True, start_seconds=1,
                  standby_mode=mode) as pair:  # fmt: skip
        core = make_core(tmp_path, initial_cluster(pair.urls, rm_options=FAST), clock)
        app_id, q = leased_app(core, 4)
        yid = yarn_ml_app(pair.active, app_id, gpus=4, seconds=30, core=core)
        b = bridge(core, pair.urls)
        assert b.tick() and yid in b.view.apps
        assert b.rm.active_url == pair.urls[0]
        new_active = pair.failover()
        assert b.watcher.poll_once() == ()  # the same cluster through the other RM
        assert b.rm.active_url == new_active and app_id in core.apps and drain(q) == []
        pair.cluster.advance(40)  # the app finishes; the new active RM reports it
        assert kinds(b.watcher.poll_once()) == ["AppEnded"] and app_id not in core.apps
        b.stop()


@pytest.mark.parametrize(
    ("path", "fault", "expect"),
    [
        ("/apps", {"truncate": 0.5}, "malformed JSON"),
        ("/nodes", {"body": "<html>oops</html>", "content_type": "text/html"}, "malformed JSON"),
        (
            "/nodes",
            {"transform": lambda d: {"nodes": {"node": [{"state": "RUNNING"}]}}},
            "missing required field nodes.node[0].id",
        ),
        ("/metrics", {"transform": lambda d: {"clusterMetrics": []}}, "should be an object"),
        ("/apps", {"transform": lambda d: {"applications": []}}, "missing top-level key 'apps'"),
    ],
)
def test_malformed_answers_are_clear_errors_and_change_nothing(
    emu: RMEmulator, core: ArbiterCore, path: str, fault: dict, expect: str
) -> None:
    app_id, _yid, q, sub, b = _baseline(emu, core)
    leases, view = core.state.leases, b.view
    emu.inject(path, **fault)
    assert b.tick() is False
    err = b.watcher.stats.last_error or ""
    assert f"GET /ws/v1/cluster{path}" in err and expect in err
    assert b.view == view and b.enforcer.log == []
    _unchanged(core, app_id, leases, q, sub)
    assert b.tick() is True and b.view.apps == view.apps and b.view.nodes == view.nodes
    b.stop()


# -- submit ------------------------------------------------------------------------------------


class RecordingCluster(SimCluster):
    """The emulator's cluster, keeping every submission context it receives over HTTP."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bodies: list[dict] = []

    def submit_json(self, body: Any, user: str | None) -> str:
        self.bodies.append(body)
        return super().submit_json(body, user)


def _submit_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="yarn-arbiter")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["submit", *argv])


def test_submit_end_to_end(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sim = RecordingCluster(nodes=2, gpus_per_node=4, manual_clock=True, start_seconds=1)
    with RMEmulator(sim) as emu:
        env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
               "ARBITER_POLICY": "fifo"}  # fmt: skip
        cluster = initial_cluster(emu.url, rm_options=FAST)
        arb = RunningArbiter(cluster, load_config(environ=env), admin_token="adm").start()
        try:
            args = _submit_args(
                "--am-command", "python -m trainer --epochs 3", "--gpus", "4", "--gang-size", "2",
                "--name", "resnet", "--queue", "ml", "--priority", "3", "--memory-mb", "2048",
                "--vcores", "2", "--tag", "Team-A", "--env", f"{EMULATOR_GPUS_ENV}=4",
                "--env", "EPOCHS=3", "--user", "alice", "--am-arbiter", "arbiter:50051",
            )  # fmt: skip
            environ = {ENV_RM_URL: emu.url, ENV_ARBITER_ADDRESS: f"localhost:{arb.port}"}
            out, err = io.StringIO(), io.StringIO()
            assert args.func(args, environ=environ, out=out, err=err) == 0, err.getvalue()
            yid = out.getvalue().strip()
            assert yid.startswith("application_") and "\n" not in yid

            [body] = sim.bodies
            envs = {e["key"]: e["value"] for e in body["am-container-spec"]["environment"]["entry"]}
            app_id, token = envs[ENV_APP_ID], envs[ENV_APP_TOKEN]
            assert body["application-id"] == yid and body["queue"] == "ml"
            assert body["priority"] == 3 and body["resource"] == {"memory": 2048, "vCores": 2}
            assert (
                body["am-container-spec"]["commands"]["command"] == "python -m trainer --epochs 3"
            )
            assert body["application-tags"]["tag"] == [
                ML_APP_TAG,
                arbiter_app_tag(app_id),
                "team-a",
            ]
            assert envs[ENV_ARBITER_ADDRESS] == "arbiter:50051" and envs["EPOCHS"] == "3"
            assert ENV_ARBITER_TLS_CA not in envs

            core = arb.core  # the arbiter has the app, and the token is its token
            assert core.authenticate_app(token) == app_id
            rec = core.apps[app_id]
            assert (rec.app_name, rec.user, rec.queue, rec.max_gpu_demand) == (
                "resnet", "alice", "ml", 4)  # fmt: skip
            assert rec.jobs[0]["gang_size"] == 2
            for text in (out.getvalue(), err.getvalue(), caplog.text):
                assert token not in text
            assert app_id in err.getvalue()

            emu.advance(2)  # RUNNING: AM + 4 GPU containers (the emulator's stand-in AM)
            b = bridge(core, emu.url)
            assert b.tick()
            view = b.view.apps[yid]
            assert (view.kind, view.arbiter_id, view.gpus_used, view.queue) == (ML, app_id, 4, "ml")
            b.stop()

            # Errors: a clear message, exit 1, nothing submitted.
            for argv, env2, expect in (
                (["--env", f"{ENV_APP_TOKEN}=x"], environ, "cannot set " + ENV_APP_TOKEN),
                (["--memory-mb", "99999"], environ, "maximum container memory 8192"),
                ([], {ENV_RM_URL: emu.url, ENV_ARBITER_ADDRESS: "localhost:1"}, "RegisterApp"),
                ([], {ENV_ARBITER_ADDRESS: "localhost:1"}, ENV_RM_URL),
                (["--tls-cert", "x.pem"], environ, "--tls-cert and --tls-key go together"),
            ):
                bad = _submit_args("--am-command", "x", "--gpus", "1", "--timeout", "1", *argv)
                out, err = io.StringIO(), io.StringIO()
                assert bad.func(bad, environ=env2, out=out, err=err) == 1
                assert expect in err.getvalue() and out.getvalue() == ""
            assert len(sim.bodies) == 1
        finally:
            arb.stop(0)


def test_submit_over_tls(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    certs: dict[str, Path] = request.getfixturevalue("pki")  # conftest: CA, server, client
    sim = RecordingCluster(nodes=1, gpus_per_node=2, manual_clock=True)
    with RMEmulator(sim) as emu:
        env = {
            "ARBITER_GRPC_PORT": "0",
            "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
            "ARBITER_GRPC_TLS_ENABLED": "true",
            "ARBITER_GRPC_TLS_CERT": str(certs["server.crt"]),
            "ARBITER_GRPC_TLS_KEY": str(certs["server.key"]),
        }
        arb = RunningArbiter(
            initial_cluster(emu.url, rm_options=FAST), load_config(environ=env), admin_token="a"
        ).start()
        try:
            environ = {ENV_RM_URL: emu.url, ENV_ARBITER_ADDRESS: f"localhost:{arb.port}"}
            plain = _submit_args("--am-command", "am", "--gpus", "2", "--timeout", "2")
            err = io.StringIO()
            assert plain.func(plain, environ=environ, out=io.StringIO(), err=err) == 1
            assert "RegisterApp" in err.getvalue() and sim.bodies == []
            args = _submit_args("--am-command", "am", "--gpus", "2", "--tls-ca", str(certs["ca"]),
                                "--am-tls-ca", "/etc/yarn-arbiter/ca.pem")  # fmt: skip
            out = io.StringIO()
            assert args.func(args, environ=environ, out=out, err=io.StringIO()) == 0
            [body] = sim.bodies
            entries = body["am-container-spec"]["environment"]["entry"]
            envs = {e["key"]: e["value"] for e in entries}
            assert envs[ENV_ARBITER_TLS_CA] == "/etc/yarn-arbiter/ca.pem"
            assert arb.core.authenticate_app(envs[ENV_APP_TOKEN]) == envs[ENV_APP_ID]
            assert out.getvalue().strip() == body["application-id"]
        finally:
            arb.stop(0)


def test_build_submission_is_pure_and_keeps_tls_ca() -> None:
    spec = SubmitSpec(name="n", command="c", max_gpus=2, tags=("x",), env={"A": "1"})
    sub = build_submission(
        spec, yarn_app_id="application_1_0001", arbiter_app_id="app-1", token="secret",
        arbiter_address="arb:1", tls_ca="/etc/ca.pem",
    )  # fmt: skip
    assert sub.environment == {
        "A": "1",
        ENV_ARBITER_ADDRESS: "arb:1",
        ENV_APP_ID: "app-1",
        ENV_APP_TOKEN: "secret",
        ENV_ARBITER_TLS_CA: "/etc/ca.pem",
    }
    assert sub.tags == (ML_APP_TAG, "yarn-arbiter-app:app-1", "x")


# -- the bridge as serve runs it --------------------------------------------------------------


def test_serve_settings_and_the_bridge_thread(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert bridge_settings(parser.parse_args([]), environ={}) is None  # standalone
    s = bridge_settings(parser.parse_args([]), environ={ENV_RM_URL: "http://a:8088,http://b:8088"})
    assert s is not None and s.rm_urls == ("http://a:8088", "http://b:8088")
    s = bridge_settings(
        parser.parse_args(["--rm-url", "http://rm:8088", "--rm-poll-seconds", "2",
                           "--gpu-queue", "root.gpu", "--no-enforce"]), environ={},
    )  # fmt: skip
    assert s is not None and s.rm_urls == ("http://rm:8088",)
    assert (s.kwargs["poll_s"], s.kwargs["gpu_queue"], s.kwargs["enforce"]) == (
        2.0,
        "root.gpu",
        False,
    )
    with pytest.raises(ValueError, match="rm-poll-seconds"):
        bridge_settings(parser.parse_args(["--rm-url", "x", "--rm-poll-seconds", "0"]), environ={})

    with RMEmulator(nodes=2, gpus_per_node=4, manual_clock=True, start_seconds=1) as emu:
        env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
               "ARBITER_POLICY": "fifo", "ARBITER_LEASE_SECONDS": "60"}  # fmt: skip
        arb = RunningArbiter(
            initial_cluster(emu.url, rm_options=FAST), load_config(environ=env), admin_token="a"
        ).start()
        bridge_ = start_bridge(arb.core, emu.url, poll_s=0.05, rm_options=FAST)
        try:
            app_id, _ = arb.core.register_app(
                app_name="a", user="u", queue_name="ml", max_gpu_demand=2
            )
            yid = yarn_ml_app(emu, app_id, gpus=2, seconds=10, core=arb.core)
            emu.add_node("node-02", gpus=4)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and (
                yid not in bridge_.view.apps or arb.core.cluster.num_gpus != 12
            ):
                time.sleep(0.02)
            assert yid in bridge_.view.apps and arb.core.cluster.num_gpus == 12
            emu.advance(20)  # the app finishes; the bridge finishes it in the arbiter
            while time.monotonic() < deadline and app_id in arb.core.apps:
                time.sleep(0.02)
            assert app_id not in arb.core.apps
        finally:
            bridge_.stop()
            arb.stop(0)
        assert bridge_.watcher.stats.failures == 0


def test_arbiter_apps_that_ended_while_the_bridge_was_away(
    emu: RMEmulator, core: ArbiterCore
) -> None:
    app_id, q = leased_app(core, 4)
    yid = yarn_ml_app(emu, app_id, gpus=4, seconds=5, core=core)
    emu.advance(10)  # it ran and finished before any bridge watched
    assert emu.cluster.app_state(yid) == "FINISHED"
    b = bridge(core, emu.url)
    assert b.tick()
    assert app_id not in core.apps and core.state.leases == () and drain(q)[-1] is CLOSE
    b.stop()


# -- SPNEGO / auth hooks from the command line ---------------------------------------------------


NEGOTIATE_SCRIPT = """\
import base64, os, sys
if os.environ.get("FAIL_AUTH"):
    sys.exit("no Kerberos ticket")
method, host = os.environ["YARN_ARBITER_RM_REQUEST_METHOD"], os.environ["YARN_ARBITER_RM_HOST"]
with open(sys.argv[1], "a") as log:
    log.write(method + " " + host + "\\n")
print("Negotiate " + base64.b64encode(b"fake-ticket-for-HTTP@" + host.encode()).decode())
"""


def negotiate_hook(method: str, url: str) -> Mapping[str, str]:
    """An importable auth hook (``--rm-auth-hook test_yarn_bridge:negotiate_hook``)."""
    return {"Authorization": "Negotiate aW1wb3J0ZWQ="}


def _negotiate_command(tmp_path: Path) -> tuple[str, Path]:
    script, log = tmp_path / "negotiate.py", tmp_path / "negotiate.log"
    script.write_text(NEGOTIATE_SCRIPT)
    return shlex.join([sys.executable, str(script), str(log)]), log


FAKE_TOKEN = "Negotiate ZmFrZS10aWNrZXQtZm9yLUhUVFBAMTI3LjAuMC4x"  # fake-ticket-for-HTTP@127.0.0.1


def test_serve_auth_header_command_reaches_every_rm_call(tmp_path: Path, clock: Clock) -> None:
    command, log = _negotiate_command(tmp_path)
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    with RMEmulator(nodes=2, gpus_per_node=4, queues=COMPOSE_QUEUES, manual_clock=True,
                    require_auth=True) as emu:  # fmt: skip
        core = make_core(tmp_path, initial_cluster(emu.url, rm_options=FAST), clock)
        leased_app(core, 2)
        without = bridge(core, emu.url, gpu_queue="root.gpu")
        assert without.tick()
        [rec] = without.enforcer.log  # a write without a user: Hadoop's 403
        assert rec.outcome == FAILED and "not authenticated" in rec.detail
        without.stop()
        args = parser.parse_args(["--rm-url", emu.url, "--gpu-queue", "root.gpu",
                                  "--rm-auth-header-command", command])  # fmt: skip
        settings = bridge_settings(args, environ={})
        assert settings is not None
        kwargs = dict(settings.kwargs)
        kwargs["rm_options"] = {**FAST, **kwargs["rm_options"]}
        kwargs["poll_s"] = 0.05
        b = Bridge(core, settings.rm_urls, **kwargs)
        assert b.tick()
        [rec] = b.enforcer.log
        assert (rec.action.kind, rec.outcome) == (QUEUE, DONE)
        puts = [r for r in emu.requests if r.method == "PUT"]
        assert puts[-1].headers["authorization"] == FAKE_TOKEN
        assert emu.cluster.conf_log[-1]["user"] == "spnego"
        calls = log.read_text().split("\n")[:-1]
        assert "PUT 127.0.0.1" in calls and "GET 127.0.0.1" in calls  # reads carry it too
        b.stop()
    both = parser.parse_args(["--rm-auth-header-command", "x", "--rm-auth-hook", "m:f"])
    with pytest.raises(ValueError, match="not both"):
        bridge_settings(both, environ={ENV_RM_URL: "http://rm:8088"})


def test_auth_hook_failures_and_imported_hooks(tmp_path: Path) -> None:
    command, _ = _negotiate_command(tmp_path)
    with RMEmulator(nodes=1, manual_clock=True, require_auth=True) as emu:
        app = emu.add_app(seconds=100)
        failing = header_command_hook(command, environ={"FAIL_AUTH": "1"})
        with RMClient(emu.url, auth=failing, **FAST) as rm, pytest.raises(RMAuthError) as err:
            rm.apps()
        assert "exited 1" in str(err.value) and "no Kerberos ticket" in str(err.value)
        parser = argparse.ArgumentParser()
        add_serve_arguments(parser)
        hook = auth_hook_from_args(
            parser.parse_args(["--rm-auth-hook", "test_yarn_bridge:negotiate_hook"])
        )
        assert hook is negotiate_hook
        with RMClient(emu.url, auth=hook, **FAST) as rm:
            assert rm.kill_app(app) == "KILLED"
        assert emu.requests[-1].headers["authorization"] == "Negotiate aW1wb3J0ZWQ="
        cached = header_command_hook(command, cache_seconds=60)
        with RMClient(emu.url, auth=cached, **FAST) as rm:
            for _ in range(3):
                rm.cluster_metrics()
        assert (tmp_path / "negotiate.log").read_text().count("GET") == 1
        for spec, message in (("nomodule_xyz:f", "No module"), ("yarn_bridge.auth:nope", "nope"),
                              ("no-colon", "module:function")):  # fmt: skip
            with pytest.raises(ValueError, match=message):
                auth_hook_from_args(parser.parse_args(["--rm-auth-hook", spec]))


def test_submit_with_an_auth_header_command(tmp_path: Path) -> None:
    command, _ = _negotiate_command(tmp_path)
    sim = RecordingCluster(nodes=1, gpus_per_node=2, manual_clock=True)
    with RMEmulator(sim, require_auth=True) as emu:
        env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
               "ARBITER_POLICY": "fifo"}  # fmt: skip
        arb = RunningArbiter(
            initial_cluster(emu.url, rm_options=FAST), load_config(environ=env), admin_token="a"
        ).start()
        try:
            environ = {ENV_RM_URL: emu.url, ENV_ARBITER_ADDRESS: f"localhost:{arb.port}"}
            plain = _submit_args("--am-command", "x", "--gpus", "1", "--timeout", "2")
            err = io.StringIO()
            assert plain.func(plain, environ=environ, out=io.StringIO(), err=err) == 1
            assert "not authenticated" in err.getvalue() and sim.bodies == []
            args = _submit_args("--am-command", "x", "--gpus", "1", "--timeout", "2",
                                "--rm-auth-header-command", command)  # fmt: skip
            out, err = io.StringIO(), io.StringIO()
            assert args.func(args, environ=environ, out=out, err=err) == 0, err.getvalue()
            assert out.getvalue().strip() == sim.bodies[0]["application-id"]
            posts = [r for r in emu.requests if r.method == "POST"]
            assert [r.path.rsplit("/", 1)[-1] for r in posts[-2:]] == ["new-application", "apps"]
            assert all(r.headers["authorization"] == FAKE_TOKEN for r in posts[-2:])
        finally:
            arb.stop(0)


def test_a_forged_tag_cannot_end_or_shield_another_app(emu: RMEmulator, core: ArbiterCore) -> None:
    """An app bound to its YARN application at registration is finished only by that
    application's end: another YARN app carrying its tag (forged, or a stale resubmission) is
    ignored by the watcher and the enforcer alike, and a journal restart keeps the binding."""
    real = yarn_ml_app(emu, "placeholder", gpus=1)  # the app's own YARN application
    app_id, _ = core.register_app(app_name="ml", user="u", queue_name="ml", max_gpu_demand=4,
                                  yarn_app_id=real)  # fmt: skip
    forged = yarn_ml_app(emu, app_id, gpus=2)
    b = bridge(core, emu.url)
    assert b.tick()
    assert b.view.apps[forged].arbiter_id is None  # unlinked: not app_id's
    with RMClient(emu.url, **FAST) as rm:
        rm.kill_app(forged)
    for _ in range(3):
        assert b.tick()
    assert app_id in core.apps  # the forged app's end did not finish it
    assert core.apps[app_id].yarn_app_id == real
    with pytest.raises(RequestError, match="is not application_"):
        core.register_app(app_name="x", user="u", queue_name="q", max_gpu_demand=1,
                          yarn_app_id="application_1; DROP")  # fmt: skip
    b.stop()
