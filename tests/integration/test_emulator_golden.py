"""The emulator's Hadoop 3.5 shapes and ``yarn_bridge.rm``'s parsers against the golden files of
a real Hadoop 3.5.0 ResourceManager (``tests/golden/rm-3.5.0``, captured by
``tests/golden/capture_rm.py``).

* **Shapes**: the capture scenario runs against the emulator (``hadoop_version="3.5"``, set up
  like the local cluster: 2 nodes x 8 GB / 8 vcores / 4 GPUs, the deploy queues, AMs that never
  register) and every answer must have the golden file's shape: the same keys at every level,
  the same JSON types (int and float are both "number"; a list's shape is the union of its
  elements' shapes), the same status and Content-Type. Values are free.
* **Parsing**: ``RMClient`` over a replay transport that answers with the golden files gives
  the values in them (two nodes with 4 GPUs each, the queues' effective minimums, ...) and maps
  the error answers to its exceptions.
* **Drift** (``yarn`` + ``slow``): the same scenario on a fresh real local YARN has the golden
  shapes, so a change of the real RM (or of the capture) is caught.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from typing import Any

import httpx
import pytest
from support import REPO

from yarn_bridge.cli import add_parsers, build_emulator
from yarn_bridge.emulator import RMEmulator
from yarn_bridge.rm import (
    Resource,
    RMBadRequest,
    RMClient,
    RMNotFound,
    SchedConfUpdate,
    parse_app,
    parse_apps,
    parse_cluster_info,
    parse_cluster_metrics,
    parse_expiry,
    parse_new_application,
    parse_node,
    parse_nodes,
    parse_scheduler,
    parse_scheduler_conf,
    parse_timeout,
    parse_timeouts,
)

GOLDEN = REPO / "tests" / "golden" / "rm-3.5.0"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json") if p.name != "MANIFEST.json")


def _load_capture_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "golden_capture_rm", GOLDEN.parent / "capture_rm.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


capture_rm = _load_capture_module()

#: Documented exceptions: (file stem, shape path) pairs whose difference is accepted. Empty:
#: every golden answer is matched key for key; add an entry only with the reason beside it.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def golden(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def shape(doc: Any, path: str = "", out: set[str] | None = None) -> set[str]:
    """Every ``path: type`` in ``doc``; list elements share the path ``[]``."""
    out = set() if out is None else out
    if isinstance(doc, bool):
        out.add(f"{path}: boolean")
    elif isinstance(doc, int | float):
        out.add(f"{path}: number")
    elif isinstance(doc, str):
        out.add(f"{path}: string")
    elif doc is None:
        out.add(f"{path}: null")
    elif isinstance(doc, dict):
        out.add(f"{path}: object")
        for k, v in doc.items():
            shape(v, f"{path}.{k}", out)
    elif isinstance(doc, list):
        out.add(f"{path}: list")
        for v in doc:
            shape(v, f"{path}[]", out)
    return out


def envelope_shape(rec: dict[str, Any]) -> set[str]:
    """The shape of an answer: its body (or text) and whether the RM sent a Location."""
    return shape({k: v for k, v in rec.items() if k in ("body", "text", "location")})


def shape_diff(name: str, want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    problems = [
        f"{what}: golden {want[what]!r}, got {got[what]!r}"
        for what in ("status", "content_type")
        if want[what] != got[what]
    ]
    a, b = envelope_shape(want), envelope_shape(got)
    problems += [f"missing {p}" for p in sorted(a - b) if (name, p.split(":")[0]) not in ALLOWED]
    problems += [f"extra   {p}" for p in sorted(b - a) if (name, p.split(":")[0]) not in ALLOWED]
    return problems


# -- the emulator against the golden shapes ---------------------------------------------------

#: deploy/conf/capacity-scheduler.xml, as the local Hadoop runs it.
DEPLOY_QUEUES = {
    "default": "[memory=4096,vcores=4]",
    "analytics": "[memory=8192,vcores=8]",
    "gpu": "[memory=4096,vcores=4,yarn.io/gpu=8]",
}


@pytest.fixture(scope="module")
def emulated() -> dict[str, dict[str, Any]]:
    emu = RMEmulator(
        nodes=2, gpus_per_node=4, memory_mb=8192, vcores=8, max_allocation_vcores=8,
        queues=DEPLOY_QUEUES, new_seconds=0, start_seconds=0.05, app_seconds=3600,
        hadoop_version="3.5", am_registers=False,
    )  # fmt: skip
    url = emu.start()
    try:
        return capture_rm.capture(url, user="golden", timeout_s=10)
    finally:
        emu.stop()


def test_golden_files_are_complete(emulated) -> None:
    manifest = json.loads((GOLDEN / "MANIFEST.json").read_text())
    assert manifest["hadoopVersion"] == "3.5.0"
    assert sorted(f"{n}.json" for n in NAMES) == sorted(manifest["files"])
    assert sorted(emulated) == NAMES  # the scenario and the files agree


@pytest.mark.parametrize("name", NAMES)
def test_emulator_35_matches_golden_shape(emulated, name: str) -> None:
    problems = shape_diff(name, golden(name), emulated[name])
    assert not problems, f"{name}.json vs the emulator:\n  " + "\n  ".join(problems)


def test_emulate_rm_serves_35() -> None:
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers())
    emu = build_emulator(parser.parse_args(["emulate-rm", "--port", "0", "--hadoop-version",
                                            "3.5"]))  # fmt: skip
    assert isinstance(emu, RMEmulator) and emu.cluster.version == "3.5.0" and emu.cluster.jersey2


def test_shape_compares_keys_and_types() -> None:
    assert shape({"a": [1, 2.5], "b": None}) == {
        ": object", ".a: list", ".a[]: number", ".b: null"
    }  # fmt: skip
    want = {"status": 200, "content_type": "application/json", "body": {"x": {"y": "1"}}}
    got = {"status": 200, "content_type": "application/json", "body": {"x": {"y": 1}}}
    assert shape_diff("t", want, got) == ["missing .body.x.y: string", "extra   .body.x.y: number"]


# -- the typed parsers on the golden files ----------------------------------------------------


def body(name: str) -> Any:
    return golden(name)["body"]


def test_parsers_accept_every_golden_file() -> None:
    info = parse_cluster_info(body("info"))
    assert (info.hadoop_version, info.rm_version, info.ha_state) == ("3.5.0", "3.5.0", "ACTIVE")
    assert parse_cluster_info(body("cluster")) == info
    metrics = parse_cluster_metrics(body("metrics"))
    assert (metrics.active_nodes, metrics.total_mb, metrics.total_vcores) == (2, 16384, 16)
    assert metrics.total_resources == Resource(16384, 16, 8)
    assert metrics.allocated_mb == metrics.used_resources.memory_mb == 2048

    for name in ("nodes", "nodes-running"):
        nodes = parse_nodes(body(name))
        assert len(nodes) == 2 and all(n.state == "RUNNING" for n in nodes)
        assert [n.gpus_total for n in nodes] == [4, 4]
        assert [n.total for n in nodes] == [Resource(8192, 8, 4)] * 2
        assert sum(n.num_containers for n in nodes) == 2
        assert all(n.used + n.available == n.total for n in nodes)
    node = parse_node(body("node"))
    assert node.id == golden("node")["request"]["path"].rsplit("/", 1)[-1]
    assert node.gpus_available == 4 and node.version == "3.5.0"
    assert parse_nodes(body("nodes-none")) == [] and parse_apps(body("apps-none")) == []

    sched = parse_scheduler(body("scheduler"))
    assert sched.type == "capacityScheduler"
    assert [q.path for q in sched.leaves()] == ["root.default", "root.analytics", "root.gpu"]
    assert sched.queue("analytics").effective_min == Resource(8192, 8, 0)
    assert sched.queue("root.gpu").effective_min == Resource(4096, 4, 8)
    assert sched.queue("default").effective_max == Resource(16384, 16, 8)
    assert sched.queue("gpu").num_applications == 1

    apps = {a.name: a for a in parse_apps(body("apps"))}
    assert sorted(apps) == ["golden-analytics", "golden-gpu"]
    gpu = apps["golden-gpu"]
    assert (gpu.state, gpu.queue, gpu.user) == ("ACCEPTED", "root.gpu", "root")
    assert gpu.tags == ("golden-capture", "yarn-arbiter-ml")  # lower-cased, sorted by YARN
    assert gpu.used == Resource(1024, 1, 0) and gpu.allocated_gpus == 0
    assert gpu.running_containers == 1 and gpu.am_host_http_address
    assert set(gpu.resource_seconds) == {"memory-mb", "vcores", "yarn.io/gpu"}
    assert gpu.lifetime is not None and gpu.lifetime.unlimited
    for name in ("apps-states", "apps-deselects"):
        assert {a.id for a in parse_apps(body(name))} == {a.id for a in apps.values()}
    assert [a.name for a in parse_apps(body("apps-tags"))] == ["golden-gpu"]
    assert [a.queue for a in parse_apps(body("apps-queue"))] == ["root.analytics"]
    assert parse_app(body("app")).id == gpu.id

    killed = parse_app(body("app-killed"))
    assert (killed.state, killed.final_status, killed.is_final) == ("KILLED", "KILLED", True)
    assert killed.allocated_mb == -1 and killed.used is None
    assert killed.resource_seconds["memory-mb"] > 0 and killed.tracking_url
    assert not killed.lifetime.unlimited and killed.lifetime.remaining_seconds == 0

    new = parse_new_application(body("new-application"))
    assert new.application_id.startswith("application_")
    assert new.maximum_capability == Resource(8192, 8, 4)
    (timeout,) = parse_timeouts(body("app-timeouts"))
    assert timeout.unlimited and parse_timeout(body("app-timeout-lifetime")) == timeout
    put = parse_timeout(body("app-timeout-put"))
    assert put.expiry == parse_expiry(golden("app-timeout-put")["request"]["body"]["timeout"][
        "expiryTime"]) and put.remaining_seconds > 3500  # fmt: skip
    conf = parse_scheduler_conf(body("scheduler-conf"))
    assert conf["yarn.scheduler.capacity.root.analytics.capacity"] == "[memory=8192,vcores=8]"
    assert conf["yarn.scheduler.capacity.root.queues"] == "default,analytics,gpu"


class Replay:
    """An ``httpx`` transport answering with the golden files: a request is matched by method,
    path, query (``user.name`` aside) and JSON body; repeated matches are served in capture
    order (the kill's 202, then its 200)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[dict[str, Any]]] = {}
        for name in NAMES:
            rec = golden(name)
            self.answers.setdefault(self._key(rec["request"]), []).append(rec)
        self.unmatched: list[str] = []

    @staticmethod
    def _key(req: dict[str, Any]) -> str:
        query = {k: v for k, v in req["query"].items() if k != "user.name"}
        return json.dumps([req["method"], req["path"], query, req["body"]], sort_keys=True)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        req = {"method": request.method, "path": request.url.path,
               "query": dict(request.url.params),
               "body": json.loads(request.content) if request.content else None}  # fmt: skip
        queue = self.answers.get(self._key(req))
        if not queue:
            self.unmatched.append(self._key(req))
            return httpx.Response(599, text=f"no golden answer for {req}")
        rec = queue.pop(0) if len(queue) > 1 else queue[0]
        headers = {"Content-Type": rec["content_type"]} if rec["content_type"] else {}
        if "location" in rec:
            headers["Location"] = rec["location"]
        content = rec["text"] if "text" in rec else (
            json.dumps(rec["body"]) if rec["body"] is not None else "")  # fmt: skip
        return httpx.Response(rec["status"], headers=headers, content=content.encode())


@pytest.fixture
def replay_rm():
    replay = Replay()
    rm = RMClient("http://golden.invalid:8088", max_attempts=1, deadline=5)
    rm._http.close()
    rm._http = httpx.Client(transport=httpx.MockTransport(replay))
    yield rm
    rm.close()
    assert not replay.unmatched, replay.unmatched


def test_rm_client_over_golden_answers(replay_rm) -> None:
    rm = replay_rm
    assert rm.cluster_info().hadoop_version == "3.5.0"
    assert rm.cluster_metrics().active_nodes == 2
    assert rm.gpu_capacity() == (8, 0)
    assert [n.state for n in rm.nodes(states=["RUNNING"])] == ["RUNNING", "RUNNING"]
    node_id = golden("node")["request"]["path"].rsplit("/", 1)[-1]
    assert rm.node(node_id).gpus_total == 4
    with pytest.raises(RMNotFound, match="nodeId, no-such-host:1, is not found"):
        rm.node("no-such-host:1")
    assert rm.scheduler().queue("gpu").effective_min.gpus == 8

    new = rm.new_application()
    submission = golden("apps-submit")["request"]["body"]
    assert submission["application-id"] == new.application_id
    assert rm.submit_app(submission) == new.application_id  # from the Location header
    assert rm.apps(tags=["yarn-arbiter-ml"], states=["ACCEPTED", "RUNNING"])[0].name == (
        "golden-gpu")  # fmt: skip
    assert [a.name for a in rm.apps(queue="analytics")] == ["golden-analytics"]
    gpu = golden("app")["request"]["path"].rsplit("/", 1)[-1]
    assert rm.app(gpu).queue == rm.app_queue(gpu) == "root.gpu"
    assert rm.app_state(gpu) == "ACCEPTED" and rm.app_priority(gpu) == 0
    assert rm.app_timeouts(gpu)[0].unlimited and rm.app_timeout(gpu).unlimited
    expiry = golden("app-timeout-put")["request"]["body"]["timeout"]["expiryTime"]
    assert rm.set_app_lifetime(gpu, parse_expiry(expiry)).remaining_seconds > 3500
    assert rm.set_app_priority(gpu, 0) == 0
    analytics = golden("app-queue-put")["request"]["path"].split("/")[-2]
    assert rm.move_app(analytics, "default") == "root.default"
    with pytest.raises(RMNotFound, match="app with id: application_1000000000000_9999"):
        rm.app("application_1000000000000_9999")
    with pytest.raises(RMBadRequest, match="Invalid ApplicationId prefix") as bad:
        rm.app("not-an-application-id")
    assert bad.value.exception == "BadRequestException" and bad.value.status == 400

    assert rm.scheduler_conf()["yarn.scheduler.capacity.root.default.user-limit-factor"] == "4"
    ok = rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.default": {
        "user-limit-factor": 3}}))  # fmt: skip
    assert ok == "Configuration change successfully applied."
    # a plain-text 400 labelled application/json: the text is the message
    with pytest.raises(RMBadRequest, match="Failed to re-init queues"):
        rm.update_scheduler_conf(SchedConfUpdate(update_queue={"root.default": {
            "capacity": "[memory=oops]"}}))  # fmt: skip
    assert rm.kill_app(gpu, poll=0.01) == "KILLED"  # 202 (ACCEPTED), then 200 (KILLED)
    assert rm.app(gpu).state == "KILLED"


