"""The Spark Thrift Server with its executors in YARN containers, sized by the queries' shares.

QOOP §2.3-2.4 (spec ``qoop-themis.md`` A.1-A.2): the scheduler pushes each query job its
"1-over-n" max-min share (vcores, memory) and the execution engine *runs the query with it*.
:mod:`hive_hooks.engine` runs the Spark Thrift Server in ``local[2]``, whose resources never
change; here the same server runs with ``--master yarn`` and the share becomes executors in
YARN containers. Spec for the engine itself: ``../shared/spec/local-hive-engine.md`` §2-4 (§4:
serving a ``SparkSession`` of our own with ``HiveThriftServer2.startWithSparkSession``).

**Process layout** (decision, verified on Spark 4.3 from the wheel + Hadoop 3.5 local YARN):

* :class:`YarnHiveServer` (a :class:`~hive_hooks.engine.LocalHiveServer`: same work-dir
  isolation, Derby metastore, readiness, stop/kill and pyhive client) does not ``spark-submit``
  the Thrift Server class; it starts ``python -m hive_hooks.yarn_engine driver`` (our PySpark
  driver, own session/process group). The driver builds a ``SparkSession`` with master
  ``yarn``, client deploy mode (the driver and the HiveServer2 port stay on 127.0.0.1; only the
  executors and the small Spark AM, ``ExecutorLauncher``, run in containers), starts the Thrift
  Server in it (``HiveThriftServer2.startWithSparkSession`` through py4j), and serves a
  loopback HTTP **control endpoint** (below). Stopping sends SIGTERM to the driver only: it
  stops the HiveServer2 and the ``SparkContext``, so the YARN app ends ``FINISHED`` instead of
  being cut off; SIGKILL of the group (:meth:`kill`) leaves the AM to notice the lost driver.
* **YARN settings**: ``spark.yarn.queue=analytics`` (the queue QOOP's share is computed for,
  ``yarn_bridge/watcher.py`` ``DEFAULT_ANALYTICS_QUEUES``), ``spark.yarn.jars=local:<pyspark>/
  jars/*`` (the NodeManagers are on this machine, nothing is uploaded; the default FS is
  ``file:///``), ``HADOOP_CONF_DIR`` / ``JAVA_HOME`` of the cluster in the driver's environment,
  ``spark.dynamicAllocation.enabled=false`` (we set the count, Spark must not fight it).
* **Tags** (``spark.yarn.tags``): ``qoop-hive-engine`` (find the app: ``GET /ws/v1/cluster/
  apps?applicationTags=qoop-hive-engine``) and ``yarn-arbiter-query:engine-<id>``
  (:func:`yarn_bridge.rm_events.query_tag`). The second is how the arbiter's watcher counts the
  engine right: the engine is not a job of QOOP's |J| of its own, the queries it runs are, and
  each registers itself with the arbiter (:class:`hive_hooks.share.ArbiterShare`); an untagged
  engine would be counted as one more analytics job and shrink every query's share. The tag is
  fixed at submission (YARN has no API to change an app's tags), hence per engine, not per query.
* **Executor shape** (:class:`ExecutorSpec`, fixed for the engine's life: Spark cannot resize a
  running executor, and stage-level resource profiles need dynamic allocation on YARN): 1 core,
  512 MiB heap + 512 MiB overhead = a 1024 MB container (the RM rounds to its 256 MB minimum
  allocation; heap+overhead chosen to be a multiple so YARN's ``allocatedMB`` is exact). The
  AM: 512 MiB + 512 MiB, 1 vcore. Sized for a 2-core machine; everything is a parameter.

**What a share buys** (decision; pure functions :func:`executors_for_share`,
:func:`engine_target`): ``min(floor(vcores / executor cores), floor(memory_mb / container
MB))`` executors, at least ``min_per_query`` (1: a query with a share of 0 still runs one stage
at a time, as the executor does, :mod:`hive_hooks.share`). Memory is a cap on the count, not a
per-executor size (fixed shape, above). One engine serves several queries at once: its target
is the **sum of its live queries' executor counts** (per-query floors, so no query is promised
more than its share), capped by ``max_total``, and ``idle`` (1) executors when no query is live
(planning statements such as ``DESCRIBE`` and the statistics ``COUNT(*)`` run before a query
registers its share, and Spark without dynamic allocation never asks for an executor by itself:
with 0 they would wait forever). Each query runs in its own FAIR scheduler pool
(``spark.scheduler.mode=FAIR``; ``SET spark.sql.thriftserver.scheduler.pool=<job id>`` on every
session of the run, :meth:`EngineControl.session_settings`): pools not declared in an
allocation file are made on first use with weight 1, so the executors are split evenly among the
live queries, as QOOP's 1-over-n shares are equal. (Unequal shares would need pool weights,
which Spark fixes when a pool is created; not done.) Pools are never removed by Spark: one small
object per finished query stays in the driver.

**Applying a target** (the driver's reconciler thread, on every change and every 0.5 s):
``SparkContext.requestTotalExecutors(n, 0, {})`` (developer API, ``sc._jsc.sc()``; absolute,
so repeating it is harmless). Going up, that is all: the Spark AM asks YARN for the missing
containers. Going down, YARN-mode Spark only cancels *pending* requests and never stops a
running executor, so the reconciler kills the surplus with ``SparkContext.killExecutors`` (which
also lowers Spark's own target; the absolute target is requested again right after). Idle
executors go first (``TaskSchedulerImpl.isExecutorBusy``); a busy one is killed only once the
surplus has lasted ``busy_grace_s`` (5 s), so a short task finishes instead of being re-run
(``killExecutors`` forces: its tasks fail without counting as failures and are re-run, and its
shuffle output is recomputed when needed). Executors being killed are not counted again.

**Control endpoint** (loopback HTTP/JSON on ``control_port``; client :class:`EngineControl`):
``GET /status`` (app id, target, executors, shares, pools), ``PUT /shares/<query>`` ``{"vcores":
.., "memory_mb": ..}``, ``DELETE /shares/<query>``, ``PUT /executors`` ``{"total": n | null}``
(a manual target that overrides the shares until cleared). A query whose client dies without
``DELETE`` keeps its share until the engine restarts (no lease; the executor releases in a
``finally``).

Usage::

    with YarnHiveServer(hadoop_conf_dir=".../etc/client") as srv:
        ctl = srv.control                  # a hive_hooks.share.ShareEnforcer
        runner = QueryRunner(srv.connect, registry=..., share=..., share_enforcer=ctl)

Command line (foreground until Ctrl-C; ``qoop-hive engine start --on-yarn`` runs it)::

    HADOOP_CONF_DIR=DIR/etc/client python -m hive_hooks.yarn_engine --port 10000 --dir /tmp/hs2y
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from arbiter.localhost import free_port
from arbiter.signals import stop_on_signals
from hive_hooks.engine import (
    DEFAULT_START_TIMEOUT,
    HOST,
    LocalHiveServer,
    spark_home,
)
from qoop_planner.model import Share
from yarn_bridge.rm_events import query_tag

__all__ = [
    "ENGINE_TAG",
    "POOL_KEY",
    "EngineControl",
    "EngineControlError",
    "ExecutorSpec",
    "YarnHiveServer",
    "engine_target",
    "executors_for_share",
]

log = logging.getLogger("qoop_hive.yarn_engine")

#: The session setting that puts a Thrift Server session's jobs in a FAIR scheduler pool.
POOL_KEY = "spark.sql.thriftserver.scheduler.pool"
DEFAULT_POOL = "default"
#: Every engine app carries this YARN tag (find it with ``?applicationTags=``).
ENGINE_TAG = "qoop-hive-engine"
CONFIG_FILE = "yarn-engine.json"
_EPS = 1e-9


# =========================================================================== pure core


@dataclass(frozen=True)
class ExecutorSpec:
    """The shape of one executor and the engine's bounds (module docstring).

    ``container_mb`` is what YARN allocates for one executor: heap + overhead."""

    cores: int = 1
    heap_mb: int = 512
    overhead_mb: int = 512
    min_per_query: int = 1
    idle: int = 1
    max_total: int = 8

    def __post_init__(self) -> None:
        if self.cores < 1 or self.heap_mb < 1 or self.overhead_mb < 0:
            raise ValueError(f"bad executor shape: {self}")
        if not 0 <= self.idle <= self.max_total or self.min_per_query < 0 or self.max_total < 1:
            raise ValueError(f"bad executor bounds: {self}")

    @property
    def container_mb(self) -> int:
        return self.heap_mb + self.overhead_mb


def executors_for_share(share: Share, spec: ExecutorSpec = ExecutorSpec()) -> int:
    """Executors one query's share buys: ``min(floor(vcores / cores), floor(memory_mb /
    container_mb))``, at least ``spec.min_per_query`` (module docstring).

    >>> executors_for_share(Share(vcores=4, memory_mb=8192))
    4
    >>> executors_for_share(Share(vcores=2.67, memory_mb=5461.3))  # 1-over-3 of 8 vcores, 16 GB
    2
    >>> executors_for_share(Share(vcores=6, memory_mb=2048))  # memory caps the count
    2
    >>> executors_for_share(Share(vcores=4, memory_mb=8192), ExecutorSpec(cores=2))
    2
    >>> executors_for_share(Share(vcores=0, memory_mb=0))  # a query still runs
    1
    """
    by_cores = math.floor(share.vcores / spec.cores + _EPS)
    by_memory = math.floor(share.memory_mb / spec.container_mb + _EPS)
    return max(spec.min_per_query, min(by_cores, by_memory))


def engine_target(shares: Mapping[str, Share], spec: ExecutorSpec = ExecutorSpec()) -> int:
    """The engine's executor target: the sum of its live queries' executors, at most
    ``spec.max_total``; ``spec.idle`` with no live query (module docstring).

    >>> engine_target({})
    1
    >>> engine_target({"q1": Share(3, 3072)})
    3
    >>> engine_target({"q1": Share(2.67, 5461), "q2": Share(2.67, 5461), "q3": Share(2.67, 5461)})
    6
    >>> engine_target({"q1": Share(8, 16384), "q2": Share(8, 16384)}, ExecutorSpec(max_total=4))
    4
    """
    if not shares:
        return spec.idle
    return min(spec.max_total, sum(executors_for_share(s, spec) for s in shares.values()))


def yarn_spark_conf(
    spec: ExecutorSpec, *, queue: str, tags: list[str], initial: int
) -> dict[str, str]:
    """The Spark settings that put the executors in YARN containers (module docstring)."""
    return {
        "spark.submit.deployMode": "client",
        "spark.yarn.queue": queue,
        "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
        "spark.yarn.tags": ",".join(tags),
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.instances": str(initial),
        "spark.executor.cores": str(spec.cores),
        "spark.executor.memory": f"{spec.heap_mb}m",
        "spark.executor.memoryOverhead": f"{spec.overhead_mb}m",
        "spark.yarn.am.cores": "1",
        "spark.yarn.am.memory": "512m",
        "spark.yarn.am.memoryOverhead": "512m",
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.scheduler.mode": "FAIR",
        # killed executors are expected; do not give up on the app because of them
        "spark.yarn.max.executor.failures": "1000",
    }


# =========================================================================== client side


class EngineControlError(RuntimeError):
    """The engine's control endpoint refused a request or did not answer."""


