"""Capture a real ResourceManager's REST answers as golden files (one JSON file per request).

Usage (from the repository root)::

    python tests/golden/capture_rm.py --rm-url http://127.0.0.1:8088 --out tests/golden/rm-3.5.0
    python tests/golden/capture_rm.py --start --out tests/golden/rm-3.5.0   # own local cluster

``--start`` brings up a private local Hadoop (:class:`yarn_bridge.local_hadoop.LocalHadoop`,
the compose cluster's queues: default / analytics / gpu, two NodeManagers x 4 ``yarn.io/gpu``)
in a temporary directory and stops it afterwards.

The scenario (:func:`capture`) is every request ``yarn_bridge/rm.py`` makes and the emulator
serves: cluster info and metrics, nodes (all, by state, one, none), the scheduler, apps (all,
by state, by tag, by queue, with ``deSelects``, none), one app and its state / queue /
priority / timeouts (GET and PUT), ``new-application``, the submission itself (``202`` +
``Location``), the scheduler configuration (GET, a ``PUT`` ``update-queue`` and an invalid
one), and error answers (unknown app or node: 404; malformed app id, bad target state: 400).
Two apps run meanwhile: one in ``analytics``, one in ``gpu`` tagged ``yarn-arbiter-ml``; their
AM command is ``sleep``, so the AM container runs but never registers (the app stays
``ACCEPTED`` with its AM container until killed). Both are killed at the end; the
``update-queue`` change is undone.

Each file is an envelope: ``request`` (method, path, query, body), ``status``,
``content_type`` (whatever the header says, even over a non-JSON body), ``location`` (when the
RM sent one) and either ``body`` (the decoded JSON; ``null`` when empty) or ``text`` (the answer
as sent, when it is not JSON). Nothing is normalised: ids, timestamps, ports and readings
are as recorded. ``MANIFEST.json`` says which Hadoop, when, how, and lists the files.

``tests/integration/test_emulator_golden.py`` runs the same :func:`capture` against the
emulator (and, when a local YARN can start, against a fresh real RM) and compares the shapes
with these files.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from yarn_bridge.rm import AppSubmission, SchedConfUpdate  # noqa: E402

WS = "/ws/v1/cluster"
ML_TAG = "yarn-arbiter-ml"
#: The AM command: the container runs, the AM never registers (module docstring).
AM_COMMAND = "sleep 600"
#: A harmless scheduler-conf mutation (undone at the end) and an invalid one.
CONF_QUEUE = "root.default"
CONF_KEY = "user-limit-factor"

Record = dict[str, Any]


class CaptureError(RuntimeError):
    """The RM did not get to the state the scenario needs (the message says which)."""


def _envelope(resp: httpx.Response, method: str, path: str, query: dict[str, str] | None,
              body: Any) -> Record:  # fmt: skip
    ctype = resp.headers.get("content-type", "").split(";")[0].strip()
    rec: Record = {
        "request": {"method": method, "path": path, "query": query or {}, "body": body},
        "status": resp.status_code,
        "content_type": ctype,
    }
    if resp.headers.get("location"):
        rec["location"] = resp.headers["location"]
    try:
        rec["body"] = json.loads(resp.text) if resp.text.strip() else None
    except json.JSONDecodeError:  # e.g. scheduler-conf's plain-text answers
        rec["text"] = resp.text
    return rec


class _Session:
    def __init__(self, rm_url: str, user: str, log: Callable[[str], None]) -> None:
        self.base = rm_url.rstrip("/")
        self.user = user
        self.log = log
        self.http = httpx.Client(timeout=30.0, headers={"Accept": "application/json"},
                                 trust_env=False)  # fmt: skip
        self.records: dict[str, Record] = {}

    def call(self, method: str, path: str, query: dict[str, str] | None = None,
             body: Any = None) -> Record:  # fmt: skip
        params = {**(query or {}), "user.name": self.user}
        resp = self.http.request(method, self.base + WS + path, params=params, json=body)
        return _envelope(resp, method, WS + path, query, body)

    def save(self, name: str, method: str, path: str, query: dict[str, str] | None = None,
             body: Any = None, *, expect: tuple[int, ...] = (200,)) -> Record:  # fmt: skip
        rec = self.call(method, path, query, body)
        if rec["status"] not in expect:
            raise CaptureError(f"{name}: {method} {path} answered {rec['status']} "
                               f"(expected {expect}): {str(rec['body'])[:300]}")  # fmt: skip
        self.records[name] = rec
        self.log(f"  {name}: {method} {path} -> {rec['status']}")
        return rec

    def app(self, app_id: str) -> dict[str, Any]:
        return self.call("GET", f"/apps/{app_id}")["body"]["app"]

    def kill(self, app_id: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            for _ in range(100):
                rec = self.call("PUT", f"/apps/{app_id}/state", body={"state": "KILLED"})
                if rec["status"] != 202:
                    return
                time.sleep(0.2)


def _submit(s: _Session, name: str, queue: str, tags: tuple[str, ...], *,
            record: str | None) -> str:  # fmt: skip
    new = s.save("new-application", "POST", "/apps/new-application") if record else \
        s.call("POST", "/apps/new-application")  # fmt: skip
    app_id = new["body"]["application-id"]
    body = AppSubmission(app_id, name, AM_COMMAND, queue=queue, memory_mb=1024, vcores=1,
                         tags=tags).to_json()  # fmt: skip
    if record:
        s.save(record, "POST", "/apps", body=body, expect=(202,))
    else:
        rec = s.call("POST", "/apps", body=body)
        if rec["status"] != 202:
            raise CaptureError(f"submission to {queue} answered {rec['status']}: {rec['body']}")
    return app_id


def _wait_am_running(s: _Session, app_ids: list[str], timeout_s: float) -> None:
    """Until every app holds its (running) AM container and the nodes report them."""
    end = time.monotonic() + timeout_s
    while True:
        apps = [s.app(a) for a in app_ids]
        if any(a["state"] in ("FAILED", "KILLED", "FINISHED") for a in apps):
            ended = [(a["id"], a["state"], a["diagnostics"]) for a in apps]
            raise CaptureError(f"an app ended: {ended}")
        held = all(a.get("runningContainers", 0) >= 1 and a.get("amHostHttpAddress")
                   for a in apps)  # fmt: skip
        nodes = s.call("GET", "/nodes")["body"]["nodes"].get("node") or []
        on_nodes = sum(n.get("numContainers", 0) for n in nodes)
        if held and on_nodes >= len(app_ids):
            return
        if time.monotonic() > end:
            raise CaptureError(f"AM containers not running after {timeout_s:g} s: "
                               f"{[(a['id'], a['state']) for a in apps]}")  # fmt: skip
        time.sleep(0.5)


def capture(rm_url: str, *, user: str | None = None, timeout_s: float = 120.0,
            log: Callable[[str], None] = lambda _m: None) -> dict[str, Record]:  # fmt: skip
    """Run the scenario against ``rm_url``; returns file stem -> envelope (module docstring)."""
    s = _Session(rm_url, user or getpass.getuser(), log)
    apps: list[str] = []
    conf_before: str | None = None
    try:
        s.save("cluster", "GET", "")
        s.save("info", "GET", "/info")
        s.save("apps-none", "GET", "/apps", {"applicationTags": "golden-capture-no-such-tag"})
        s.save("nodes-none", "GET", "/nodes", {"states": "DECOMMISSIONED"})
        apps.append(_submit(s, "golden-analytics", "analytics", (), record="apps-submit"))
        apps.append(_submit(s, "golden-gpu", "gpu", (ML_TAG, "Golden-Capture"), record=None))
        analytics, gpu = apps
        _wait_am_running(s, apps, timeout_s)
        s.save("metrics", "GET", "/metrics")
        nodes = s.save("nodes", "GET", "/nodes")
        s.save("nodes-running", "GET", "/nodes", {"states": "RUNNING"})
        node_id = s.app(gpu).get("masterNodeId") or nodes["body"]["nodes"]["node"][0]["id"]
        s.save("node", "GET", f"/nodes/{node_id}")
        s.save("node-unknown-404", "GET", "/nodes/no-such-host:1", expect=(404,))
        s.save("scheduler", "GET", "/scheduler")
        s.save("apps", "GET", "/apps")
        s.save("apps-states", "GET", "/apps", {"states": "ACCEPTED,RUNNING"})
        s.save("apps-tags", "GET", "/apps",
               {"applicationTags": ML_TAG, "states": "ACCEPTED,RUNNING"})  # fmt: skip
        s.save("apps-queue", "GET", "/apps", {"queue": "analytics"})
        s.save("apps-deselects", "GET", "/apps",
               {"states": "ACCEPTED,RUNNING", "deSelects": "resourceRequests,timeouts,"
                "appNodeLabelExpression,amNodeLabelExpression"})  # fmt: skip
        s.save("app", "GET", f"/apps/{gpu}")
        s.save("app-state", "GET", f"/apps/{gpu}/state")
        s.save("app-queue", "GET", f"/apps/{gpu}/queue")
        s.save("app-priority", "GET", f"/apps/{gpu}/priority")
        s.save("app-timeouts", "GET", f"/apps/{gpu}/timeouts")
        s.save("app-timeout-lifetime", "GET", f"/apps/{gpu}/timeouts/LIFETIME")
        expiry = datetime.fromtimestamp(time.time() + 3600, UTC)
        s.save(
            "app-timeout-put",
            "PUT",
            f"/apps/{gpu}/timeout",
            body={
                "timeout": {
                    "type": "LIFETIME",
                    "expiryTime": expiry.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
                }
            },
        )
        s.save("app-priority-put", "PUT", f"/apps/{gpu}/priority", body={"priority": 0})
        s.save("app-queue-put", "PUT", f"/apps/{analytics}/queue", body={"queue": "default"})
        s.save("app-unknown-404", "GET", "/apps/application_1000000000000_9999", expect=(404,))
        s.save("app-bad-id-400", "GET", "/apps/not-an-application-id", expect=(400,))
        s.save("app-state-put-bad-400", "PUT", f"/apps/{gpu}/state", body={"state": "RUNNING"},
               expect=(400,))  # fmt: skip
        conf = s.save("scheduler-conf", "GET", "/scheduler-conf")
        props = conf["body"].get("property") or []
        conf_before = next((p["value"] for p in props
                            if p["name"] == f"yarn.scheduler.capacity.{CONF_QUEUE}.{CONF_KEY}"),
                           "1")  # fmt: skip
        s.save(
            "scheduler-conf-put",
            "PUT",
            "/scheduler-conf",
            body=SchedConfUpdate(update_queue={CONF_QUEUE: {CONF_KEY: 3}}).to_json(),
        )
        s.save("scheduler-conf-put-bad-400", "PUT", "/scheduler-conf",
               body=SchedConfUpdate(update_queue={CONF_QUEUE: {"capacity": "[memory=oops]"}}
                                    ).to_json(), expect=(400,))  # fmt: skip
        s.save("app-state-put-kill", "PUT", f"/apps/{gpu}/state", body={"state": "KILLED"},
               expect=(202,))  # fmt: skip
        end = time.monotonic() + timeout_s
        while s.call("GET", f"/apps/{gpu}/state")["body"]["state"] != "KILLED":
            if time.monotonic() > end:
                raise CaptureError(f"{gpu} not KILLED after {timeout_s:g} s")
            time.sleep(0.2)
        s.save("app-state-put-killed", "PUT", f"/apps/{gpu}/state", body={"state": "KILLED"})
        s.save("app-killed", "GET", f"/apps/{gpu}")
        return s.records
    finally:
        for app_id in apps:
            s.kill(app_id)
        if conf_before is not None:
            s.call("PUT", "/scheduler-conf",
                   body=SchedConfUpdate(update_queue={CONF_QUEUE: {CONF_KEY: conf_before}}
                                        ).to_json())  # fmt: skip
        s.http.close()


def write(records: dict[str, Record], out: Path, manifest: dict[str, Any]) -> None:
    """One ``<name>.json`` per record plus ``MANIFEST.json`` (old ``*.json`` files removed)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    for name, rec in records.items():
        (out / f"{name}.json").write_text(json.dumps(rec, indent=2) + "\n")
    files = {f"{n}.json": f"{r['request']['method']} {r['request']['path']}"
             + (f"?{'&'.join(f'{k}={v}' for k, v in r['request']['query'].items())}"
                if r["request"]["query"] else "") + f" -> {r['status']}"
             for n, r in records.items()}  # fmt: skip
    (out / "MANIFEST.json").write_text(json.dumps({**manifest, "files": files}, indent=2) + "\n")


