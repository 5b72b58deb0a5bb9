"""A stateful property test of the arbiter's gRPC API (hypothesis's rule-based state machine).

Random sequences of what outsiders and operators do, over a real socket on a served arbiter
with a manual clock: register apps (up to four), open and drop sessions, release and renew
leases, drain machines, let time pass, the YARN bridge ending an app, and restarts on the same
journal. After every step, on one consistent view of the server (``ArbiterCore.snapshot``) and
on its journal read back by a second connection:

* no GPU is in two leases whose intervals overlap;
* no lease belongs to an app the arbiter does not know, nor runs longer than one lease length
  from its start or from now (renewals do not stack);
* no lease on a drained machine lasts past the drain's grace;
* every GPU is exactly one of free (offerable), leased (live or reserved) or drained-and-idle;
* the journal, reloaded, holds the same apps, leases, round and drained machines as memory.

Derandomized (the same sequences every run). Checked by mutation: it fails when drains are not
journaled or when a lease on a drained machine may be renewed; renewals that stack are caught by
test_reliability's own test (these sequences rarely renew with nobody waiting).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import grpc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule
from support import Clock
from support.api import SMALL, Api, Session, serve

from arbiter.journal import SQLiteJournal, lease_id
from arbiter.server import RunningArbiter

MACHINES = ("node-000", "node-001")
LEASE_S = 60.0  # support.api's arbiter.lease.seconds
# Codes a correct arbiter may answer a legitimate but ill-timed call with; UNKNOWN (an
# exception that escaped) or INTERNAL never.
EXPECTED = {
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class ArbiterAPI(RuleBasedStateMachine):
    apps = Bundle("apps")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="arbiter-stateful-"))
        self.clock = Clock()
        self.arb: RunningArbiter = self._serve()
        self.api = Api(self.arb.port)
        self.tokens: dict[str, str] = {}
        self.sessions: dict[str, Session] = {}
        self.drains: dict[str, float] = {}  # machine -> when its leases must have ended

    def _serve(self) -> RunningArbiter:
        # Agents here send no heartbeats: past 30 s they are silent (their leases end) and
        # stop counting as waiting for GPUs
        return serve(self.dir / "journal.db", self.clock, arbiter_heartbeat_timeout_seconds=30)

    def teardown(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.api.close()
        self.arb.stop(0)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _call(self, call, *args):
        try:
            return call(*args)
        except grpc.RpcError as err:
            assert err.code() in EXPECTED, (err.code(), err.details())
            return None

    # -- what an outsider or an operator does -----------------------------------------------------

    @precondition(lambda self: len(self.tokens) < 4)
    @rule(target=apps, demand=st.integers(1, 4))
    def register(self, demand: int) -> str:
        app_id, token = self.api.register(demand)
        self.tokens[app_id] = token
        return app_id

    @rule(app=apps)
    def open_session(self, app: str) -> None:
        if app in self.tokens and app not in self.sessions:
            self.sessions[app] = self.api.session(app, self.tokens[app])

    @rule(app=apps)
    def drop_session(self, app: str) -> None:
        s = self.sessions.pop(app, None)
        if s is not None:
            s.close()

    @rule(app=apps, which=st.integers(0, 3), whole=st.booleans())
    def release(self, app: str, which: int, whole: bool) -> None:
        mine = self.api.leases(app)
        if app in self.tokens and mine:
            x = mine[which % len(mine)]
            gpus = [] if whole else sorted(x.gpu_ids)[:1]
            self._call(lambda: self.api.am.ReleaseLease(
                self.api_release(x.lease_id, gpus), metadata=[("x-app-token", self.tokens[app])]
            ))  # fmt: skip

    @staticmethod
    def api_release(lid: str, gpus: list[str]):
        from protos.yarnarbiter.v1 import arbiter_pb2 as pb

        return pb.ReleaseLeaseRequest(lease_id=lid, gpu_ids=gpus)

    @rule(app=apps, which=st.integers(0, 3))
    def renew(self, app: str, which: int) -> None:
        mine = self.api.leases(app)
        if app in self.tokens and mine:
            self._call(self.api.renew, self.tokens[app], mine[which % len(mine)].lease_id)

    @rule(app=apps, times=st.integers(2, 4))
    def renew_in_a_row(self, app: str, times: int) -> None:
        """An AM renewing the lease it got back, again and again."""
        mine = self.api.leases(app)
        if app in self.tokens and mine:
            lease = mine[0]
            for _ in range(times):
                got = self._call(self.api.renew, self.tokens[app], lease.lease_id)
                if got is None:
                    break
                lease = got

    @rule(machine=st.sampled_from(MACHINES), grace=st.sampled_from([0.0, 5.0, 30.0]))
    def drain(self, machine: str, grace: float) -> None:
        self.api.drain(machine, grace)
        self.drains.setdefault(machine, self.clock.t + grace)

    @rule(seconds=st.sampled_from([1.0, 10.0, 61.0]))
    def advance(self, seconds: float) -> None:
        self.clock.t += seconds

    @rule(app=apps)
    def yarn_app_ended(self, app: str) -> None:
        """The YARN bridge reports the app's YARN application finished."""
        self.arb.core.finish_app(app, "FINISHED (test)")
        self.tokens.pop(app, None)
        s = self.sessions.pop(app, None)
        if s is not None:
            s.close()

    @rule()
    def restart(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()
        self.api.close()
        self.arb.stop(0)
        self.arb = self._serve()
        self.api = Api(self.arb.port)

    # -- what must hold after every step ------------------------------------------------------

    @invariant()
    def leases_are_sound(self) -> None:
        view = self.arb.core.snapshot()
        leases = view.leases
        for i, x in enumerate(leases):
            for y in leases[i + 1 :]:
                assert not (x.gpus & y.gpus and x.overlaps(y)), (x, y)
        assert {x.app_id for x in leases} <= set(view.apps)
        for x in leases:  # one lease length at most, from its start or from now (renewals)
            assert x.end <= max(x.start, view.now) + LEASE_S + 1e-6, x
        for x in leases:
            for g in x.gpus:
                machine = SMALL.gpu(g).machine
                if machine in self.drains:
                    assert x.end <= max(self.drains[machine], x.start) + 1e-6, (machine, x)
        busy = {g for x in leases if x.end > view.now for g in x.gpus}
        drained_idle = {g.id for g in SMALL.gpus if g.machine in view.drained} - busy
        free = set(view.free)
        assert not (free & busy) and not (free & drained_idle)
        assert free | busy | drained_idle == set(SMALL.gpu_ids)
        assert set(view.drained) == set(self.drains)

    @invariant()
    def journal_equals_memory(self) -> None:
        core = self.arb.core
        with core._lock:  # no commit between the two reads
            state, apps, drained = core.state, dict(core.apps), set(core.drained)
            journal = SQLiteJournal(self.dir / "journal.db")
            try:
                got = journal.load(SMALL.gpu_ids)
            finally:
                journal.close()
        assert sorted(map(lease_id, got.state.leases)) == sorted(map(lease_id, state.leases))
        assert dict(got.apps) == apps
        assert got.state.round == state.round
        assert set(got.drained) == drained


ArbiterAPI.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=20,
    deadline=None,
    derandomize=True,  # the same sequences on every run (deterministic CI)
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_api_state_machine = ArbiterAPI.TestCase