class EngineControl:
    """Client of a :class:`YarnHiveServer`'s control endpoint; a
    :class:`hive_hooks.share.ShareEnforcer` for :class:`hive_hooks.executor.QueryRunner`."""

    def __init__(self, port: int, host: str = HOST, timeout: float = 10.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raise EngineControlError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from e
        except OSError as e:
            raise EngineControlError(f"{method} {path}: {e}") from e

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status")

    def apply_share(self, query_id: str, share: Share) -> None:
        q = urllib.parse.quote(query_id, safe="")
        self._call("PUT", f"/shares/{q}", {"vcores": share.vcores, "memory_mb": share.memory_mb})

    def release_share(self, query_id: str) -> None:
        self._call("DELETE", f"/shares/{urllib.parse.quote(query_id, safe='')}")

    def set_executors(self, total: int | None) -> dict[str, Any]:
        """A manual executor target overriding the shares (``None``: follow the shares)."""
        return self._call("PUT", "/executors", {"total": total})

    def session_settings(self, query_id: str) -> dict[str, str]:
        return {POOL_KEY: query_id}

    def session_defaults(self) -> dict[str, str]:
        return {POOL_KEY: DEFAULT_POOL}


# =========================================================================== launcher


class YarnHiveServer(LocalHiveServer):
    """The Spark Thrift Server with executors on YARN (module docstring).

    ``hadoop_conf_dir`` is the cluster's client configuration (default: ``$HADOOP_CONF_DIR``);
    ``java_home`` the JDK for the driver (default: ``$JAVA_HOME``, else the ``java`` on PATH).
    ``engine_id`` names the engine in its YARN tag (default: ``hs2-<port>``).
    """

    def __init__(
        self,
        port: int | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        hadoop_conf_dir: str | os.PathLike[str] | None = None,
        java_home: str | None = None,
        queue: str = "analytics",
        spec: ExecutorSpec = ExecutorSpec(),
        engine_id: str | None = None,
        extra_tags: tuple[str, ...] = (),
        control_port: int | None = None,
        driver_memory: str = "1g",
        shuffle_partitions: int = 4,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        extra_conf: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            port,
            work_dir,
            driver_memory=driver_memory,
            master="yarn",
            shuffle_partitions=shuffle_partitions,
            start_timeout=start_timeout,
            extra_conf=extra_conf,
        )
        conf_dir = hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
        if not conf_dir:
            raise ValueError("hadoop_conf_dir not given and HADOOP_CONF_DIR not set")
        self.hadoop_conf_dir = Path(conf_dir).resolve()
        self.java_home = java_home or os.environ.get("JAVA_HOME")
        self.queue = queue
        self.spec = spec
        self.engine_id = engine_id or f"hs2-{self.port}"
        self.tags = [ENGINE_TAG, query_tag(f"engine-{self.engine_id}"), *extra_tags]
        self.control_port = control_port if control_port is not None else free_port()
        self.control = EngineControl(self.control_port)

    def spark_conf(self) -> dict[str, str]:
        yarn = yarn_spark_conf(self.spec, queue=self.queue, tags=self.tags, initial=self.spec.idle)
        return {
            **yarn,
            "spark.app.name": f"qoop-hive-{self.engine_id}",
            "spark.driver.memory": self.driver_memory,
            **super().spark_conf(),
        }

    def config(self) -> dict[str, Any]:
        """What the driver process reads (written to ``<work dir>/yarn-engine.json``)."""
        return {
            "spark_conf": self.spark_conf(),
            "hive_conf": self.hive_conf(),
            "control_port": self.control_port,
            "spec": asdict(self.spec),
        }

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "hive_hooks.yarn_engine",
            "driver",
            "--config",
            str(self.work_dir / CONFIG_FILE),
        ]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env["HADOOP_CONF_DIR"] = str(self.hadoop_conf_dir)
        if self.java_home:
            env["JAVA_HOME"] = self.java_home
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        return env

    def start(self) -> YarnHiveServer:
        if self.running:
            return self
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / CONFIG_FILE).write_text(json.dumps(self.config(), indent=2) + "\n")
        super().start()
        return self

    def _request_stop(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM to the driver only: it stops the Thrift Server and the SparkContext, so the
        YARN app ends FINISHED (module docstring); the JVM exits with it."""
        os.kill(proc.pid, signal.SIGTERM)

    @property
    def app_id(self) -> str:
        return str(self.control.status()["app_id"])

    def __enter__(self) -> YarnHiveServer:
        return self.start()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"YarnHiveServer({self.jdbc_url!r}, queue={self.queue!r}, {state})"


# =========================================================================== driver side


def _jvm_errors() -> tuple[type[Exception], ...]:
    """What a py4j call into the driver's JVM raises: ``Py4JError`` (a Java exception, a method
    the object does not have, the gateway gone: ``Py4JJavaError``, ``Py4JNetworkError``). py4j
    comes with pyspark, which only the driver process needs; elsewhere nothing calls the JVM."""
    try:
        from py4j.protocol import Py4JError
    except ImportError:
        return ()
    return (Py4JError,)


_JVM_ERRORS: tuple[type[Exception], ...] = _jvm_errors()


class _Driver:
    """Runs in the driver process: the SparkSession, the Thrift Server, the reconciler and the
    control endpoint (module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.cfg = config
        self.spec = ExecutorSpec(**config["spec"])
        self.lock = threading.Condition()
        self.shares: dict[str, Share] = {}
        self.override: int | None = None
        self.requested: int | None = None
        self.killed: set[str] = set()
        self.surplus_since: float | None = None
        self.changes: list[dict[str, Any]] = []
        self.busy_grace_s = 5.0
        self.stop_event = threading.Event()
        self.spark: Any = None
        self.server: Any = None
        self.http: ThreadingHTTPServer | None = None

    # -- target ------------------------------------------------------------------------------

    def target(self) -> int:
        with self.lock:
            if self.override is not None:
                return self.override
            return engine_target(self.shares, self.spec)

    def changed(self, what: str) -> int:
        t = self.target()
        with self.lock:
            self.changes.append({"t": time.time(), "what": what, "target": t})
            del self.changes[:-50]
            self.lock.notify_all()
        return t

    # -- Spark -------------------------------------------------------------------------------

    @property
    def sc(self) -> Any:
        return self.spark.sparkContext._jsc.sc()

    def executor_ids(self) -> list[str]:
        seq = self.sc.getExecutorIds()
        return [str(seq.apply(i)) for i in range(seq.size())]

    def busy(self, ids: list[str]) -> dict[str, bool]:
        ts = self.sc.taskScheduler()
        out = {}
        for i in ids:
            try:
                out[i] = bool(ts.isExecutorBusy(i))
            except _JVM_ERRORS:  # not a TaskSchedulerImpl: treat as busy (killed after grace)
                out[i] = True
        return out

    def request(self, n: int) -> None:
        jvm = self.spark._jvm
        empty = jvm.PythonUtils.toScalaMap({})
        self.sc.requestTotalExecutors(n, 0, empty)
        self.requested = n

    def reconcile(self) -> None:
        target = self.target()
        if target != self.requested:
            self.request(target)
            log.warning("executor target %d", target)
        ids = self.executor_ids()
        self.killed &= set(ids)
        alive = [i for i in ids if i not in self.killed]
        surplus = len(alive) - target
        if surplus <= 0:
            self.surplus_since = None
            return
        now = time.monotonic()
        if self.surplus_since is None:
            self.surplus_since = now
        busy = self.busy(alive)

        def age(i: str) -> tuple[int, str]:  # youngest (highest numeric id) first
            return (-int(i) if i.isdigit() else 0, i)

        idle = sorted((i for i in alive if not busy[i]), key=age)
        chosen = idle[:surplus]
        if len(chosen) < surplus and now - self.surplus_since >= self.busy_grace_s:
            chosen += sorted((i for i in alive if busy[i]), key=age)[: surplus - len(chosen)]
        if not chosen:
            return
        jvm = self.spark._jvm
        self.sc.killExecutors(jvm.PythonUtils.toSeq(chosen))
        self.killed |= set(chosen)
        self.request(target)  # killExecutors lowered Spark's target; assert ours again
        log.warning("killed executors %s (target %d)", chosen, target)

    def reconcile_loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.reconcile()
            except Exception:
                # broad: the reconciler is a background thread that must outlive any one failed
                # pass (a JVM call refused while Spark changes state, a bug) and report it; the
                # next pass, 0.5 s later, starts again from the live executors
                if self.stop_event.is_set():
                    return
                log.exception("reconcile failed (executors requested: %s)", self.requested)
            with self.lock:
                self.lock.wait(0.5)

    def status(self) -> dict[str, Any]:
        ids = self.executor_ids()
        busy = self.busy(ids)
        pools = []
        with contextlib.suppress(*_JVM_ERRORS):  # the JVM refused: report no pools
            seq = self.sc.getAllPools()
            for i in range(seq.size()):
                p = seq.apply(i)
                pools.append({"name": str(p.name()), "running_tasks": int(p.runningTasks())})
        with self.lock:
            return {
                "app_id": self.spark.sparkContext.applicationId,
                "target": self.target(),
                "requested": self.requested,
                "override": self.override,
                "shares": {
                    q: {"vcores": s.vcores, "memory_mb": s.memory_mb}
                    for q, s in self.shares.items()
                },
                "executors": [
                    {"id": i, "busy": busy.get(i, False), "killed": i in self.killed} for i in ids
                ],
                "pools": pools,
                "spec": asdict(self.spec),
                "changes": list(self.changes),
            }

    # -- HTTP --------------------------------------------------------------------------------

    def handler(self) -> type[BaseHTTPRequestHandler]:
        drv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug("control: " + fmt, *args)

            def _reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"null") if n else None

            def _route(self, method: str) -> None:
                try:
                    path = urllib.parse.urlsplit(self.path).path
                    if method == "GET" and path == "/status":
                        return self._reply(200, drv.status())
                    if path.startswith("/shares/") and len(path) > len("/shares/"):
                        q = urllib.parse.unquote(path[len("/shares/") :])
                        if method == "PUT":
                            b = self._body() or {}
                            share = Share(
                                vcores=max(0.0, float(b["vcores"])),
                                memory_mb=max(0.0, float(b["memory_mb"])),
                            )
                            with drv.lock:
                                drv.shares[q] = share
                            return self._reply(200, {"target": drv.changed(f"share {q}")})
                        if method == "DELETE":
                            with drv.lock:
                                drv.shares.pop(q, None)
                            return self._reply(200, {"target": drv.changed(f"release {q}")})
                    if method == "PUT" and path == "/executors":
                        total = (self._body() or {}).get("total")
                        with drv.lock:
                            drv.override = None if total is None else max(0, int(total))
                        return self._reply(200, {"target": drv.changed("override")})
                    return self._reply(404, {"error": f"no route {method} {path}"})
                except (KeyError, ValueError, TypeError) as e:
                    return self._reply(400, {"error": repr(e)})
                except _JVM_ERRORS as e:  # the JVM refused a call, or is gone
                    return self._reply(500, {"error": repr(e)})

            def do_GET(self) -> None:
                self._route("GET")

            def do_PUT(self) -> None:
                self._route("PUT")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return Handler

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> int:
        from pyspark.sql import SparkSession

        t0 = time.monotonic()
        builder = SparkSession.builder.master("yarn")
        for k, v in {**self.cfg["spark_conf"], **self.cfg["hive_conf"]}.items():
            builder = builder.config(k, v)
        self.spark = builder.enableHiveSupport().getOrCreate()
        self.requested = self.spec.idle
        log.warning(
            "SparkSession on YARN in %.1f s: %s",
            time.monotonic() - t0,
            self.spark.sparkContext.applicationId,
        )
        self.http = ThreadingHTTPServer((HOST, int(self.cfg["control_port"])), self.handler())
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, name="control", daemon=True).start()
        threading.Thread(target=self.reconcile_loop, name="reconcile", daemon=True).start()
        hs2 = self.spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
        self.server = hs2.startWithSparkSession(self.spark._jsparkSession, False)
        log.warning("Thrift Server up in %.1f s", time.monotonic() - t0)
        gateway = getattr(self.spark.sparkContext._gateway, "proc", None)
        while not self.stop_event.wait(1.0):
            if gateway is not None and gateway.poll() is not None:
                log.error("the driver JVM exited with code %s", gateway.returncode)
                return 1
            try:
                if self.sc.isStopped():
                    log.error("the SparkContext stopped (the YARN app ended?)")
                    return 1
            except _JVM_ERRORS as e:
                log.error("the driver JVM does not answer: %r", e)
                return 1
        return 0

    def shutdown(self) -> None:
        self.stop_event.set()
        with self.lock:
            self.lock.notify_all()
        # broad suppressions: best-effort cleanup on the way out; every step must run even if
        # an earlier one fails (the JVM may be gone already), and the exit status stays run()'s
        if self.http is not None:
            with contextlib.suppress(Exception):
                self.http.shutdown()
        if self.server is not None:
            with contextlib.suppress(Exception):
                self.server.stop()
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()


