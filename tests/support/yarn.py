"""Helpers of the tests on a real local YARN with lease AMs (test_yarn_am, test_yarn_faults and
the ``arbiter`` fixture in conftest): an arbiter served against the cluster, ``yarn-arbiter
submit`` of a job, and what YARN reports (GPUs in use by node, an app's state), all read from the
RM's REST API. Polling is :func:`support.wait_for`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from yarn_bridge.served import ServedArbiter, gpus_by_machine


class Arbiter(ServedArbiter):
    """The served arbiter of a test (``tmp_path``): the auction in-process, the bridge polling
    every 0.5 s; ``submitted`` are the YARN apps the test submitted (killed at its end)."""

    def __init__(self, tmp_path: Path, rm_url: str, *args: str, port: int | None = None,
                 fresh: bool = True, **knobs: str) -> None:  # fmt: skip
        super().__init__(tmp_path, rm_url, *args, poll_s=0.5, port=port, fresh=fresh,
                         knobs={"ARBITER_AUCTION_WORKER_PROCESS": "false", **knobs})  # fmt: skip
        self.submitted: list[str] = []

    def state(self) -> pb.ClusterState | None:
        try:
            return super().state()
        except RuntimeError as e:
            raise AssertionError(str(e)) from None


def gpus_by_node(leases: list[pb.Lease], live: list[str]) -> dict[str, int]:
    """Leased GPUs by YARN node id; a machine named by host is the live node on that host."""
    out: dict[str, int] = {}
    for machine, n in gpus_by_machine(leases).items():
        [node] = [x for x in live if machine in (x, x.rsplit(":", 1)[0])] or [machine]
        out[node] = out.get(node, 0) + n
    return out


def _gpu(resource: dict) -> int:
    infos = resource.get("resourceInformations", {}).get("resourceInformation", [])
    return next((int(r["value"]) for r in infos if r["name"] == "yarn.io/gpu"), 0)


def yarn_gpus_by_node(rm_url: str) -> dict[str, int]:
    nodes = httpx.get(f"{rm_url}/ws/v1/cluster/nodes", timeout=5).json()["nodes"]["node"]
    used = {n["id"]: _gpu(n.get("usedResource", {})) for n in nodes}  # (none on a LOST node)
    return {node: n for node, n in used.items() if n}


def yarn_app(rm_url: str, app_id: str) -> dict:
    return httpx.get(f"{rm_url}/ws/v1/cluster/apps/{app_id}", timeout=5).json()["app"]


def app_gpus(app: dict) -> int:
    """yarn.io/gpu the app holds now (resourceInfo, partition "")."""
    parts = app.get("resourceInfo", {}).get("resourceUsagesByPartition", [])
    return sum(_gpu(p.get("used", {})) for p in parts)


KNOBS = {"ARBITER_LEASE_SECONDS": "5", "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0.2",
         "ARBITER_BID_DEADLINE_SECONDS": "1"}  # fmt: skip


def submit_job(yarn_cluster, arb: Arbiter, am_jar: Path, job: str, gpus: int, *extra: str):
    """``yarn-arbiter submit --command job``: (YARN id, arbiter app id)."""
    out = subprocess.run(
        [sys.executable, "-m", "yarn_arbiter.cli", "submit", "--rm-url", yarn_cluster.rm_url,
         "--arbiter", f"127.0.0.1:{arb.port}", "--gpus", str(gpus), "--name", "lease-am-test",
         "--queue", "gpu", "--command", job, "--am-jar", str(am_jar), *extra],
        env=yarn_cluster.env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    yarn_id = out.stdout.strip()
    arb.submitted.append(yarn_id)
    return yarn_id, out.stderr.rsplit(" is arbiter app ", 1)[1].split()[0]


def am_log(yarn_cluster, yarn_id: str) -> str:
    """The AM's stderr (its decisions and the sidecar's) from the NodeManagers' log dirs."""
    logs = sorted(yarn_cluster.workdir.rglob(f"{yarn_id}/container_*_000001/AppMaster.stderr"))
    return logs[0].read_text(errors="replace") if logs else ""


def final(rm_url: str, yarn_id: str) -> dict | None:
    app = yarn_app(rm_url, yarn_id)
    return app if app["state"] in ("FINISHED", "FAILED", "KILLED") else None
