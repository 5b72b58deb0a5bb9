"""The emulated cluster's state: the data every part of a :class:`SimCluster` shares.

* :class:`Clock`: epoch time the tests can drive (``manual=True``: time moves only by
  :meth:`Clock.advance`).
* The records: NodeManagers (:class:`_Node`), containers (:class:`_Container`) and applications
  (:class:`_App`), and the REST error (:class:`_HTTPError`) every part raises for a 4xx answer.
* :class:`ClusterState`: the settings, nodes, applications, scheduler configuration and the
  time the state has been brought up to, under one lock; the resource aggregates the scheduler
  and the views compute from them; and how the Hadoop line served renders a resource, an empty
  list, a queue name and a NotFoundException message (Jersey 1 up to 3.4, Jersey 2 from 3.5).

:class:`SimCluster` is :class:`yarn_bridge.emulator.cluster.SimCluster`.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from yarn_bridge.emulator.shapes import GPU, HADOOP_VERSIONS, LONG_MAX

# --------------------------------------------------------------------------------------------
# Clock
# --------------------------------------------------------------------------------------------


class Clock:
    """Wall-clock time in epoch milliseconds, plus an offset :meth:`advance` adds to.
    ``manual=True`` freezes it, so only :meth:`advance` moves time (tests)."""

    def __init__(self, *, manual: bool = False, start: float | None = None) -> None:
        self.manual = manual
        self._base = time.time() if start is None else start
        self._t0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            if self.manual:
                return self._base + self._offset
            return self._base + (time.monotonic() - self._t0) + self._offset

    def now_ms(self) -> int:
        return int(self.now() * 1000)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._offset += seconds


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


class _HTTPError(Exception):
    def __init__(self, status: int, exception: str, message: str, text: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.exception = exception
        self.message = message
        self.text = text  # answer text/plain (scheduler-conf) rather than a RemoteException


def _bad(message: str) -> _HTTPError:
    return _HTTPError(400, "BadRequestException", message)


def _not_found(message: str) -> _HTTPError:
    return _HTTPError(404, "NotFoundException", message)


@dataclass
class _Node:
    host: str
    port: int
    rack: str
    memory_mb: int
    vcores: int
    gpus: int
    http_port: int = 8042
    state: str = "RUNNING"
    health_report: str = ""
    last_health_update: int = 0

    @property
    def id(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def active(self) -> bool:
        return self.state in ("RUNNING", "UNHEALTHY", "DECOMMISSIONING", "NEW")


@dataclass
class _Container:
    id: str
    node: str
    memory_mb: int
    vcores: int
    gpus: int
    is_am: bool


@dataclass
class _App:
    id: str
    name: str
    user: str
    queue: str  # full path
    app_type: str
    tags: tuple[str, ...]
    priority: int
    am_memory_mb: int
    am_vcores: int
    gpus: int
    duration_ms: int
    submitted_ms: int
    max_attempts: int = 1
    unmanaged: bool = False
    state: str = "NEW"
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    accepted_ms: int | None = None
    launched_ms: int | None = None
    finished_ms: int | None = None
    progress: float = 0.0
    attempt: int = 1
    am_node: str | None = None
    lifetime_ms: int | None = None
    containers: list[_Container] = field(default_factory=list)
    memory_ms: float = 0.0  # MB x ms
    vcore_ms: float = 0.0
    gpu_ms: float = 0.0
    container_seq: int = 0


def _ri(name: str, units: str, value: int) -> dict[str, Any]:
    return {
        "attributes": {},
        "maximumAllocation": LONG_MAX,
        "minimumAllocation": 0,
        "name": name,
        "resourceType": "COUNTABLE",
        "units": units,
        "value": value,
    }


def _parse_iso(text: str) -> int:
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?$", text.strip())
    if not m:
        raise _bad(f"Invalid date format for expiryTime: {text!r} (expected ISO 8601)")
    zone = (m.group(3) or "+0000").replace("Z", "+0000").replace(":", "")
    frac = (m.group(2) or ".0")[1:]
    when = datetime.strptime(m.group(1) + zone, "%Y-%m-%dT%H:%M:%S%z")
    return int(when.timestamp() * 1000) + int(frac[:3].ljust(3, "0"))


def _iso(ms: int) -> str:
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}+0000"


def _kv(raw: Any, what: str) -> dict[str, str]:
    """JAXB map forms: {"entry":[{"key","value"}]} / {"entry":{..}} / [{"entry":..}] / plain."""
    if raw is None:
        return {}
    if isinstance(raw, list):
        out: dict[str, str] = {}
        for item in raw:
            out.update(_kv(item, what))
        return out
    if not isinstance(raw, dict):
        raise _bad(f"{what}: expected an object")
    if "entry" in raw:
        entries = raw["entry"]
        entries = entries if isinstance(entries, list) else [entries]
        out = {}
        for e in entries:
            if not isinstance(e, dict) or "key" not in e:
                raise _bad(f"{what}: entries need 'key' and 'value'")
            out[str(e["key"])] = "" if e.get("value") is None else str(e["value"])
        return out
    return {str(k): str(v) for k, v in raw.items()}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --------------------------------------------------------------------------------------------
# The shared state
# --------------------------------------------------------------------------------------------


class ClusterState:
    """What the parts of one :class:`SimCluster` share: settings, nodes, apps, the scheduler
    configuration and :attr:`time_ms`, all guarded by :attr:`lock` (reentrant: a part holding
    it calls others). The resource aggregates are (memory MB, vcores, GPUs) tuples."""

    def __init__(
        self,
        *,
        scheduler: Literal["capacity", "fair"],
        hadoop_version: str,
        am_registers: bool,
        clock: Clock,
        app_seconds: float,
        new_seconds: float,
        start_seconds: float,
        duration_jitter: float,
        seed: int,
        max_priority: int,
        max_allocation: tuple[int, int],
        gpu_container: tuple[int, int],
        recovery: bool,
    ) -> None:
        self.hadoop_line = hadoop_version
        self.version = HADOOP_VERSIONS[hadoop_version]
        #: 3.5 moved the REST layer to Jersey 2 (package docstring, "Hadoop line").
        self.jersey2 = hadoop_version == "3.5"
        self.am_registers = am_registers
        self.lock = threading.RLock()
        self.clock = clock
        self.scheduler = scheduler
        self.app_seconds = app_seconds
        self.new_seconds = new_seconds
        self.start_seconds = start_seconds
        self.duration_jitter = duration_jitter
        self.rng = random.Random(seed)
        self.max_priority = max_priority
        self.max_allocation = max_allocation
        self.gpu_container = gpu_container
        self.recovery = recovery
        self.nodes: dict[str, _Node] = {}
        self.apps: dict[str, _App] = {}
        self.conf: dict[str, str] = {}
        self.fair_weights: dict[str, float] = {}
        self.conf_log: list[dict[str, Any]] = []
        self.conf_version = 0
        #: The time (epoch ms) the state has been brought up to, event by event.
        self.time_ms = clock.now_ms()
        self.cluster_ts = self.time_ms
        self.seq = 0  # sequence number of the last application id issued
        self.issued: set[str] = set()

    # -- look-ups ----------------------------------------------------------------------------

    def find_node(self, node_id: str) -> _Node:
        """The node with id ``host:port``, or the only node on host ``node_id``; ``KeyError``
        otherwise."""
        if node_id not in self.nodes:
            matches = [n for n in self.nodes.values() if n.host == node_id]
            if len(matches) != 1:
                raise KeyError(f"no node {node_id!r}")
            return matches[0]
        return self.nodes[node_id]

    def find_app(self, app_id: str) -> _App:
        """The application ``app_id``: 400 if the id is malformed, 404 if unknown (as the RM)."""
        if not re.fullmatch(r"application_\d+_\d+", app_id):
            if self.jersey2 and not app_id.startswith("application_"):
                raise _bad(f"Invalid ApplicationId prefix: {app_id}. The valid ApplicationId "
                           "should start with prefix application")  # fmt: skip
            raise _bad(f"Invalid ApplicationId: {app_id}")
        if app_id not in self.apps:
            raise _not_found(f"{self.exc_prefix}app with id: {app_id} not found")
        return self.apps[app_id]

    def new_application_id(self) -> str:
        """The next ``application_<cluster timestamp>_<sequence>`` id."""
        with self.lock:
            self.seq += 1
            app_id = f"application_{self.cluster_ts}_{self.seq:04d}"
            self.issued.add(app_id)
            return app_id

    # -- aggregates --------------------------------------------------------------------------

    def cluster_total(self) -> tuple[int, int, int]:
        """The resources of the RUNNING nodes."""
        run = [n for n in self.nodes.values() if n.state == "RUNNING"]
        return (sum(n.memory_mb for n in run), sum(n.vcores for n in run),
                sum(n.gpus for n in run))  # fmt: skip

    def used(self, apps: Iterable[_App]) -> tuple[int, int, int]:
        """The resources the containers of ``apps`` hold."""
        cs = [c for a in apps for c in a.containers]
        return (sum(c.memory_mb for c in cs), sum(c.vcores for c in cs),
                sum(c.gpus for c in cs))  # fmt: skip

    def apps_in(self, path: str) -> list[_App]:
        """The apps of queue ``path`` and of the queues under it."""
        return [a for a in self.apps.values()
                if a.queue == path or a.queue.startswith(path + ".")]  # fmt: skip

    def used_in(self, path: str) -> tuple[int, int, int]:
        return self.used(self.apps_in(path))

    def used_am(self, apps: Iterable[_App]) -> tuple[int, int, int]:
        """The resources the AM containers of ``apps`` hold."""
        cs = [c for a in apps for c in a.containers if c.is_am]
        return sum(c.memory_mb for c in cs), sum(c.vcores for c in cs), 0

    def pending(self, apps: Iterable[_App]) -> tuple[int, int, int, int]:
        """(memory, vcores, gpus, containers) still wanted by live apps."""
        gmb, gvc = self.gpu_container
        mem = vc = gpus = n = 0
        for a in apps:
            if a.state == "ACCEPTED" and a.containers:  # AM launched, never registers
                continue
            if a.state in ("NEW", "ACCEPTED"):
                mem += a.am_memory_mb + a.gpus * gmb
                vc += a.am_vcores + a.gpus * gvc
                gpus += a.gpus
                n += 1 + a.gpus
            elif a.state == "RUNNING":
                missing = a.gpus - sum(c.gpus for c in a.containers)
                mem += missing * gmb
                vc += missing * gvc
                gpus += missing
                n += missing
        return mem, vc, gpus, n

    def node_used(self, node: _Node) -> tuple[int, int, int, int]:
        """(memory, vcores, GPUs, containers) held on ``node``."""
        containers = [c for a in self.apps.values() for c in a.containers if c.node == node.id]
        return (sum(c.memory_mb for c in containers), sum(c.vcores for c in containers),
                sum(c.gpus for c in containers), len(containers))  # fmt: skip

    # -- rendering by Hadoop line ------------------------------------------------------------

    @property
    def exc_prefix(self) -> str:
        """Jersey 1 RMs prefix a NotFoundException's message with its cause's class."""
        return "" if self.jersey2 else "java.lang.Exception: "

    def empty_list(self) -> dict[str, Any] | None:
        """A list wrapper with no elements: ``null`` up to 3.4 (the Jersey 1 quirk), ``{}``
        from 3.5."""
        return {} if self.jersey2 else None

    def queue_display(self, path: str) -> str:
        """An app's ``queue`` as the RM reports it: the leaf name under the Capacity Scheduler
        up to 3.4, the full path otherwise."""
        if self.scheduler == "capacity" and not self.jersey2:
            return path.rsplit(".", 1)[-1]  # 3.5 reports the full path
        return path

    def resource(self, mem: int, vc: int, gpus: int) -> dict[str, Any]:
        """A ``ResourceInfo`` with its ``resourceInformations``."""
        infos = [_ri("memory-mb", "Mi", mem), _ri("vcores", "", vc), _ri(GPU, "", gpus)]
        if self.jersey2:
            for info in infos:
                del info["attributes"]  # an empty map is omitted
        return {"memory": mem, "vCores": vc,
                "resourceInformations": {"resourceInformation": infos}}  # fmt: skip
