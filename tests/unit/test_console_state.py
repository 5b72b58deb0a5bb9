"""The console's pure parts: the bounded history and the ``/api/state`` document."""

from __future__ import annotations

import json
import math

import pytest

from arbiter.cluster import load_cluster
from arbiter.console import console_state, static_file
from arbiter.history import History, PlanSwitchRecord, ShareSample
from arbiter.journal import AppRecord
from arbiter.messages import ArbiterView
from arbiter.rounds import Lease, LeaseSource

CLUSTER = load_cluster("nodes:2:4")


def test_history_is_bounded() -> None:
    h = History(rho_samples=3, max_apps=2, shares=2)
    for t in range(5):
        h.add_rho(float(t), [("a", 1.0 + t, 1), ("b", math.inf, 0)])
    assert [s.at for s in h.rho["a"]] == [2.0, 3.0, 4.0]
    h.add_rho(5.0, [("c", 2.0, 2)])  # a third app: the least recently seen goes
    assert list(h.rho) == ["b", "c"]
    assert len(h.rho) == 2
    assert h.add_share(ShareSample(0.0, 1, 2, 4.0, 100.0))
    assert not h.add_share(ShareSample(1.0, 1, 2, 4.0, 100.0))  # same epoch: not kept
    h.add_share(ShareSample(2.0, 2, 3, 3.0, 50.0))
    h.add_share(ShareSample(3.0, 3, 4, 2.0, 25.0))
    assert [s.epoch for s in h.shares] == [2, 3]
    doc = json.dumps(h.to_json(), allow_nan=False)  # ∞ travels as null
    assert '"b": [[' in doc and "null" in doc
    with pytest.raises(ValueError, match="max_apps"):
        History(max_apps=0)


def test_plan_switches_are_kept_newest_first_and_bounded() -> None:
    h = History(plan_switches=2)
    for k in range(3):
        rec = PlanSwitchRecord(
            float(k), f"query-{k}", "q5", "alice", 1.0 + k, "p0", f"p{k + 1}", 8.0, 4096.0,
            ("s3",), (),
        )  # fmt: skip
        h.add_plan_switch(rec)
    doc = h.to_json()
    assert [x["job_id"] for x in doc["plan_switches"]] == ["query-2", "query-1"]  # type: ignore[index]
    assert doc["plan_switches"][0]["cancelled"] == ["s3"]  # type: ignore[index]
    json.dumps(doc, allow_nan=False)
    with pytest.raises(ValueError, match="plan_switches"):
        History(plan_switches=0)


def test_state_shows_who_holds_each_gpu() -> None:
    gpus = sorted(CLUSTER.gpu_ids)
    leases = (
        Lease("app-a", frozenset(gpus[:2]), 90.0, 160.0, 3, LeaseSource.AUCTION),
        Lease("app-b", frozenset(gpus[2:3]), 50.0, 99.0, 2, LeaseSource.LEFTOVER),  # ended
        Lease("app-b", frozenset(gpus[2:3]), 110.0, 170.0, 4, LeaseSource.POLICY),  # later
    )
    machine = CLUSTER.gpu(gpus[7]).machine
    view = ArbiterView(
        round=4, free=frozenset(gpus[2:4]), leases=leases,
        apps={"app-a": AppRecord("app-a", "h", "train", "alice", "gpu", 4, (), 1.0),
              "app-b": AppRecord("app-b", "h", "tune", "bob", "gpu", 2, (), 2.0)},
        connected=frozenset({"app-a"}), drained=frozenset({machine}), now=100.0,
        cluster=CLUSTER, queries=1, subscribers=1, external_jobs=1, epoch=5,
    )  # fmt: skip
    s = console_state(view, policy="themis", rho=lambda a: {"app-a": 0.8}.get(a, math.inf),
                      history={}, sources={}, health={}, capacity=(16.0, 4096.0))  # fmt: skip
    cells = {g["id"]: g for r in s["cluster"]["racks"] for m in r["machines"] for g in m["gpus"]}
    assert cells[gpus[0]]["state"] == "leased" and cells[gpus[0]]["lease"]["app_id"] == "app-a"
    assert cells[gpus[0]]["lease"]["held_for"] == 10.0 and cells[gpus[0]]["lease"]["ends_in"] == 60
    assert cells[gpus[2]]["state"] == "free" and cells[gpus[2]]["next"] == "app-b"
    assert cells[gpus[7]]["state"] == "drained"
    assert s["cluster"]["counts"] == {"free": 2, "leased": 2, "drained": 4, "reserved": 0}
    apps = {a["app_id"]: a for a in s["apps"]}
    assert apps["app-a"]["gpus"] == 2 and apps["app-a"]["rho"] == 0.8
    assert apps["app-b"]["rho"] is None and not apps["app-b"]["connected"]
    assert s["queries"]["active_jobs"] == 2 and s["queries"]["share"]["vcores"] == 8.0
    json.dumps(s, allow_nan=False)


def test_only_shipped_files_are_served() -> None:
    assert static_file("/") is not None and static_file("/static/console.js") is not None
    for bad in ("/static/../state.py", "/static/.hidden.js", "/static/state.py", "/etc/passwd"):
        assert static_file(bad) is None
