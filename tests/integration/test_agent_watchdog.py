"""An Agent gives up on a Session stream the arbiter does not answer, or stops answering, and
tries the next address of its pair; over real gRPC sockets.

The "silent" arbiters below are real gRPC servers whose Session handler reads the Agent's
messages and answers nothing (or one heartbeat ack, then nothing): what an Agent meets on a
stream accepted during a takeover that no server ever serves, or on an arbiter frozen or cut off
while its TCP connection stays up. The Agent must not wait on such a stream forever (before, it
waited for the stream's headers, and 7 of 40 Agents once waited over a minute for headers of
calls that had ended without them).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from support import wait_for
from support.arbiter import ADMIN, CLUSTER, admin_md, channel

from arbiter.agent import Agent, estimator_from_scheduler
from arbiter.config import load_config
from arbiter.fairness import SuccessiveHalving, t_id
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc


class Silent(rpc.AppMasterServicer):
    """Reads every message of a Session and answers ``answers`` heartbeats, then nothing; the
    stream stays open (even once the Agent stops sending) until the Agent cancels it."""

    def __init__(self, answers: int = 0) -> None:
        self.answers = answers
        self.opened = 0
        self.answered = 0  # heartbeats it acked
        self.ended = threading.Event()  # a stream of it ended (the Agent cancelled it)

    def Session(self, request_iterator, context):
        context.add_callback(self.ended.set)
        self.opened += 1
        left = self.answers
        for msg in request_iterator:
            if msg.WhichOneof("kind") == "heartbeat" and left > 0:
                left -= 1
                self.answered += 1
                yield pb.ArbiterMessage(heartbeat_ack=pb.HeartbeatAck(seq=msg.heartbeat.seq))
        self.ended.wait(60)


@pytest.fixture
def arbiter(tmp_path: Path) -> Iterator[RunningArbiter]:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "30",
    }
    a = RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()
    yield a
    a.stop(0)


@contextlib.contextmanager
def _serve(servicer: Silent) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    rpc.add_AppMasterServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


@pytest.fixture
def silent() -> Iterator[tuple[Silent, str]]:
    s = Silent()
    with _serve(s) as address:
        yield s, address


def _agent(a: RunningArbiter, first: str, **limits: float) -> Agent:
    """An Agent registered at ``a`` whose address list starts with ``first``."""
    reg = rpc.AppMasterStub(channel(a)).RegisterApp(
        pb.RegisterAppRequest(app_name="watchdog", user="ann", max_gpu_demand=1)
    )
    scheduler = SuccessiveHalving((8,), (100.0,))
    estimator = estimator_from_scheduler(
        scheduler,
        t_id=t_id(scheduler.budget, CLUSTER.num_gpus, 1, 4.0),
        job_demand_max=1,
        elapsed=lambda: 0.0,
    )
    agent = Agent(
        f"{first},localhost:{a.port}",
        estimator=estimator,
        max_gpu_demand=1,
        app_id=reg.app_id,
        token=reg.app_token,
        heartbeat_seconds=0.1,
    )
    for name, value in limits.items():
        setattr(agent, name, value)
    return agent


def _connected_at(a: RunningArbiter, app_id: str) -> bool:
    apps = rpc.AdminStub(channel(a)).ListApps(pb.ListAppsRequest(), metadata=admin_md()).apps
    return any(x.app_id == app_id and x.connected for x in apps)


@pytest.mark.parametrize(
    ("answers", "limit"),
    [(0, "session_open_timeout_s"), (1, "session_silent_s")],
    ids=["never-answered", "goes-silent"],
)
def test_a_silent_session_is_given_up_for_the_next_address(
    arbiter: RunningArbiter, answers: int, limit: str
) -> None:
    server = Silent(answers)
    with _serve(server) as address:
        agent = _agent(arbiter, address, **{limit: 0.5}).start()
        app_id = agent.app_id
        try:
            wait_for("the session on the real arbiter", lambda: _connected_at(arbiter, app_id))
            # tried (and answered, if it answers at all), then cancelled
            assert server.opened >= 1 and server.answered == answers and server.ended.is_set()
            assert agent.target == f"localhost:{arbiter.port}"
            assert agent.errors == []
        finally:
            agent.stop()


def test_stop_ends_a_session_the_arbiter_never_answers(
    arbiter: RunningArbiter, silent: tuple[Silent, str]
) -> None:
    server, address = silent
    # the watchdog would not give the stream up for an hour: only stop() can end it
    agent = _agent(arbiter, address, session_open_timeout_s=3600.0).start()
    wait_for("the stream on the silent server", lambda: server.opened >= 1)
    agent.stop()
    assert agent._thread is not None and not agent._thread.is_alive()
    assert server.ended.wait(10)


class _StuckRead:
    """A real Session stream whose read stays blocked after ``cancel()`` until ``release`` is
    set: what grpc once did to an Agent in a failover under load (its read of a stream cut by
    the standby's shutdown did not end when cancelled, and the Agent, whose only thread it
    was, never tried the next address)."""

    def __init__(self, stream: grpc.Future, release: threading.Event) -> None:
        self.stream, self.release = stream, release
        self.cancels = 0

    def __iter__(self) -> _StuckRead:
        return self

    def __next__(self) -> pb.ArbiterMessage:
        self.release.wait()
        raise StopIteration

    def cancel(self) -> bool:
        self.cancels += 1
        return self.stream.cancel()

    def cancelled(self) -> bool:
        return self.stream.cancelled()


def test_a_read_that_stays_blocked_after_the_cancel_does_not_hold_the_agent(
    arbiter: RunningArbiter,
    silent: tuple[Silent, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, address = silent
    release = threading.Event()
    stuck: list[_StuckRead] = []
    holder: list[Agent] = []
    real_stub = rpc.AppMasterStub

    def stub(ch: grpc.Channel) -> rpc.AppMasterStub:
        s = real_stub(ch)
        if holder and holder[0].target == address:  # sessions on the silent server: stuck
            session = s.Session

            def stuck_session(*args: object, **kwargs: object) -> _StuckRead:
                stuck.append(_StuckRead(session(*args, **kwargs), release))
                return stuck[-1]

            s.Session = stuck_session  # type: ignore[method-assign]
        return s

    monkeypatch.setattr("arbiter.agent.rpc.AppMasterStub", stub)
    agent = _agent(arbiter, address, session_open_timeout_s=0.5)
    holder.append(agent)
    agent.start()
    try:
        wait_for("the session on the real arbiter", lambda: _connected_at(arbiter, agent.app_id))
        assert stuck and stuck[0].cancels >= 1 and server.ended.wait(10)
        assert agent.target == f"localhost:{arbiter.port}" and agent.errors == []
        assert "did not end; it is left behind" in caplog.text
    finally:
        release.set()
        agent.stop()
