"""Heartbeats on the open Session stream over a real gRPC socket: a ``Heartbeat`` with
``want_ack`` is answered by a ``HeartbeatAck`` echoing its ``seq``, the progress reports it
carries (batched) are applied under one lock, bad input is refused on the stream naming the
field and changes nothing, and the unary ``ReportProgress`` path of existing clients still
works beside it."""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from support import wait_for
from support.arbiter import ADMIN, CLUSTER, channel, hyperband_agent

from arbiter.config import load_config
from arbiter.server import RunningArbiter
from arbiter.sessions import Progress
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

GPU = sorted(CLUSTER.gpu_ids)[0]


def start(tmp_path: Path, **overrides: str) -> RunningArbiter:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db"),
        "ARBITER_HEARTBEAT_TIMEOUT_SECONDS": "30",
        **overrides,
    }
    return RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()


@pytest.fixture
def arbiter(tmp_path: Path) -> Iterator[RunningArbiter]:
    a = start(tmp_path)
    yield a
    a.stop(0)


class Stream:
    """One registered app's Session stream: what it sends and what it receives."""

    def __init__(self, a: RunningArbiter, token: str | None = None, app_id: str | None = None):
        self.stub = rpc.AppMasterStub(channel(a))
        reg = self.stub.RegisterApp(
            pb.RegisterAppRequest(app_name="beat", user="ann", max_gpu_demand=1)
        )
        self.app_id, self.token = reg.app_id, reg.app_token
        self.outbox: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.outbox.put(pb.AgentMessage(hello=pb.SessionHello(app_id=app_id or self.app_id)))
        self.call = self.stub.Session(
            iter(self.outbox.get, None), metadata=[("x-app-token", token or self.token)]
        )
        self.status: grpc.RpcError | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for msg in self.call:
                self.inbox.put(msg)
        except grpc.RpcError as exc:
            self.status = exc
        self.inbox.put(None)

    def beat(self, seq: int, *reports: pb.ProgressReport, ack: bool = True) -> None:
        beat = pb.Heartbeat(seq=seq, want_ack=ack, progress=list(reports))
        self.outbox.put(pb.AgentMessage(heartbeat=beat))

    def next(self, timeout: float = 10.0) -> pb.ArbiterMessage | None:
        return self.inbox.get(timeout=timeout)

    def close(self) -> None:
        self.outbox.put(None)
        self.call.cancel()


def report(**fields: object) -> pb.ProgressReport:
    return pb.ProgressReport(**{"job_id": "j", **fields})


def test_a_heartbeat_is_acked_with_its_seq_and_applies_its_reports(
    arbiter: RunningArbiter,
) -> None:
    s = Stream(arbiter)
    try:
        core = arbiter.core
        heard = core.sessions.heard[s.app_id]
        s.beat(1)  # no reports: an ack, nothing reported
        msg = s.next()
        assert msg is not None and msg.WhichOneof("kind") == "heartbeat_ack"
        assert msg.heartbeat_ack.seq == 1
        assert math.isinf(msg.heartbeat_ack.rho)  # holds nothing
        assert s.app_id not in core.sessions.progress
        assert core.sessions.heard[s.app_id] >= heard
        # a batch: every report validated, the latest kept (as one ReportProgress each)
        s.beat(2, report(iters_done=1, iter_time_s=0.5),
               report(iters_done=4, iters_remaining=6, iter_time_s=0.25,
                      placement_gpu_ids=[GPU]))  # fmt: skip
        msg = s.next()
        assert msg is not None and msg.heartbeat_ack.seq == 2
        assert core.sessions.progress[s.app_id] == Progress(4.0, 6.0, 0.25)
    finally:
        s.close()


def test_a_heartbeat_without_want_ack_is_not_answered(arbiter: RunningArbiter) -> None:
    """The long-standing heartbeat (existing Agents) is applied and not answered: the stream
    carries the ack of a later heartbeat first."""
    s = Stream(arbiter)
    try:
        s.beat(1, report(iters_done=2, iter_time_s=1.0), ack=False)
        s.beat(2)
        msg = s.next()
        assert msg is not None and msg.heartbeat_ack.seq == 2
        assert arbiter.core.sessions.progress[s.app_id] == Progress(2.0, 0.0, 1.0)
    finally:
        s.close()


@pytest.mark.parametrize(
    ("reports", "named"),
    [
        ([report(iter_time_s=-1.0)], "heartbeat.progress[0].iter_time_s must be a finite"),
        ([report(iter_time_s=0.1), report(iter_time_s=math.nan)], "heartbeat.progress[1]."),
        ([report(iter_time_s=math.inf)], "heartbeat.progress[0].iter_time_s"),
        ([report(placement_gpu_ids=["no-such-gpu"])], "names unknown GPUs: ['no-such-gpu']"),
        ([report(iter_time_s=0.1)] * 65, "heartbeat.progress has 65 reports; the limit is 64"),
    ],
)
def test_bad_reports_are_refused_on_the_stream_and_change_nothing(
    arbiter: RunningArbiter, reports: list[pb.ProgressReport], named: str
) -> None:
    s = Stream(arbiter)
    try:
        s.beat(1, report(iters_done=3, iter_time_s=2.0))
        assert s.next().heartbeat_ack.seq == 1  # type: ignore[union-attr]
        s.beat(2, *reports)
        msg = s.next()
        assert msg is not None and msg.WhichOneof("kind") == "error"
        assert msg.error.code == "INVALID_ARGUMENT"
        assert named in msg.error.message
        assert arbiter.core.sessions.progress[s.app_id] == Progress(3.0, 0.0, 2.0)
        s.beat(3)  # the session stays open
        assert s.next().heartbeat_ack.seq == 3  # type: ignore[union-attr]
    finally:
        s.close()


