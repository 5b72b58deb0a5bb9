"""The pure parts of the stream heartbeat: progress reports from the wire (one, or a batch in a
heartbeat), one heartbeat under one lock in the core, and the service's batched hand-over of
items from other threads to its event loop."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arbiter.cluster import shorthand_cluster
from arbiter.config import load_config
from arbiter.core import ArbiterCore
from arbiter.journal import SQLiteJournal
from arbiter.messages import CLOSE, Code, RequestError
from arbiter.service import _Bridge, _Post
from arbiter.sessions import Progress
from arbiter.wire import heartbeat_from_pb, progress_from_pb
from arbiter.wire.appmaster import MAX_HEARTBEAT_REPORTS
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

CLUSTER = shorthand_cluster("nodes:2:4")
GPUS = sorted(CLUSTER.gpu_ids)

finite = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
reports = st.builds(
    pb.ProgressReport,
    job_id=st.text(max_size=8),
    iters_done=st.integers(0, 2**63),
    iters_remaining=st.integers(0, 2**63),
    iter_time_s=finite,
    placement_gpu_ids=st.lists(st.sampled_from(GPUS), max_size=4),
)


@given(reports)
def test_a_valid_report_reads_as_its_progress(msg: pb.ProgressReport) -> None:
    assert progress_from_pb(msg, CLUSTER) == Progress(
        float(msg.iters_done), float(msg.iters_remaining), msg.iter_time_s
    )


@given(st.lists(reports, max_size=MAX_HEARTBEAT_REPORTS))
def test_a_heartbeat_reads_as_its_reports_in_order(batch: list[pb.ProgressReport]) -> None:
    beat = pb.Heartbeat(seq=3, want_ack=True, progress=batch)
    assert heartbeat_from_pb(beat, CLUSTER) == tuple(progress_from_pb(r, CLUSTER) for r in batch)


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan, math.inf, -math.inf])
def test_a_bad_iteration_time_is_refused_naming_its_place(bad: float) -> None:
    good = pb.ProgressReport(iter_time_s=1.0)
    beat = pb.Heartbeat(progress=[good, good, pb.ProgressReport(iter_time_s=bad)])
    with pytest.raises(RequestError) as err:
        heartbeat_from_pb(beat, CLUSTER)
    assert err.value.code is Code.INVALID_ARGUMENT
    assert err.value.message.startswith("heartbeat.progress[2].iter_time_s must be")
    with pytest.raises(RequestError) as err:  # the unary call's message is unchanged
        progress_from_pb(pb.ProgressReport(iter_time_s=bad), CLUSTER)
    assert err.value.message.startswith("iter_time_s must be a finite number >= 0")


def test_unknown_gpus_and_too_many_reports_are_refused() -> None:
    stray = pb.ProgressReport(placement_gpu_ids=[GPUS[0], "m9/s0/g0"])
    with pytest.raises(RequestError, match=r"placement_gpu_ids names unknown GPUs: \['m9/s0/g0'\]"):
        progress_from_pb(stray, CLUSTER)
    many = pb.Heartbeat(progress=[pb.ProgressReport()] * (MAX_HEARTBEAT_REPORTS + 1))
    with pytest.raises(RequestError, match="the limit is 64") as err:
        heartbeat_from_pb(many, CLUSTER)
    assert err.value.code is Code.INVALID_ARGUMENT
    assert heartbeat_from_pb(pb.Heartbeat(), CLUSTER) == ()


def core(tmp_path, clock: list[float]) -> ArbiterCore:
    config = load_config(environ={"ARBITER_JOURNAL_PATH": str(tmp_path / "j.db")})
    return ArbiterCore(
        CLUSTER, config, SQLiteJournal(str(tmp_path / "j.db")), admin_token="a",
        clock=lambda: clock[0],
    )  # fmt: skip


def test_beat_keeps_the_latest_report_and_hears_the_app(tmp_path) -> None:
    clock = [100.0]
    c = core(tmp_path, clock)
    app, _ = c.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=1)
    c.open_session(app)
    clock[0] = 105.0
    assert math.isnan(c.beat(app))  # no ρ asked for
    assert c.sessions.heard[app] == 105.0 and c.sessions.sessions[app].last_seen == 105.0
    assert app not in c.sessions.progress
    clock[0] = 106.0
    rho = c.beat(app, (Progress(1, 9, 0.5), Progress(2, 8, 0.25)), rho=True)
    assert math.isinf(rho)  # holds nothing
    assert c.sessions.progress[app] == Progress(2, 8, 0.25)
    assert c.sessions.heard[app] == 106.0
    c.report_rho(app, 1.5)
    assert c.beat(app, rho=True) == 1.5  # a reported ρ is what the ack carries


def test_items_from_another_thread_arrive_in_order_with_one_wake_up_per_burst() -> None:
    async def run() -> tuple[list[object], list[object], int]:
        loop = asyncio.get_running_loop()
        wakeups = 0
        real = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            nonlocal wakeups
            wakeups += 1
            return real(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        a, b = _Bridge(), _Bridge()

        def burst() -> None:
            for k in range(500):
                (a if k % 2 else b).put(k)

        worker = threading.Thread(target=burst)
        worker.start()
        worker.join()  # the loop did not run meanwhile: one drain is pending
        b.put("ack")  # on the loop: at once, ahead of the pending burst
        a.put(CLOSE)  # on the loop, but after what other threads put before
        got_a = [await a.get() for _ in range(251)]
        got_b = [await b.get() for _ in range(251)]
        return got_a, got_b, wakeups

    got_a, got_b, wakeups = asyncio.run(run())
    assert got_a == [*range(1, 500, 2), CLOSE]
    assert got_b == ["ack", *range(0, 500, 2)]
    assert wakeups == 1


def test_a_post_drains_what_arrives_while_it_drains() -> None:
    async def run() -> list[int]:
        loop = asyncio.get_running_loop()
        post = _Post(loop)
        q: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            for k in range(20_000):
                post.put(q, k)
            stop.set()

        worker = threading.Thread(target=produce)
        worker.start()
        got = []
        while len(got) < 20_000:
            got.append(await asyncio.wait_for(q.get(), 10))
        worker.join()
        return got

    assert asyncio.run(run()) == list(range(20_000))