# -- drift: a fresh capture on a real local YARN ----------------------------------------------


def _own_apps_only(rec: dict[str, Any]) -> dict[str, Any]:
    """A shared cluster lists other tests' apps too (finished ones have more keys): keep the
    scenario's own (named ``golden-*``) in every ``apps`` list."""
    b = rec.get("body")
    if isinstance(b, dict) and isinstance(b.get("apps"), dict) and "app" in b["apps"]:
        apps = [a for a in b["apps"]["app"] if str(a.get("name", "")).startswith("golden-")]
        rec = {**rec, "body": {"apps": {"app": apps} if apps else {}}}
    return rec


@pytest.mark.yarn
@pytest.mark.slow
def test_real_rm_still_matches_golden_shapes(yarn_cluster) -> None:
    fresh = capture_rm.capture(yarn_cluster.rm_url, timeout_s=120)
    assert sorted(fresh) == NAMES
    problems = {
        name: p
        for name in NAMES
        if (p := shape_diff(name, _own_apps_only(golden(name)), _own_apps_only(fresh[name])))
    }
    assert not problems, (
        "the real RM drifted from tests/golden/rm-3.5.0 (re-capture with "
        "tests/golden/capture_rm.py and update the emulator):\n" + json.dumps(problems, indent=1)
    )
