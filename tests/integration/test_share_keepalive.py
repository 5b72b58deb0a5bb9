"""A query's share stream learns that its arbiter is gone although the connection stays up
(arbiter.channels: keepalive pings), and the arbiter accepts those pings on a quiet stream;
real in-process arbiters, real sockets, a TCP proxy that freezes.

A share stream carries nothing between two share changes, so before the pings a follower
whose arbiter froze (or whose host died without closing the connection) waited on it for ever,
and never saw the share of the arbiter that took over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import wait_for
from support.arbiter import halved_by_another_query
from support.proxy import FreezableProxy

from arbiter.channels import CLIENT_KEEPALIVE_S, MIN_PING_INTERVAL_MS, channel_options
from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from hive_hooks.share import ArbiterShare

# Pings quicker than in production (every 10 s; the arbiter accepts one per 5 s), in the same
# proportion.
KEEPALIVE_S = 1.0
SERVER_MIN_PING_MS = 500


@pytest.fixture
def arbiters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RunningArbiter]]:
    monkeypatch.setattr("arbiter.service.MIN_PING_INTERVAL_MS", SERVER_MIN_PING_MS)
    started: list[RunningArbiter] = []
    for name in ("a", "b"):
        env = {
            "ARBITER_GRPC_PORT": "0",
            "ARBITER_JOURNAL_PATH": str(tmp_path / f"{name}.db"),
        }
        started.append(
            RunningArbiter(
                load_cluster("themis-testbed"), load_config(environ=env), admin_token="admin-t"
            ).start()
        )
    yield started
    for a in started:
        a.stop(0)


def _share(target: str, answer_within_s: float) -> ArbiterShare:
    share = ArbiterShare(target, user="alice")
    share.keepalive_s, share.keepalive_timeout_s = KEEPALIVE_S, answer_within_s
    return share


def test_production_pings_are_ones_the_arbiter_accepts() -> None:
    assert CLIENT_KEEPALIVE_S * 1000 >= 2 * MIN_PING_INTERVAL_MS
    options = dict(channel_options())
    assert options["grpc.keepalive_time_ms"] == CLIENT_KEEPALIVE_S * 1000
    assert options["grpc.http2.max_pings_without_data"] == 0  # pings go on on a quiet stream


def test_a_quiet_share_stream_stays_open_under_pings(arbiters: list[RunningArbiter]) -> None:
    """Five seconds without a share change, a ping each second: no GOAWAY ("too_many_pings",
    the gRPC default for pings more often than every 5 minutes), so no new subscription."""
    a = arbiters[0]
    # a ping's answer may take long here (a loaded machine): what is tested is how often
    share = _share(f"127.0.0.1:{a.port}", answer_within_s=60.0)
    share.begin("tpch-q5")
    try:
        updates = share.updates
        time.sleep(5 * KEEPALIVE_S)
        assert share.updates == updates and share.failovers == 0
        assert share.reregistrations == 0 and share.job_id in a.core.queries
    finally:
        share.end("tpch-q5")


def test_a_share_stream_to_a_frozen_arbiter_moves_to_the_next_address(
    arbiters: list[RunningArbiter],
) -> None:
    """The first address freezes with its connection up: the unanswered ping ends the stream,
    the follower moves to the second arbiter, registers the query there and follows its
    share (a second query halves it)."""
    a, b = arbiters
    proxy = FreezableProxy(("127.0.0.1", a.port))
    share = _share(f"{proxy.address},127.0.0.1:{b.port}", answer_within_s=3 * KEEPALIVE_S)
    try:
        share.begin("tpch-q5")
        first_job = share.job_id
        assert first_job in a.core.queries and share.target == proxy.address
        proxy.freeze()
        wait_for("the job registered at b", lambda: share.job_id in b.core.queries, timeout=30)
        assert share.target == f"127.0.0.1:{b.port}" and share.failovers >= 1
        assert share.reregistrations == 1
        halved_by_another_query(share, b)
    finally:
        share.end("tpch-q5")
        proxy.close()
