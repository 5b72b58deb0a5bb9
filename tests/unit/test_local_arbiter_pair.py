"""``hadoop up --ha --arbiter-pair`` without daemons: the pair needs RM HA's ZooKeeper, the
arbiters' records in ``state.json`` (and an older ``state.json`` without them still loads), the
addresses clients take. The pair itself runs in ``tests/engine/test_yarn_arbiter_pair.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_bridge.local_hadoop import ClusterState, Daemon, HadoopError, LocalHadoop, LocalHadoopSpec
from yarn_bridge.local_hadoop.arbiters import ARBITER_MAIN, arbiter_roles


def test_the_pair_needs_rm_ha(tmp_path: Path) -> None:
    with pytest.raises(HadoopError, match="--arbiter-pair runs on RM HA's ZooKeeper: add --ha"):
        LocalHadoop(tmp_path).up(LocalHadoopSpec(tmp_path, arbiter_pair=True))
    assert not (tmp_path / "state.json").exists()  # nothing was started or recorded


def _state(*daemons: Daemon) -> ClusterState:
    return ClusterState(workdir="/w", jars="/j", java_home="/jh", client_conf="/c",
                        rm_urls=("http://127.0.0.1:1",), daemons=daemons,
                        zk_address="127.0.0.1:2")  # fmt: skip


def test_state_records_the_arbiters_and_their_addresses() -> None:
    zk = Daemon("zk", "org.apache.zookeeper.server.ZooKeeperServerMain", 10, "/c/zk", "/l/zk")
    a1 = Daemon("arb1", ARBITER_MAIN, 11, "/c/a1", "/l/a1", webapp="http://127.0.0.1:7",
                address="127.0.0.1:5")  # fmt: skip
    a2 = Daemon("arb2", ARBITER_MAIN, 12, "/c/a2", "/l/a2", webapp="http://127.0.0.1:8",
                address="127.0.0.1:6")  # fmt: skip
    st = _state(zk, a1, a2)
    assert st.arbiter_addresses == "127.0.0.1:5,127.0.0.1:6"
    assert ClusterState.from_json(st.to_json()) == st
    assert _state(zk).arbiter_addresses == ""
    # a state.json written before the arbiters had addresses loads as before
    raw = json.loads(_state(zk).to_json())
    del raw["daemons"][0]["address"]
    assert ClusterState.from_json(json.dumps(raw)).daemon("zk").address == ""


def test_roles_of_dead_arbiters_are_none_and_other_daemons_are_not_listed() -> None:
    gone = Daemon("arb1", ARBITER_MAIN, 2**22 + 12345, "/c", "/l", webapp="http://127.0.0.1:9",
                  address="127.0.0.1:5")  # fmt: skip
    zk = Daemon("zk", "org.apache.zookeeper.server.ZooKeeperServerMain", 1, "/c", "/l")
    assert arbiter_roles([gone, zk]) == {"arb1": None}