def test_an_oversized_heartbeat_ends_only_its_own_stream(tmp_path: Path) -> None:
    a = start(tmp_path, ARBITER_GRPC_MAX_MESSAGE_BYTES="4096")
    try:
        s, other = Stream(a), Stream(a)
        try:
            s.beat(1, report(job_id="x" * 8000))
            assert s.next() is None  # the stream ended
            assert s.status is not None
            assert s.status.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert s.app_id not in a.core.sessions.progress
            other.beat(1, report(iters_done=1, iter_time_s=0.1))
            assert other.next().heartbeat_ack.seq == 1  # type: ignore[union-attr]
        finally:
            s.close()
            other.close()
    finally:
        a.stop(0)


def test_a_malformed_message_ends_only_its_own_stream(arbiter: RunningArbiter) -> None:
    """Bytes that are not an AgentMessage: the call fails, the arbiter serves on."""
    good = Stream(arbiter)
    reg = good.stub.RegisterApp(pb.RegisterAppRequest(app_name="raw", max_gpu_demand=1))
    raw = channel(arbiter).stream_stream(
        "/yarnarbiter.v1.AppMaster/Session",
        request_serializer=lambda b: b,
        response_deserializer=pb.ArbiterMessage.FromString,
    )
    hello = pb.AgentMessage(hello=pb.SessionHello(app_id=reg.app_id)).SerializeToString()
    try:
        call = raw(iter([hello, b"\xff\xff\xff\xff\x0f garbage"]),
                   metadata=[("x-app-token", reg.app_token)])  # fmt: skip
        with pytest.raises(grpc.RpcError) as err:
            list(call)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed session message" in err.value.details()
        assert reg.app_id not in arbiter.core.sessions.progress
        sessions = arbiter.core.sessions.sessions
        wait_for("the broken session closed", lambda: reg.app_id not in sessions, 10)
        # a malformed first message is refused the same way
        call = raw(iter([b"\xff\xff\xff\xff\x0f"]), metadata=[("x-app-token", reg.app_token)])
        with pytest.raises(grpc.RpcError) as err:
            list(call)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        good.beat(5, report(iter_time_s=0.1))
        assert good.next().heartbeat_ack.seq == 5  # type: ignore[union-attr]
    finally:
        good.close()


def test_a_wrong_token_gets_no_stream(arbiter: RunningArbiter) -> None:
    owner = Stream(arbiter)
    try:
        forged = Stream(arbiter, token="not-a-token", app_id=owner.app_id)
        forged.beat(1, report(iters_done=9, iter_time_s=9.0))
        assert forged.next() is None
        assert forged.status is not None
        assert forged.status.code() == grpc.StatusCode.UNAUTHENTICATED
        # another app's (valid) token may not speak for this app
        thief = Stream(arbiter)
        stolen = Stream(arbiter, token=thief.token, app_id=owner.app_id)
        stolen.beat(1, report(iters_done=9, iter_time_s=9.0))
        assert stolen.next() is None
        assert stolen.status is not None
        assert stolen.status.code() == grpc.StatusCode.PERMISSION_DENIED
        assert owner.app_id not in arbiter.core.sessions.progress
        for s in (forged, thief, stolen):
            s.close()
    finally:
        owner.close()


def test_the_unary_report_progress_still_works(arbiter: RunningArbiter) -> None:
    stub = rpc.AppMasterStub(channel(arbiter))
    reg = stub.RegisterApp(pb.RegisterAppRequest(app_name="old", max_gpu_demand=1))
    md = [("x-app-token", reg.app_token)]
    ack = stub.ReportProgress(
        report(iters_done=5, iters_remaining=5, iter_time_s=0.5, placement_gpu_ids=[GPU]),
        metadata=md,
    )
    assert math.isinf(ack.rho)
    assert arbiter.core.sessions.progress[reg.app_id] == Progress(5.0, 5.0, 0.5)
    with pytest.raises(grpc.RpcError) as err:
        stub.ReportProgress(report(iter_time_s=-2.0), metadata=md)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("iter_time_s must be a finite number >= 0")
    with pytest.raises(grpc.RpcError) as err:
        stub.ReportProgress(report(placement_gpu_ids=["nope"]), metadata=md)
    assert "placement_gpu_ids names unknown GPUs" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        stub.ReportProgress(report(iter_time_s=1.0), metadata=[("x-app-token", "forged")])
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert arbiter.core.sessions.progress[reg.app_id] == Progress(5.0, 5.0, 0.5)


def test_the_agent_reports_progress_in_its_acked_heartbeats(arbiter: RunningArbiter) -> None:
    agent = hyperband_agent(arbiter.port, 4)  # heartbeats every 0.2 s
    try:
        agent.report_progress("trial-1", 10, 90, 0.5, [GPU])
        agent.report_progress("trial-2", 20, 80, 0.25)  # the same heartbeat: the latest kept
        progress = arbiter.core.sessions.progress
        wait_for("the reports", lambda: progress.get(agent.app_id) == Progress(20, 80, 0.25), 10)
        wait_for("an ack", lambda: agent.heartbeat_rtt is not None, 10)
        assert agent.heartbeat_rtt is not None and 0 < agent.heartbeat_rtt < 10
        assert agent.arbiter_rho is not None and agent.arbiter_rho > 0
        assert not agent.errors, agent.errors
    finally:
        agent.stop()
