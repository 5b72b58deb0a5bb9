"""The pure parts of arbiter HA (arbiter.ha, arbiter.zk_journal, the Agent's address list):
settings checks, contender names, what a standby answers, the journal's encodings."""

from __future__ import annotations

import math

import grpc
import pytest

from arbiter.agent import Agent, arbiter_addresses
from arbiter.config import ConfigError, load_config
from arbiter.ha import HaSettings, parse_contender, standby_health, standby_message
from arbiter.rounds import Lease, LeaseSource
from arbiter.zk_journal import _lease_from_row, decode, encode, lease_rows

CREDS = {
    "ARBITER_ADMIN_TOKEN_FILE": "/s/admin",
    "ARBITER_ADMISSION_SUBMIT_TOKEN_FILE": "/s/submit",
    "ARBITER_QUERY_SERVICE_TOKEN_FILE": "/s/service",
}


def _config(**env: str):
    return load_config(None, environ=env)


def test_no_zookeeper_no_ha() -> None:
    assert HaSettings.from_config(_config()) is None


def test_settings_from_config() -> None:
    ha = HaSettings.from_config(_config(
        ARBITER_HA_ZK_ADDRESS="zk1:2181,zk2:2181", ARBITER_HA_ID="a1", ARBITER_GRPC_PORT="5001",
        **CREDS))  # fmt: skip
    assert ha is not None
    assert (ha.zk_address, ha.ha_id, ha.root, ha.advertise) == (
        "zk1:2181,zk2:2181", "a1", "/yarn-arbiter/default", "127.0.0.1:5001")  # fmt: skip
    assert ha.session_timeout_s == 6.0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARBITER_HA_ZK_ADDRESS": "zk:2181", **CREDS}, "arbiter.ha.id"),
        (
            {
                "ARBITER_HA_ZK_ADDRESS": "zk:2181",
                "ARBITER_HA_ID": "a1",
                "ARBITER_GRPC_PORT": "0",
                **CREDS,
            },
            "fixed arbiter.grpc.port",
        ),
        ({"ARBITER_HA_ZK_ADDRESS": "zk:2181", "ARBITER_HA_ID": "a1"}, "arbiter.admin.token-file"),
    ],
)
def test_bad_combinations_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HaSettings.from_config(_config(**env))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ARBITER_HA_ZK_ADDRESS", "zk-without-port"),
        ("ARBITER_HA_ID", "a@1"),
        ("ARBITER_HA_ZK_ROOT", "relative/root"),
        ("ARBITER_HA_SESSION_TIMEOUT_SECONDS", "0.1"),
        ("ARBITER_HA_ADVERTISE_ADDRESS", "host:notaport"),
    ],
)
def test_bad_values_are_config_errors(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.lower().replace("_", ".")[:10]):
        _config(**{key: value})


def test_contenders_and_what_a_standby_says() -> None:
    assert parse_contender("a1@10.0.0.1:50051") == ("a1", "10.0.0.1:50051")
    assert parse_contender("a1") == ("a1", "")
    assert "the active arbiter is a1 at h:1" in standby_message("a2", "a1@h:1")
    connected = standby_health("a2", True, "a1@h:1")
    assert connected["healthy"] and not connected["ready"]
    assert connected["checks"]["ha"]["role"] == "standby"
    alone = standby_health("a2", False, None)
    assert not alone["healthy"] and "cannot take over" in alone["checks"]["ha"]["detail"]


def test_lease_rows_and_blobs_round_trip() -> None:
    leases = [
        Lease("app-1", frozenset({"m/g0", "m/g1"}), 1.5, 601.5, 7, LeaseSource.AUCTION),
        Lease("app-2", frozenset({"m/g2"}), 2.0, math.inf, 8, LeaseSource.POLICY),
    ]
    back = [_lease_from_row(r) for r in decode(encode(lease_rows(leases)))]
    assert back == leases


def test_agent_addresses_and_failover_rotation() -> None:
    assert arbiter_addresses("a:1, b:2,") == ("a:1", "b:2")
    with pytest.raises(ValueError, match="no arbiter address"):
        arbiter_addresses(" , ")
    agent = Agent("a:1,b:2", estimator=lambda g, p: 1.0, max_gpu_demand=1)

    class Err(grpc.RpcError):
        def __init__(self, code: grpc.StatusCode) -> None:
            self._code = code

        def code(self) -> grpc.StatusCode:
            return self._code

    assert agent.target == "a:1"
    assert not agent._failover(Err(grpc.StatusCode.PERMISSION_DENIED))
    assert agent._failover(Err(grpc.StatusCode.UNAVAILABLE)) and agent.target == "b:2"
    assert agent._failover(Err(grpc.StatusCode.UNAVAILABLE)) and agent.target == "a:1"
    single = Agent("a:1", estimator=lambda g, p: 1.0, max_gpu_demand=1)
    assert not single._failover(Err(grpc.StatusCode.UNAVAILABLE)) and single.target == "a:1"
