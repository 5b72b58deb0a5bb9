"""An application master started by ``yarn-arbiter submit`` finds the arbiter, its app id and
token in its environment (yarn_bridge.env) and runs without registering again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from arbiter.agent import agent_kwargs_from_env
from arbiter.cluster import load_cluster
from arbiter.config import load_config
from arbiter.server import RunningArbiter
from yarn_bridge.env import ENV_APP_ID, ENV_APP_TOKEN, ENV_ARBITER_ADDRESS


def test_kwargs_from_env() -> None:
    assert agent_kwargs_from_env({}) == {}
    env = {ENV_ARBITER_ADDRESS: "arb:50051", ENV_APP_ID: "app-1", ENV_APP_TOKEN: "t"}
    assert agent_kwargs_from_env(env) == {"target": "arb:50051", "app_id": "app-1", "token": "t"}
    assert "app_id" not in agent_kwargs_from_env({ENV_APP_ID: "app-1"})  # no token: registers


def test_hyperband_am_runs_as_a_submitted_app(tmp_path: Path) -> None:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
        "ARBITER_LEASE_SECONDS": "3",
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.05",
        "ARBITER_BID_DEADLINE_SECONDS": "1",
    }
    arb = RunningArbiter(load_cluster("nodes:2:4"), load_config(environ=env), admin_token="a")
    arb.start()
    try:
        app_id, token = arb.core.register_app(
            app_name="hb", user="u", queue_name="gpu", max_gpu_demand=4
        )
        am_env = {
            **os.environ,
            ENV_ARBITER_ADDRESS: f"127.0.0.1:{arb.port}",
            ENV_APP_ID: app_id,
            ENV_APP_TOKEN: token,
        }
        out = subprocess.run(
            [sys.executable, "-m", "arbiter.examples.hyperband_am", "--gpus", "4",
             "--configs", "2", "--timeout", "150"],
            env=am_env, capture_output=True, text=True, timeout=200,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr[-2000:]
        assert "finished; best validation loss" in out.stdout
        assert list(arb.core.apps) == [app_id]  # it did not register a second app
        assert token not in out.stdout + out.stderr
    finally:
        arb.stop(0)
