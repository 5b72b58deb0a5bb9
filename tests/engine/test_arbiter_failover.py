"""Arbiter HA on a real ZooKeeper (arbiter.ha): two ``yarn-arbiter serve --ha-zk`` processes,
real sockets, Agents with both addresses.

* kill -9 of the active with 40 Agents bidding: the standby takes over within the stated time,
  serves every lease the Agents were granted (none lost), no GPU in two live leases (none
  duplicated), and every Agent resumes its session on it;
* ZooKeeper frozen (SIGSTOP of its JVM: everyone partitioned from it): the active steps down
  (its RPCs UNAVAILABLE, /readyz 503) and, once ZooKeeper is back, one arbiter serves the same
  leases;
* the active frozen (SIGSTOP: a long GC pause) until the standby takes over, then resumed: it
  steps down and its writes are fenced; the new active keeps the leases;
* both arbiters killed and restarted: the leases and apps are back.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from support import wait_for

from arbiter.agent import Agent
from arbiter.cluster import load_cluster
from arbiter.rounds import ArbiterState, Lease, check_invariants
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc
from yarn_bridge.ha_local import (
    FAILOVER_SETTINGS,
    ArbiterProcess,
    HaPairFiles,
    apps_at,
    bidding_agent,
    dump,
    leases_at,
    start_arbiter_process,
)
from yarn_bridge.submit import SubmitSpec, register_app

pytestmark = [pytest.mark.failover, pytest.mark.slow]

CLUSTER = load_cluster("themis-testbed")
SESSION_S = 2.0
# The stated takeover time: the session timeout (a dead active's lock node goes with it) plus
# the standby's start as the active (load the journal, bind the ports), with room for a busy
# 2-core machine.
TAKEOVER_S = SESSION_S + 10.0
AGENTS = 40


class Pair:
    def __init__(self, tmp_path: Path, zk_address: str) -> None:
        self.tmp, self.zk = tmp_path, zk_address
        self.files = HaPairFiles.create(tmp_path / "creds")
        self.admin = self.files.token("admin")
        self.members: dict[str, ArbiterProcess] = {}
        self.agents: list[Agent] = []

    def start(self, ha_id: str) -> ArbiterProcess:
        """Start ``ha_id`` (again: on its old ports, which its Agents know)."""
        old = self.members.get(ha_id)
        p = start_arbiter_process(
            self.tmp, ha_id, self.zk, self.files, session_timeout_s=SESSION_S,
            port=old.port if old else None, metrics_port=old.metrics_port if old else None,
            settings=FAILOVER_SETTINGS,
        )  # fmt: skip
        self.members[ha_id] = p
        return p

    def wait_role(self, p: ArbiterProcess, role: str, timeout: float = 60.0) -> float:
        t0 = time.monotonic()
        try:
            wait_for(f"{p.ha_id} {role}", lambda: p.role() == role, timeout=timeout, every=0.02)
        except AssertionError as exc:
            logs = dump(list(self.members.values()))
            raise AssertionError(f"{p.ha_id} not {role}; logs: {logs}") from exc
        return time.monotonic() - t0

    def active(self) -> ArbiterProcess | None:
        roles = {h: p.role() for h, p in self.members.items() if p.alive()}
        actives = [h for h, r in roles.items() if r == "active"]
        assert len(actives) <= 1, f"two actives: {roles}"
        return self.members[actives[0]] if actives else None

    @property
    def addresses(self) -> str:
        return ",".join(p.address for p in self.members.values())

    def add_agents(self, n: int) -> None:
        submit = self.files.token("submit")
        self.agents += [bidding_agent(self.addresses, submit, (1, 2, 4)[i % 3]) for i in range(n)]

    def stop(self) -> None:
        for a in self.agents:
            a.stop_async()
        for p in self.members.values():  # first: the Agents' streams end with their arbiter
            p.stop()
        for a in self.agents:
            a.stop()


@pytest.fixture
def pair(zookeeper, tmp_path: Path) -> Iterator[Pair]:
    p = Pair(tmp_path, zookeeper.address)
    try:
        yield p
    finally:
        p.stop()


def _domain(leases: list[pb.Lease]) -> tuple[Lease, ...]:
    return tuple(
        Lease(x.app_id, frozenset(x.gpu_ids), x.start_unix_s, x.end_unix_s, x.round) for x in leases
    )


def _up_with_agents(pair: Pair) -> tuple[ArbiterProcess, ArbiterProcess]:
    a1 = pair.start("a1")
    pair.wait_role(a1, "active")
    a2 = pair.start("a2")
    pair.wait_role(a2, "standby")
    pair.add_agents(AGENTS)
    # a busy pair: most of the cluster leased (rounds keep running while we look)
    wait_for("32 GPUs leased", lambda: sum(len(x.gpu_ids) for x in
             leases_at(a1.address, pair.admin) or []) >= 32, timeout=120)  # fmt: skip
    return a1, a2


def _assert_same_leases(pair: Pair, before: list[pb.Lease], address: str) -> list[pb.Lease]:
    """What ``address`` serves keeps every lease of ``before`` still live and every lease an
    Agent holds (none lost), with no GPU in two leases (none duplicated)."""
    after = leases_at(address, pair.admin)
    assert after is not None
    check_invariants(ArbiterState(CLUSTER.gpu_ids, _domain(after)))  # no GPU twice
    served = {x.lease_id: (x.app_id, sorted(x.gpu_ids), x.end_unix_s) for x in after}
    now = time.time()
    live = {x.lease_id: (x.app_id, sorted(x.gpu_ids), x.end_unix_s) for x in before
            if x.end_unix_s > now + 0.5}  # fmt: skip
    assert live, "nothing was leased before the fault: the test proves nothing"
    assert {k: served.get(k) for k in live} == live  # none lost, none changed
    held = {lid for a in pair.agents for lid, h in a.leases.items() if h.end > now + 0.5}
    assert held <= set(served), f"leases Agents hold that the arbiter lost: {held - set(served)}"
    return after


def _late_bid(error: tuple[str, str]) -> bool:
    """A bid refused because its round had closed (the arbiter, frozen mid-round, read it
    after the deadline): the Agent was told so, nothing was granted or lost."""
    code, message = error
    return code == "FAILED_PRECONDITION" and "is not the open round" in message


def _stacks(app_ids: object) -> dict[str, str]:
    """Where the threads of these Agents are now (``agent-<app id>`` and its stream's reader,
    ``agent-<app id>-reader``), for a failure."""
    names = {f"agent-{a}{end}" for a in app_ids for end in ("", "-reader")}  # type: ignore[attr-defined]
    frames = sys._current_frames()
    return {t.name: "".join(traceback.format_stack(frames[t.ident]))
            for t in threading.enumerate() if t.name in names and t.ident in frames}  # fmt: skip


def _agents_resume_on(pair: Pair, p: ArbiterProcess, *, late_bids: bool = False) -> None:
    """Every Agent's session comes back on the active: ``p``, or the one after it if ``p``
    stepped down meanwhile (on a loaded machine a 2 s ZooKeeper session can expire again;
    the Agents must follow that failover too), and no Agent saw an error (``late_bids``: but a
    late bid refused). Fails naming the Agents still missing."""
    ids = {a.app_id for a in pair.agents}
    seen: dict[str, object] = {"active": p, "missing": ids}

    def connected() -> bool:
        now = p if p.role() == "active" else pair.active()
        if now is None:
            return False
        seen["active"] = now
        served = {x.app_id for x in apps_at(now.address, pair.admin) or [] if x.connected}
        seen["missing"] = ids - served
        return not seen["missing"]

    try:
        wait_for("every Agent's session on the active", connected, timeout=60)
    except AssertionError as exc:
        now = seen["active"]
        missing = seen["missing"]
        said = {a.app_id: (a.target, a.errors[-3:]) for a in pair.agents
                if a.app_id in missing}  # type: ignore[operator]  # fmt: skip
        raise AssertionError(f"{exc}: on {getattr(now, 'ha_id', now)}, not connected: "
                             f"{sorted(seen['missing'])}; their targets and last errors: "
                             f"{said}; their threads: "
                             f"{_stacks(seen['missing'])}; logs: "
                             f"{dump(list(pair.members.values()))}") from exc  # fmt: skip
    active = seen["active"]
    assert isinstance(active, ArbiterProcess)
    errors = {a.app_id: [e for e in a.errors if not (late_bids and _late_bid(e))]
              for a in pair.agents}  # fmt: skip
    assert {a.app_id: a.target for a in pair.agents} == dict.fromkeys(ids, active.address)
    assert not any(errors.values()), errors


def test_kill_9_of_the_active_the_standby_serves_the_same_leases(pair: Pair) -> None:
    a1, a2 = _up_with_agents(pair)
    before = leases_at(a1.address, pair.admin) or []
    t0 = time.monotonic()
    a1.kill()
    took = pair.wait_role(a2, "active", timeout=TAKEOVER_S)
    assert took < TAKEOVER_S
    print(f"takeover after kill -9: {time.monotonic() - t0:.2f} s")
    _assert_same_leases(pair, before, a2.address)
    _agents_resume_on(pair, a2)
    # the killed one comes back as the standby and answers UNAVAILABLE naming the active
    a1 = pair.start("a1")
    pair.wait_role(a1, "standby")
    wait_for("the standby to know the active", lambda: (a1.readyz() or {}).get("checks", {})
             .get("ha", {}).get("active", "").startswith("a2@"))  # fmt: skip
    channel = grpc.insecure_channel(a1.address, options=[("grpc.use_local_subchannel_pool", 1)])
    with channel, pytest.raises(grpc.RpcError) as err:
        rpc.AdminStub(channel).ListLeases(
            pb.ListLeasesRequest(), metadata=[("x-admin-token", pair.admin)], timeout=5
        )
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert f"the active arbiter is a2 at {a2.address}" in err.value.details()
    # `yarn-arbiter submit --arbiter a1,a2` registers past the standby, on the active
    spec = SubmitSpec(name="late", command="true", max_gpus=1)
    app_id, _ = register_app(spec, f"{a1.address},{a2.address}",
                             submit_token=pair.files.token("submit"))  # fmt: skip
    assert app_id in {x.app_id for x in apps_at(a2.address, pair.admin) or []}


def test_zookeeper_frozen_the_active_steps_down_then_one_serves_again(
    pair: Pair, zookeeper
) -> None:
    a1, _ = _up_with_agents(pair)
    before = leases_at(a1.address, pair.admin) or []
    zookeeper.pause()
    try:
        pair.wait_role(a1, "standby", timeout=SESSION_S * 3 + 5)
        assert leases_at(a1.address, pair.admin) is None  # it serves nothing (UNAVAILABLE)
        assert pair.active() is None  # nobody can be sure it leads: nobody serves
        st = a1.readyz()
        assert st is not None and st["_code"] == 503 and not st["healthy"]  # no session
    finally:
        zookeeper.resume()
    p = wait_for("an active again", pair.active, timeout=60)
    _assert_same_leases(pair, before, p.address)
    _agents_resume_on(pair, p)


def test_a_frozen_active_is_fenced_and_steps_down(pair: Pair) -> None:
    a1, a2 = _up_with_agents(pair)
    a1.signal(signal.SIGSTOP)  # a long GC pause: its session expires, a2 takes over
    try:
        pair.wait_role(a2, "active", timeout=TAKEOVER_S)
        before = leases_at(a2.address, pair.admin) or []
    finally:
        a1.signal(signal.SIGCONT)
    pair.wait_role(a1, "standby", timeout=30)
    assert pair.active() is a2
    assert "stepping down" in a1.tail(200)
    _assert_same_leases(pair, before, a2.address)
    # bids a1 read after SIGCONT for the round it had offered before it froze were late
    _agents_resume_on(pair, a2, late_bids=True)


def test_both_arbiters_restarted(pair: Pair) -> None:
    a1, a2 = _up_with_agents(pair)
    before = leases_at(a1.address, pair.admin) or []
    apps = {x.app_id for x in apps_at(a1.address, pair.admin) or []}
    a2.kill()
    a1.kill()
    for h in ("a2", "a1"):
        pair.start(h)
    p = wait_for("an active after both restarted", pair.active, timeout=60)
    _assert_same_leases(pair, before, p.address)
    assert {x.app_id for x in apps_at(p.address, pair.admin) or []} == apps
    _agents_resume_on(pair, p)
