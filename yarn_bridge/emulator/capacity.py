"""The Capacity Scheduler: queue configuration, its validation and mutation, and its view.

What it imitates (Hadoop 3.3 / 3.4 ``CapacityScheduler``, legacy queue mode):

* the ``yarn.scheduler.capacity.<queue path>.*`` configuration: capacities as percentages of
  the parent or as absolute resource vectors (``[memory=8192,vcores=8,yarn.io/gpu=2]``), and
  the effective minimum / maximum resources the scheduler enforces on a queue;
* ``PUT /ws/v1/cluster/scheduler-conf`` (``SchedConfUpdateInfo``: add, remove and update
  queues, global updates), validated as the RM validates a re-initialisation, and
  ``GET /ws/v1/cluster/scheduler-conf``;
* the Capacity Scheduler's ``GET /ws/v1/cluster/scheduler`` answer (``CapacitySchedulerInfo``,
  parent and leaf queue infos, per-partition capacities and resource usages, a leaf's users),
  without the keys of Hadoop 3.4's queue-capacity rework on the 3.3 line.

The rules the emulator follows are in the package docstring (:mod:`yarn_bridge.emulator`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from yarn_bridge.emulator.shapes import CS_34_ONLY_KEYS, CS_PREFIX, GPU, INT_MAX, LIVE
from yarn_bridge.emulator.state import ClusterState, _App, _HTTPError, _kv, _num

if TYPE_CHECKING:
    from yarn_bridge.emulator.engine import Engine

_Res = tuple[float, ...]  # (memory MB, vcores, GPUs)

#: Resource names an absolute capacity vector may use, and their index in a ``_Res``.
_VECTOR_INDEX: Final = {"memory": 0, "memory-mb": 0, "vcores": 1, GPU: 2}
_VECTOR_RE: Final = re.compile(r"^\s*\[(.*)\]\s*$")
_UNITS: Final = {"": 1, "Mi": 1, "M": 1, "Gi": 1024, "G": 1024, "Ti": 1024 * 1024}


def _parse_vector(raw: str, where: str) -> dict[int, int] | None:
    """``[memory=4096,vcores=4,yarn.io/gpu=2]`` -> {0: 4096, 1: 4, 2: 2}; ``None`` for a
    percentage (anything not in brackets). Memory may carry Mi / Gi / Ti. 400 if malformed."""
    m = _VECTOR_RE.match(raw)
    if not m:
        return None
    out: dict[int, int] = {}
    for part in m.group(1).split(","):
        if not part.strip():
            continue
        name, sep, value = (x.strip() for x in part.partition("="))
        num = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", value)
        if not sep or name not in _VECTOR_INDEX or num is None or num.group(2) not in _UNITS:
            raise _HTTPError(400, "BadRequestException",
                             f"{where}={raw!r}: malformed absolute resource entry {part.strip()!r} "
                             f"(known resources: memory, vcores, {GPU})", text=True)  # fmt: skip
        scale = _UNITS[num.group(2)] if _VECTOR_INDEX[name] == 0 else 1
        out[_VECTOR_INDEX[name]] = int(num.group(1)) * scale
    return out


def _fmt_vector(vec: Mapping[int, float]) -> str:
    names = ("memory", "vcores", GPU)
    return "<" + ", ".join(f"{names[i]}:{int(v)}" for i, v in sorted(vec.items())) + ">"


def _ratio(num: _Res, den: _Res) -> float:
    """The dominant share of ``num`` in ``den`` (DominantResourceCalculator.ratio), <= 1."""
    shares = [a / b for a, b in zip(num, den, strict=True) if b > 0]
    return min(1.0, max(shares, default=0.0))


class CapacityScheduler:
    """The Capacity Scheduler's configuration (``state.conf``) and view over one cluster."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def configure(self, leaves: Mapping[str, float | str]) -> None:
        """The initial configuration: ``leaves`` under ``root`` with these capacities
        (percentages, or absolute resource vectors as strings); ``ValueError`` if the RM would
        refuse it."""
        s = self.state
        s.conf = {
            f"{CS_PREFIX}.root.queues": ",".join(leaves),
            f"{CS_PREFIX}.resource-calculator":
                "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
            f"{CS_PREFIX}.maximum-am-resource-percent": "0.5",
        }  # fmt: skip
        for name, cap in leaves.items():
            s.conf[f"{CS_PREFIX}.root.{name}.capacity"] = cap if isinstance(cap, str) else _num(cap)
        try:
            self.validate(s.conf)
        except _HTTPError as exc:
            raise ValueError(f"queues: {exc.message}") from None

    def resolve(self, name: str) -> str | None:
        """The leaf queue ``name`` designates (its path, or a leaf name no other leaf has), or
        ``None``."""
        leaves = self.leaves()
        if name in leaves:
            return name
        named = [p for p in leaves if p.rsplit(".", 1)[-1] == name]
        return named[0] if len(named) == 1 else None

    # -- configuration -----------------------------------------------------------------------

    def children(self, path: str, conf: Mapping[str, str] | None = None) -> list[str]:
        conf = self.state.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.queues", "")
        return [f"{path}.{q.strip()}" for q in raw.split(",") if q.strip()]

    def queues(self, conf: Mapping[str, str] | None = None) -> list[str]:
        out, stack = [], ["root"]
        while stack:
            p = stack.pop()
            out.append(p)
            stack.extend(reversed(self.children(p, conf)))
        return out

    def leaves(self) -> list[str]:
        return [p for p in self.queues() if p != "root" and not self.children(p)]

    def conf_float(self, path: str, key: str, default: float,
                   conf: Mapping[str, str] | None = None) -> float:  # fmt: skip
        conf = self.state.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.{key}")
        if raw is None or raw == "":
            return default
        try:
            return float(raw)
        except ValueError:
            raise _HTTPError(
                400,
                "BadRequestException",
                f"{CS_PREFIX}.{path}.{key}={raw!r} is not a percentage (an absolute resource "
                "vector needs the queue's capacity and its siblings' in absolute mode too)",
                text=True,
            ) from None

    def vector(self, path: str, key: str,
               conf: Mapping[str, str] | None = None) -> dict[int, int] | None:  # fmt: skip
        """The absolute resource vector configured as ``key`` of ``path``, or ``None``."""
        conf = self.state.conf if conf is None else conf
        raw = conf.get(f"{CS_PREFIX}.{path}.{key}")
        return None if raw is None else _parse_vector(raw, f"{CS_PREFIX}.{path}.{key}")

    def is_absolute(self, path: str, conf: Mapping[str, str] | None = None) -> bool:
        return path != "root" and self.vector(path, "capacity", conf) is not None

    def effective(self, conf: Mapping[str, str] | None = None) -> dict[str, tuple[_Res, _Res]]:
        """Queue path -> (effective minimum, effective maximum) resources as (MB, vcores,
        GPUs) over the RUNNING nodes (package docstring: percentages of the parent's, or
        absolute vectors scaled down when the siblings' sum exceeds the parent's)."""
        s = self.state
        conf = s.conf if conf is None else conf
        total = tuple(float(x) for x in s.cluster_total())
        out: dict[str, tuple[_Res, _Res]] = {"root": (total, total)}
        for path in self.queues(conf):
            kids = self.children(path, conf)
            if not kids:
                continue
            pmin, pmax = out[path]
            vecs = {k: self.vector(k, "capacity", conf) for k in kids}
            sums = [sum(v.get(i, 0) for v in vecs.values() if v is not None) for i in range(3)]
            for k in kids:
                vec = vecs[k]
                if vec is not None:
                    mn = tuple(
                        vec.get(i, 0) * min(1.0, pmin[i] / sums[i]) if sums[i] else 0.0
                        for i in range(3)
                    )
                else:
                    pct = self.conf_float(k, "capacity", 0.0, conf) / 100.0
                    mn = tuple(x * pct for x in pmin)
                mvec = self.vector(k, "maximum-capacity", conf)
                if mvec is not None:
                    mx = tuple(min(pmax[i], float(mvec.get(i, pmax[i]))) for i in range(3))
                else:
                    mpct = self.conf_float(k, "maximum-capacity", 100.0, conf) / 100.0
                    mx = tuple(x * mpct for x in pmax)
                out[k] = (tuple(min(a, b) for a, b in zip(mn, mx, strict=True)), mx)
        return out

    def cap(self, path: str, key: str) -> float:
        if path == "root":
            return 100.0
        return self.conf_float(path, key, 100.0 if key == "maximum-capacity" else 0.0)

    def abs_cap(self, path: str, key: str) -> float:
        """Absolute capacity / maximum capacity (% of the cluster), percentage mode."""
        frac = 1.0
        parts = path.split(".")
        for k in range(2, len(parts) + 1):
            frac *= self.cap(".".join(parts[:k]), key) / 100.0
        return frac * 100.0

    def queue_state(self, path: str) -> str:
        state = self.state.conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper()
        if "." in path:
            parent = path.rsplit(".", 1)[0]
            if self.queue_state(parent) == "STOPPED":
                return "STOPPED"
        return state

    def default_priority(self, path: str) -> int:
        if self.state.scheduler != "capacity":
            return 0
        return int(self.conf_float(path, "default-application-priority", 0.0))

    def validate(self, conf: Mapping[str, str]) -> None:
        def bad(msg: str) -> _HTTPError:
            return _HTTPError(400, "BadRequestException", msg, text=True)

        for path in self.queues(conf):
            kids = self.children(path, conf)
            if kids:
                absolute = {k: self.is_absolute(k, conf) for k in kids}
                if len(set(absolute.values())) > 1:
                    raise bad(f"Failed to re-init queues : the children of queue {path} mix "
                              "absolute resource and percentage capacities: "
                              f"{sorted(k for k, a in absolute.items() if a)} vs "
                              f"{sorted(k for k, a in absolute.items() if not a)}")  # fmt: skip
                if path != "root" and any(absolute.values()) != self.is_absolute(path, conf):
                    raise bad(f"Parent queue '{path}' and child queue '{kids[0]}' should use "
                              "either percentage based capacity configuration or absolute "
                              "resource together.")  # fmt: skip
                if not any(absolute.values()):
                    total = sum(self.conf_float(k, "capacity", 0.0, conf) for k in kids)
                    if abs(total - 100.0) > 1e-3:
                        raise bad(f"Illegal capacity of {total / 100:.3f} for children of "
                                  f"queue {path}")  # fmt: skip
            if path == "root":
                continue
            vec = self.vector(path, "capacity", conf)
            if vec is not None:
                mvec = self.vector(path, "maximum-capacity", conf)
                if mvec is None:
                    mx = self.conf_float(path, "maximum-capacity", 100.0, conf)
                    if not 0.0 <= mx <= 100.0:
                        raise bad(f"Illegal maximum-capacity {mx} of queue {path}: must be in "
                                  "[0, 100]")  # fmt: skip
                elif any(v > mvec[i] for i, v in vec.items() if i in mvec):
                    raise bad(f"Min resource configuration {_fmt_vector(vec)} is greater than "
                              f"its max value:{_fmt_vector(mvec)} in queue:{path}")  # fmt: skip
            else:
                cap = self.conf_float(path, "capacity", 0.0, conf)
                mx = self.conf_float(path, "maximum-capacity", 100.0, conf)
                if not (0.0 <= cap <= 100.0 and 0.0 <= mx <= 100.0):
                    raise bad(f"Illegal capacity {cap} or maximum-capacity {mx} of queue "
                              f"{path}: must be in [0, 100]")  # fmt: skip
                if cap > mx + 1e-9:
                    raise bad(f"Illegal queue capacity setting (abs-capacity={cap}) > "
                              f"(abs-maximum-capacity={mx}) for queue {path}")  # fmt: skip
            state = conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper()
            if state not in ("RUNNING", "STOPPED"):
                raise bad(f"Invalid queue state {state} for {path}")

    # -- PUT /scheduler-conf --------------------------------------------------------------

    def mutate_conf(self, body: Any, user: str | None, engine: Engine) -> None:
        """Apply a ``PUT /scheduler-conf`` body (``SchedConfUpdateInfo`` JSON), atomically."""
        s = self.state

        def text_bad(msg: str) -> _HTTPError:
            return _HTTPError(400, "BadRequestException", msg, text=True)

        if s.scheduler != "capacity":
            raise text_bad("Configuration change only supported by MutableConfScheduler.")
        if isinstance(body, dict) and "sched-conf" in body:
            body = body["sched-conf"]
        if not isinstance(body, dict):
            raise text_bad("The request body must be a sched-conf object")
        unknown = set(body) - {"add-queue", "remove-queue", "update-queue", "global-updates",
                               "subClusterId"}  # fmt: skip
        if unknown:
            raise text_bad(f"Unknown sched-conf elements: {sorted(unknown)}")

        def queue_infos(key: str) -> list[tuple[str, dict[str, str]]]:
            raw = body.get(key) or []
            items = raw if isinstance(raw, list) else [raw]
            out = []
            for item in items:
                if not isinstance(item, dict) or not item.get("queue-name"):
                    raise text_bad(f"{key}: every entry needs a queue-name")
                out.append((str(item["queue-name"]), _kv(item.get("params"), key)))
            return out

        with s.lock:
            engine.tick()
            conf = dict(s.conf)
            existing = set(self.queues(conf))
            for path, params in queue_infos("add-queue"):
                if path in existing:
                    raise text_bad(f"Can't add existing queue {path}")
                parent, _, leaf = path.rpartition(".")
                if parent not in existing:
                    raise text_bad(f"Can't add queue {path}: parent {parent} does not exist")
                if any(a.state in LIVE for a in s.apps.values() if a.queue == parent):
                    raise text_bad(f"Can't add queue {path}: leaf {parent} has live apps")
                siblings = [q.rsplit(".", 1)[-1] for q in self.children(parent, conf)]
                conf[f"{CS_PREFIX}.{parent}.queues"] = ",".join([*siblings, leaf])
                for k, v in params.items():
                    conf[f"{CS_PREFIX}.{path}.{k}"] = v
                existing.add(path)
            raw_remove = body.get("remove-queue") or []
            for path in [raw_remove] if isinstance(raw_remove, str) else raw_remove:
                path = str(path)
                if path not in existing or path == "root":
                    raise text_bad(f"Can't remove queue {path}: it does not exist")
                if conf.get(f"{CS_PREFIX}.{path}.state", "RUNNING").upper() != "STOPPED":
                    raise text_bad(f"Can't remove queue {path}: it is not STOPPED")
                if any(a.state in LIVE for a in s.apps_in(path)):
                    raise text_bad(f"Can't remove queue {path}: it has live applications")
                parent, _, leaf = path.rpartition(".")
                siblings = [q.rsplit(".", 1)[-1] for q in self.children(parent, conf)]
                conf[f"{CS_PREFIX}.{parent}.queues"] = ",".join(q for q in siblings if q != leaf)
                for key in [k for k in conf if k.startswith(f"{CS_PREFIX}.{path}.")]:
                    del conf[key]
                existing.discard(path)
            for path, params in queue_infos("update-queue"):
                if path not in existing:
                    raise text_bad(f"Can't update queue {path}: it does not exist")
                for k, v in params.items():
                    conf[f"{CS_PREFIX}.{path}.{k}"] = v
            for k, v in _kv(body.get("global-updates"), "global-updates").items():
                if v == "":
                    conf.pop(k, None)
                else:
                    conf[k] = v
            self.validate(conf)
            s.conf = conf
            s.conf_version += 1
            s.conf_log.append({"version": s.conf_version, "time": s.time_ms, "user": user,
                                  "body": body})  # fmt: skip
            engine.schedule(s.time_ms)

    # -- GET /scheduler, GET /scheduler-conf ----------------------------------------------

    def queue_json(self, path: str, total: tuple[int, int, int],
                   eff: Mapping[str, tuple[_Res, _Res]]) -> dict[str, Any]:  # fmt: skip
        s = self.state
        kids = self.children(path)
        apps = s.apps_in(path)
        live = [a for a in apps if a.state in LIVE]
        used = s.used(apps)
        pend = s.pending(live)
        eff_min = tuple(int(x) for x in eff[path][0])
        eff_max = tuple(int(x) for x in eff[path][1])
        vec = self.vector(path, "capacity") if path != "root" else None
        mvec = self.vector(path, "maximum-capacity") if path != "root" else None
        if vec is None:
            cap, mx = self.cap(path, "capacity"), self.cap(path, "maximum-capacity")
            acap, amax = self.abs_cap(path, "capacity"), self.abs_cap(path, "maximum-capacity")
            entries = [(r, f"{cap:.1f}%") for r in ("memory-mb", "vcores", GPU)]
        else:  # absolute mode: the percentages are dominant shares of the parent / cluster
            pmin, pmax = eff[path.rsplit(".", 1)[0]]
            tot = tuple(float(x) for x in total)
            cap, mx = 100.0 * _ratio(eff[path][0], pmin), 100.0 * _ratio(eff[path][1], pmax)
            acap, amax = 100.0 * _ratio(eff[path][0], tot), 100.0 * _ratio(eff[path][1], tot)
            entries = [(r, f"{float(vec.get(i, 0)):.1f}")
                       for i, r in enumerate(("memory-mb", "vcores", GPU))]  # fmt: skip
        used_cap = 100.0 * used[0] / eff_min[0] if eff_min[0] else 0.0
        abs_used = 100.0 * used[0] / total[0] if total[0] else 0.0
        containers = sum(len(a.containers) for a in apps)
        max_alloc = s.resource(
            *s.max_allocation, max((n.gpus for n in s.nodes.values()), default=0)
        )
        zero = s.resource(0, 0, 0)
        configured_min = s.resource(*(vec.get(i, 0) for i in range(3))) if vec else zero
        configured_max = s.resource(*(mvec.get(i, 0) for i in range(3))) if mvec else zero
        vector_info = {
            "configuredCapacityVector": "[" + ",".join(f"{r}={v}" for r, v in entries) + "]",
            "capacityVectorEntries": [{"resourceName": r, "resourceValue": v}
                                      for r, v in entries],
        }  # fmt: skip
        am_pct = float(s.conf.get(f"{CS_PREFIX}.maximum-am-resource-percent", "0.1"))
        am_limit = s.resource(int(eff_max[0] * am_pct), max(1, int(eff_max[1] * am_pct)), 0)
        am_used = s.used_am(apps)
        d: dict[str, Any] = {}
        is_root = path == "root"
        if not kids and not is_root:
            d["type"] = "capacitySchedulerLeafQueueInfo"
        d.update({
            "queuePath": path,
            "capacity": cap,
            "usedCapacity": round(used_cap, 4),
            "maxCapacity": mx,
            "absoluteCapacity": round(acap, 4),
            "absoluteMaxCapacity": round(amax, 4),
            "absoluteUsedCapacity": round(abs_used, 4),
            "weight": -1,
            "normalizedWeight": 0,
            "numApplications": len(live),
            "maxParallelApps": INT_MAX,
            "queueName": path.rsplit(".", 1)[-1],
            "isAbsoluteResource": vec is not None,
            "state": self.queue_state(path),
        })  # fmt: skip
        if kids:
            d["queues"] = {"queue": [self.queue_json(k, total, eff) for k in kids]}
        d.update({
            "resourcesUsed": s.resource(*used),
            "hideReservationQueues": False,
            "nodeLabels": ["*"],
            "allocatedContainers": containers,
            "reservedContainers": 0,
            "pendingContainers": pend[3],
            "capacities": {"queueCapacitiesByPartition": [{
                "partitionName": "",
                "queueCapacityVectorInfo": vector_info,
                "capacity": cap,
                "usedCapacity": round(used_cap, 4),
                "maxCapacity": mx,
                "absoluteCapacity": round(acap, 4),
                "absoluteUsedCapacity": round(abs_used, 4),
                "absoluteMaxCapacity": round(amax, 4),
                "maxAMLimitPercentage": am_pct * 100.0 if not kids else 0,
                "weight": -1,
                "normalizedWeight": 0,
                "configuredMinResource": configured_min,
                "configuredMaxResource": configured_max,
                "effectiveMinResource": s.resource(*eff_min),
                "effectiveMaxResource": s.resource(*eff_max),
            }]},
            "resources": {"resourceUsagesByPartition": [{
                "partitionName": "",
                "used": s.resource(*used),
                "reserved": zero,
                "pending": s.resource(pend[0], pend[1], pend[2]),
                "amUsed": s.resource(*am_used),
                "amLimit": am_limit,
                "userAmLimit": am_limit,
            }]},
            "minEffectiveCapacity": s.resource(*eff_min),
            "maxEffectiveCapacity": s.resource(*eff_max),
            "maximumAllocation": max_alloc,
            "queueAcls": {"queueAcl": [
                {"accessType": "ADMINISTER_QUEUE", "accessControlList": "*"},
                {"accessType": "APPLICATION_MAX_PRIORITY", "accessControlList": "*"},
                {"accessType": "SUBMIT_APP", "accessControlList": "*"},
            ]},
            "queuePriority": 0,
            "orderingPolicyInfo": "fifo" if not kids and not is_root else "utilization",
            "autoCreateChildQueueEnabled": False,
            "leafQueueTemplate": {},
            "mode": "absolute" if vec is not None else "percentage",
            "queueType": "leaf" if not kids and not is_root else "parent",
            "creationMethod": "static",
            "autoCreationEligibility": "off",
            "autoQueueTemplateProperties": {},
            "autoQueueParentTemplateProperties": {},
            "autoQueueLeafTemplateProperties": {},
        })  # fmt: skip
        if is_root:
            del d["autoCreateChildQueueEnabled"], d["leafQueueTemplate"]
        if not kids and not is_root:
            users: dict[str, list[_App]] = {}
            for a in live:
                users.setdefault(a.user, []).append(a)

            def user_json(name: str, xs: list[_App]) -> dict[str, Any]:
                u_pend = s.pending(xs)
                u_am = s.resource(*s.used_am(xs))
                return {
                    "username": name,
                    "resourcesUsed": s.resource(*s.used(xs)),
                    "numPendingApplications": sum(1 for a in xs if not _activated(a)),
                    "numActiveApplications": sum(1 for a in xs if _activated(a)),
                    "AMResourceUsed": u_am,
                    "userResourceLimit": s.resource(*(int(x) for x in eff_min)),
                    "resources": {"resourceUsagesByPartition": [{
                        "partitionName": "",
                        "used": s.resource(*s.used(xs)),
                        "reserved": zero,
                        "pending": s.resource(u_pend[0], u_pend[1], u_pend[2]),
                        "amUsed": u_am,
                        "amLimit": am_limit,
                        "userAmLimit": zero,
                    }]},
                    "userWeight": 1.0,
                    "isActive": u_pend[3] > 0,
                }  # fmt: skip

            d.update({
                "numActiveApplications": sum(1 for a in live if _activated(a)),
                "numPendingApplications": sum(1 for a in live if not _activated(a)),
                "numContainers": containers,
                "maxApplications": int(10000 * acap / 100.0),
                "maxApplicationsPerUser": int(10000 * acap / 100.0),
                "userLimit": 100,
                "users": {"user": [user_json(u, xs) for u, xs in sorted(users.items())]}
                if users else {},
                "userLimitFactor": 1,
                "configuredMaxAMResourceLimit": am_pct,
                "AMResourceLimit": am_limit,
                "usedAMResource": s.resource(*am_used),
                "userAMResourceLimit": am_limit,
                "preemptionDisabled": True,
                "intraQueuePreemptionDisabled": True,
                "defaultPriority": self.default_priority(path),
                "isAutoCreatedLeafQueue": False,
                "maxApplicationLifetime": -1,
                "defaultApplicationLifetime": -1,
            })  # fmt: skip
        return d

    def scheduler_json(self) -> dict:
        s = self.state
        total = s.cluster_total()
        q = self.queue_json("root", total, self.effective())
        root = {
            "type": "capacityScheduler",
            "capacity": 100.0,
            "usedCapacity": q["usedCapacity"],
            "maxCapacity": 100.0,
            "weight": -1,
            "normalizedWeight": 0,
            "queueCapacityVectorInfo": q["capacities"]["queueCapacitiesByPartition"][0][
                "queueCapacityVectorInfo"],
            "queueName": "root",
            "queuePath": "root",
            "maxParallelApps": INT_MAX,
            "isAbsoluteResource": False,
            "queues": q["queues"],
            "capacities": q["capacities"],
            "health": {
                "lastrun": s.time_ms,
                "operationsInfo": [
                    {"operation": op, "nodeId": "N/A", "containerId": "N/A", "queue": "N/A"}
                    for op in ("last-allocation", "last-release", "last-preemption",
                               "last-reservation")
                ],
                "lastRunDetails": [
                    {"operation": op, "count": 0, "resources": s.resource(0, 0, 0)}
                    for op in ("releases", "allocations", "reservations")
                ],
            },
        }  # fmt: skip
        for key in ("maximumAllocation", "queueAcls", "queuePriority", "orderingPolicyInfo",
                    "mode", "queueType", "creationMethod", "autoCreationEligibility",
                    "autoQueueTemplateProperties", "autoQueueParentTemplateProperties",
                    "autoQueueLeafTemplateProperties"):  # fmt: skip
            root[key] = q[key]
        if s.hadoop_line == "3.3":
            _strip_34(root)
        return {"scheduler": {"schedulerInfo": root}}

    # Fair Scheduler view -------------------------------------------------------------------

    def conf_json(self) -> dict:
        s = self.state
        if s.scheduler != "capacity":
            raise _HTTPError(400, "BadRequestException",
                             "Configuration change only supported by MutableConfScheduler.",
                             text=True)  # fmt: skip
        return {"property": [{"name": k, "value": v} for k, v in sorted(s.conf.items())]}


def _activated(app: _App) -> bool:
    """Counted as an active application by its queue: RUNNING, or its AM container runs."""
    return app.state == "RUNNING" or (app.state == "ACCEPTED" and bool(app.containers))


def _strip_34(queue: dict[str, Any]) -> None:
    """Remove :data:`CS_34_ONLY_KEYS` from a queue info, its partitions and its children."""
    for key in CS_34_ONLY_KEYS:
        queue.pop(key, None)
    for part in (queue.get("capacities") or {}).get("queueCapacitiesByPartition", []):
        for key in CS_34_ONLY_KEYS:
            part.pop(key, None)
    for child in (queue.get("queues") or {}).get("queue", []):
        _strip_34(child)
