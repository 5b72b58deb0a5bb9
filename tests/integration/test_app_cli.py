"""``yarn-arbiter app list|status|kill`` and ``submit --wait`` against the RM emulator over
HTTP, the RM found through a Hadoop configuration directory as an operator would give it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbiter.config import load_config
from arbiter.server import RunningArbiter
from yarn_bridge.bridge_cli import initial_cluster
from yarn_bridge.emulator import RMEmulator
from yarn_bridge.env import ENV_ARBITER_ADDRESS, ENV_RM_URL

CLI = [sys.executable, "-m", "yarn_arbiter.cli"]


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_submit_wait_then_list_status_and_kill(tmp_path: Path) -> None:
    with RMEmulator(nodes=2, gpus_per_node=4, app_seconds=6.0, start_seconds=0.2) as rm:
        conf = tmp_path / "hadoop-conf"
        conf.mkdir()
        host_port = rm.url.removeprefix("http://")
        (conf / "yarn-site.xml").write_text(
            "<configuration><property><name>yarn.resourcemanager.webapp.address</name>"
            f"<value>{host_port}</value></property></configuration>"
        )
        config = load_config(environ={"ARBITER_GRPC_PORT": "0", "ARBITER_POLICY": "fifo",
                                      "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db")})  # fmt: skip
        arb = RunningArbiter(initial_cluster(rm.url), config, admin_token="adm").start()
        env = {k: v for k, v in os.environ.items() if k != ENV_RM_URL}
        env |= {"HADOOP_CONF_DIR": str(conf), ENV_ARBITER_ADDRESS: f"127.0.0.1:{arb.port}"}
        try:
            # submit --wait: the app runs its second in the emulator and finishes
            r = run("submit", "--am-command", "sleep 1", "--gpus", "2", "--name", "quick",
                    "--rm-url", rm.url, "--wait", "--wait-poll-seconds", "0.2",
                    env=env)  # fmt: skip
            assert r.returncode == 0, r.stderr
            yid = r.stdout.strip()
            assert f"{yid} FINISHED (SUCCEEDED)" in r.stderr and "RUNNING" in r.stderr
            # a second one, killed before its 6 s are up
            r = run("submit", "--am-command", "sleep 99", "--gpus", "1", "--name", "long",
                    "--rm-url", rm.url, env=env)  # fmt: skip
            long_id = r.stdout.strip()
            # kill it at once; the RM confirms
            r = run("app", "kill", long_id, env=env)
            assert r.returncode == 0 and r.stdout.strip() == f"{long_id}: KILLED", r.stderr
            # list: the RM from $HADOOP_CONF_DIR's yarn-site.xml; ML apps only
            r = run("app", "list", env=env)
            assert r.returncode == 0, r.stderr
            rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()[2:]}
            assert set(rows) == {yid, long_id} and "KILLED" in rows[long_id]
            assert "FINISHED" in rows[yid] and "SUCCEEDED" in rows[yid]
            r = run("app", "status", yid, env=env)
            assert r.returncode == 0 and "Arbiter-App" in r.stdout and "quick" in r.stdout
            r = run("app", "status", "application_1_99999", env=env)
            assert r.returncode == 1 and "error" in r.stderr
            env.pop("HADOOP_CONF_DIR")
            r = run("app", "list", env=env)
            assert r.returncode == 2 and "--hadoop-conf" in r.stderr
        finally:
            arb.stop(0)
