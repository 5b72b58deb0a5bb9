"""The arbiter HA pair beside the local YARN's RM HA (``hadoop up --ha --arbiter-pair``,
``yarn_bridge/local_hadoop/arbiters.py``): real ResourceManagers, NodeManager and ZooKeeper
from Hadoop's jars, two ``yarn-arbiter serve --rm-url rm1,rm2 --ha-zk`` processes on the same
ZooKeeper. kill -9 of the active arbiter: the standby takes over within the stated time with
the leases of the YARN's GPUs, the Agent and the query subscriber follow it, and YARN keeps
running (same active RM, node RUNNING); ``status`` shows which arbiter is active; the killed
one comes back a standby; ``down`` stops them all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from support import wait_for

from hive_hooks.share import ArbiterShare
from yarn_bridge.ha_local import HaPairFiles, bidding_agent, leases_at
from yarn_bridge.local_hadoop.arbiters import SESSION_TIMEOUT_S, credentials_dir
from yarn_bridge.local_hadoop.processes import _alive
from yarn_bridge.served import gpus_by_machine

pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.failover]

# As in test_arbiter_failover: the session timeout plus the standby's start as the active (here
# with the YARN bridge reading the cluster from the RM), with room for a busy 2-core machine.
TAKEOVER_S = SESSION_TIMEOUT_S + 15.0


def _status(workdir) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "hadoop", "status", "--json",
         "--workdir", str(workdir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_arbiter_pair_beside_rm_ha_survives_the_active(make_yarn_cluster) -> None:
    cluster = make_yarn_cluster(ha=True, nodes=1, arbiter_pair=True)
    local, state = cluster.local, cluster.state
    arbs = {d.name: d for d in state.daemons if d.address}
    assert sorted(arbs) == ["arb1", "arb2"]
    assert local.arbiter_roles() == {"arb1": "active", "arb2": "standby"}
    st = _status(cluster.workdir)
    assert st["active_arbiter"] == "arb1" and st["arbiters"] == state.arbiter_addresses
    assert {d["name"]: d.get("role") for d in st["daemons"] if "role" in d} == {
        "arb1": "active", "arb2": "standby",
    }  # fmt: skip

    files = HaPairFiles.create(credentials_dir(cluster.workdir))
    admin = files.token("admin")
    rm_before = local.active_rm()
    agent = bidding_agent(state.arbiter_addresses, files.token("submit"), demand=2, num_gpus=4)
    share = ArbiterShare(state.arbiter_addresses, user="alice")
    try:
        # the active arbiter leases the GPUs the RMs report
        wait_for("a lease of the YARN's GPUs", lambda: agent.held(), timeout=60)
        granted = wait_for("the lease at arb1", lambda: leases_at(arbs["arb1"].address, admin))
        nodes = httpx.get(f"{rm_before}/ws/v1/cluster/nodes", timeout=5).json()["nodes"]["node"]
        hosts = {n["nodeHostName"] for n in nodes} | {n["id"] for n in nodes}
        assert granted and set(gpus_by_machine(granted)) <= hosts, granted
        share.begin("tpch-q5")
        first_job, first_epoch = share.job_id, share.current().epoch

        t0 = time.monotonic()
        cluster.kill("arb1")  # kill -9
        wait_for("arb2 to take over", lambda: local.arbiter_roles().get("arb2") == "active",
                 timeout=60, every=0.05)  # fmt: skip
        took = time.monotonic() - t0
        assert took < TAKEOVER_S, f"takeover took {took:.1f} s"
        assert _status(cluster.workdir)["active_arbiter"] == "arb2"

        # the new active serves the same leases; the Agent and the query follow it
        after = wait_for("leases at arb2", lambda: leases_at(arbs["arb2"].address, admin))
        assert {x.lease_id for x in granted} <= {x.lease_id for x in after}
        wait_for("the Agent on arb2", lambda: agent.target == arbs["arb2"].address
                 and agent.connected.is_set(), timeout=60)  # fmt: skip
        wait_for("the query registered again at arb2",
                 lambda: share.target == arbs["arb2"].address and share.reregistrations == 1
                 and share.job_id != first_job, timeout=60)  # fmt: skip
        # arb2's first update (on subscription): the planner sees a new epoch
        wait_for("a share update from arb2", lambda: share.current().epoch > first_epoch,
                 timeout=30)  # fmt: skip

        # YARN went on: the same active RM, the node RUNNING, ZooKeeper and both RMs alive
        assert local.active_rm() == rm_before
        st = _status(cluster.workdir)
        assert [n["state"] for n in st["nodes"]] == ["RUNNING"]
        alive = {d["name"]: d["alive"] for d in st["daemons"]}
        assert alive == {"zk": True, "rm1": True, "rm2": True, "nm1": True, "arb1": False,
                         "arb2": True}, alive  # fmt: skip

        # the killed arbiter comes back a standby on its ports
        cluster.restart("arb1")
        assert local.arbiter_roles() == {"arb1": "standby", "arb2": "active"}
    finally:
        share.end("tpch-q5")
        agent.stop()
    pids = [d for d in local.state().daemons if d.address]  # type: ignore[union-attr]
    stopped = local.down()
    assert {"arb1", "arb2"} <= set(stopped)
    assert not any(_alive(d.pid, d.main_class) for d in pids)