@contextlib.contextmanager
def _own_cluster(log: Callable[[str], None]) -> Iterator[str]:
    from yarn_bridge.local_hadoop import LocalHadoop, LocalHadoopSpec

    with tempfile.TemporaryDirectory(prefix="golden-yarn-") as tmp:
        local = LocalHadoop(Path(tmp))
        state = local.up(LocalHadoopSpec(Path(tmp)), progress=log)
        try:
            yield local.active_rm() or state.rm_url
        finally:
            local.down()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--rm-url", help="a running ResourceManager, http://host:port")
    where.add_argument(
        "--start",
        action="store_true",
        help="start a private local Hadoop in a temp dir, stop it after",
    )
    p.add_argument("--out", type=Path, required=True, help="directory for the golden files")
    p.add_argument("--user", default=None, help="user.name for the requests (default: you)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the AMs")
    args = p.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    with contextlib.ExitStack() as stack:
        url = stack.enter_context(_own_cluster(log)) if args.start else args.rm_url
        log(f"capturing {url} ...")
        records = capture(url, user=args.user, timeout_s=args.timeout, log=log)
    info = records["info"]["body"]["clusterInfo"]
    manifest = {
        "hadoopVersion": info["hadoopVersion"],
        "hadoopBuildVersion": info["hadoopBuildVersion"],
        "resourceManagerVersion": info["resourceManagerVersion"],
        "capturedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "capturedBy": "tests/golden/capture_rm.py"
        + (" --start" if args.start else " --rm-url <running RM>"),
        "cluster": "yarn_bridge.local_hadoop.LocalHadoop (deploy/conf: Capacity Scheduler, "
        "queues default/analytics/gpu as absolute vectors, mutable conf; 2 NodeManagers x "
        "8 GB, 8 vcores, 4 yarn.io/gpu)"
        if args.start
        else f"RM at {url}",
        "scenario": "see capture() in tests/golden/capture_rm.py: two apps whose AM runs "
        f"'{AM_COMMAND}' (never registers, so ACCEPTED with a running AM container), one in "
        f"analytics, one in gpu tagged {ML_TAG}; killed at the end",
        "host": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "envelope": "request {method,path,query,body}, status, content_type, location?, and "
        "body (decoded JSON) or text (a non-JSON answer); values unnormalised",
    }
    write(records, args.out, manifest)
    log(f"{len(records)} files + MANIFEST.json in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