def run_driver(config_path: str) -> int:
    """The driver process (``python -m hive_hooks.yarn_engine driver --config FILE``)."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s yarn-engine: %(message)s"
    )
    drv = _Driver(json.loads(Path(config_path).read_text()))

    stop_on_signals(drv.stop_event)
    try:
        return drv.run()
    finally:
        drv.shutdown()


# =========================================================================== command line


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["driver"]:
        p = argparse.ArgumentParser(prog="python -m hive_hooks.yarn_engine driver")
        p.add_argument("--config", required=True)
        return run_driver(p.parse_args(argv[1:]).config)

    from hive_hooks.engine import serve_foreground

    parser = argparse.ArgumentParser(
        prog="python -m hive_hooks.yarn_engine",
        description="Run the Spark Thrift Server (HiveServer2, NOSASL) with its executors on "
        "YARN, sized by the queries' shares, until Ctrl-C.",
    )
    parser.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    parser.add_argument("--dir", default=None, help="work dir (default: a temporary one)")
    parser.add_argument("--hadoop-conf-dir", default=None, help="default: $HADOOP_CONF_DIR")
    parser.add_argument("--queue", default="analytics")
    parser.add_argument("--control-port", type=int, default=None)
    parser.add_argument("--max-executors", type=int, default=ExecutorSpec.max_total)
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    args = parser.parse_args(argv)

    try:
        srv = YarnHiveServer(
            args.port,
            args.dir,
            hadoop_conf_dir=args.hadoop_conf_dir,
            queue=args.queue,
            control_port=args.control_port,
            spec=ExecutorSpec(max_total=args.max_executors),
            driver_memory=args.driver_memory,
            start_timeout=args.timeout,
        )
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    return serve_foreground(
        srv,
        "Spark Thrift Server on YARN",
        lambda: f", YARN app {srv.app_id}, control http://{HOST}:{srv.control_port}",
    )


if __name__ == "__main__":
    sys.exit(main())
