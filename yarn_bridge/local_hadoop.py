"""A real local Hadoop: ResourceManager(s), NodeManagers and ZooKeeper from their own jars.

Spec: ``../shared/spec/yarn-hive-integration.md`` §5 (the compose cluster and its
``deploy/conf`` files), Hadoop's *ResourceModel* (countable ``yarn.io/gpu`` declared per
NodeManager, no GPU discovery), *ResourceManagerRestart* (work-preserving recovery) and
*ResourceManagerHA* (an active/standby pair elected through ZooKeeper).

What ``yarn-arbiter hadoop up --workdir DIR`` starts, all on 127.0.0.1 with free ports:

* one ResourceManager (``--ha``: two, rm1 and rm2, plus a standalone ZooKeeper; the RMs elect
  an active one and keep their state in ZooKeeper), Capacity Scheduler with the compose
  cluster's queues (``default``, ``analytics``, ``gpu``) and mutable scheduler configuration;
* ``--nodes`` NodeManagers (default 2), each 8 GB, 8 vcores and 4 ``yarn.io/gpu``, exactly as
  ``deploy/conf/yarn-site.xml`` declares them.

Design decisions:

* **One source of configuration.** Every daemon's conf dir is written from ``deploy/conf/*.xml``
  (the files the compose cluster mounts); :func:`site_overrides` changes only addresses, ports,
  directories and what one host needs that a cluster of hosts does not: ``yarn.scheduler.
  include-port-in-node-name`` (two NodeManagers on one host are told apart by port, so strict
  locality can name one of them: node name = node id ``host:port``, which is also the machine
  name the watcher gives the arbiter), each NodeManager's own shuffle port, the application
  classpath (the jar cache), the state store paths, and the NodeManager liveness expiry when a
  test asks for it.
* **Jars from Maven Central, once.** ``java/runtime/pom.xml`` pins the versions;
  :func:`ensure_jars` copies every jar into one cache (``$YARN_ARBITER_JARS`` or
  ``~/.cache/yarn-arbiter/hadoop-3.5.0``) shared by all work dirs, and marks it complete with
  the pom's hash so a changed pom refetches.
* **Processes, not threads.** Each daemon is ``java -cp CONF:JARS/* MainClass`` in its own
  session (``start_new_session``), stdout and stderr in ``DIR/logs/<daemon>.log``, its pid in
  ``DIR/state.json``. ``down`` stops daemons by pid, only if that pid still runs the expected
  main class, first SIGTERM then SIGKILL, and then kills container processes that outlived
  their NodeManager (found by working directory under the NodeManagers' local dirs).
* **Ready means usable.** ``up`` returns when the REST API answers with an ACTIVE RM and every
  NodeManager is RUNNING in ``/ws/v1/cluster/nodes``; a daemon that exits meanwhile fails the
  start with the last lines of its log.
* **Small JVMs.** SerialGC and modest heaps (RM 512 MB, NM 384 MB, ZooKeeper 128 MB): a 2-core
  machine runs the cluster beside the test suite.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Final

import httpx
import psutil

__all__ = [
    "HADOOP_VERSION",
    "ZOOKEEPER_VERSION",
    "ClusterState",
    "Daemon",
    "HadoopError",
    "LocalHadoop",
    "LocalHadoopSpec",
    "build_am_jar",
    "ensure_jars",
    "fetch_jars",
    "find_java",
    "jar_cache_dir",
    "kill_orphan_containers",
    "read_site",
    "site_overrides",
    "write_site",
]

HADOOP_VERSION: Final = "3.5.0"
ZOOKEEPER_VERSION: Final = "3.9.5"
RM_CLASS: Final = "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager"
NM_CLASS: Final = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
ZK_CLASS: Final = "org.apache.zookeeper.server.ZooKeeperServerMain"

REPO: Final = Path(__file__).resolve().parents[1]
DEPLOY_CONF: Final = REPO / "deploy" / "conf"
RUNTIME_POM: Final = REPO / "java" / "runtime" / "pom.xml"
SITE_FILES: Final = ("core-site.xml", "yarn-site.xml", "capacity-scheduler.xml",
                     "resource-types.xml", "mapred-site.xml")  # fmt: skip
LOG4J: Final = """\
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""


class HadoopError(RuntimeError):
    """The local Hadoop could not be set up, started or stopped; the message says why."""


# --------------------------------------------------------------------------------------------
# Jars and Java
# --------------------------------------------------------------------------------------------


def jar_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the Hadoop jars live: ``$YARN_ARBITER_JARS`` or ``~/.cache/yarn-arbiter/hadoop-V``."""
    env = os.environ if environ is None else environ
    if env.get("YARN_ARBITER_JARS"):
        return Path(env["YARN_ARBITER_JARS"]).expanduser()
    return Path.home() / ".cache" / "yarn-arbiter" / f"hadoop-{HADOOP_VERSION}"


def find_java(environ: Mapping[str, str] | None = None) -> Path:
    """The ``java`` to run daemons with: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    env = os.environ if environ is None else environ
    if env.get("JAVA_HOME"):
        java = Path(env["JAVA_HOME"]) / "bin" / "java"
        if java.exists():
            return java
        raise HadoopError(f"JAVA_HOME={env['JAVA_HOME']} has no bin/java; install Java 17")
    found = shutil.which("java", path=env.get("PATH"))
    if not found:
        raise HadoopError("no java on PATH and JAVA_HOME unset: install Java 17 (openjdk-17-jdk)")
    return Path(found).resolve()


AM_POM: Final = REPO / "java" / "am" / "pom.xml"
AM_JAR: Final = REPO / "java" / "am" / "target" / "yarn-arbiter-am.jar"


def build_am_jar(*, progress: Callable[[str], None] = lambda _m: None) -> Path:
    """The lease AM's jar (``java/am``), built with Maven when missing or older than its
    sources. Raises :class:`HadoopError` with Maven's last lines when the build fails."""
    sources = [AM_POM, *(AM_POM.parent / "src").rglob("*.java")]
    newest = max(p.stat().st_mtime for p in sources)
    if AM_JAR.exists() and AM_JAR.stat().st_mtime >= newest:
        return AM_JAR
    mvn = shutil.which("mvn")
    if not mvn:
        raise HadoopError("Maven (mvn) is not installed: it builds the lease AM (java/am)")
    progress("building the lease ApplicationMaster (java/am, Maven) ...")
    cmd = [mvn, "-B", "-q", "-f", str(AM_POM), "package", "-DskipTests"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise HadoopError(f"Maven could not build the lease AM ({' '.join(cmd)}):\n{tail}")
    return AM_JAR


def java_home(java: Path) -> Path:
    return java.resolve().parent.parent


def fetch_jars(
    pom: Path,
    cache: Path,
    what: str,
    *,
    exclude: tuple[str, ...] = (),
    progress: Callable[[str], None] = print,
) -> Path:
    """Copy the dependencies ``pom`` names from Maven Central into ``cache`` (once per pom
    version, marked complete with the pom's hash) and return it. Raises :class:`HadoopError`
    when Maven is missing or cannot resolve them, with Maven's own last lines (an unreachable
    repository reads as such). ``exclude``: artifact ids left out of the cache."""
    digest = hashlib.sha256(pom.read_bytes() + ",".join(exclude).encode()).hexdigest()[:16]
    marker = cache / ".complete"
    if marker.exists() and marker.read_text().strip() == digest:
        return cache
    mvn = shutil.which("mvn")
    if not mvn:
        raise HadoopError(f"Maven (mvn) is not installed: it fetches the {what} jars (apt-get "
                          "install maven)")  # fmt: skip
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".jars-", dir=cache.parent))
    progress(f"fetching {what} jars into {cache} (Maven) ...")
    cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={tmp}"]  # fmt: skip
    if exclude:
        cmd.append(f"-DexcludeArtifactIds={','.join(exclude)}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise HadoopError(f"Maven could not fetch the {what} jars ({' '.join(cmd)}):\n{tail}")
    (tmp / ".complete").write_text(digest)
    if cache.exists():
        shutil.rmtree(cache)
    tmp.rename(cache)
    return cache


def ensure_jars(cache: Path | None = None, *, progress: Callable[[str], None] = print) -> Path:
    """The Hadoop and ZooKeeper jar cache (:func:`fetch_jars` of ``java/runtime/pom.xml``)."""
    return fetch_jars(RUNTIME_POM, cache or jar_cache_dir(),
                      f"Hadoop {HADOOP_VERSION} and ZooKeeper {ZOOKEEPER_VERSION}",
                      progress=progress)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Configuration (pure)
# --------------------------------------------------------------------------------------------


def read_site(path: Path) -> dict[str, str]:
    """The ``name -> value`` properties of a Hadoop ``*-site.xml`` file, in file order."""
    root = ET.parse(path).getroot()
    out: dict[str, str] = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is not None:
            out[name.strip()] = (value or "").strip()
    return out


def write_site(path: Path, props: Mapping[str, str], *, comment: str = "") -> None:
    root = ET.Element("configuration")
    if comment:
        root.append(ET.Comment(f" {comment} "))
    for name, value in props.items():
        p = ET.SubElement(root, "property")
        ET.SubElement(p, "name").text = name
        ET.SubElement(p, "value").text = value
    ET.indent(root)
    path.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode"))


@dataclass(frozen=True)
class NodeManagerPorts:
    address: int
    localizer: int
    webapp: int
    shuffle: int


@dataclass(frozen=True)
class RMPorts:
    address: int
    scheduler: int
    tracker: int
    admin: int
    webapp: int


@dataclass(frozen=True)
class LocalHadoopSpec:
    """What to start, where; ports are chosen by :meth:`LocalHadoop.up` when 0."""

    workdir: Path
    nodes: int = 2
    gpus_per_node: int = 4
    ha: bool = False
    nm_liveness_ms: int | None = None  # yarn.nm.liveness-monitor.expiry-interval-ms
    rm_webapp_port: int = 0
    extra_yarn_site: Mapping[str, str] = field(default_factory=dict)


def _rm_ids(spec: LocalHadoopSpec) -> tuple[str, ...]:
    return ("rm1", "rm2") if spec.ha else ("rm1",)


def site_overrides(
    spec: LocalHadoopSpec,
    *,
    jars: Path,
    rm_ports: Mapping[str, RMPorts],
    nm: tuple[int, NodeManagerPorts] | None,
    zk_port: int | None,
) -> dict[str, dict[str, str]]:
    """Per-file overrides of ``deploy/conf`` for one daemon (``nm`` = (index, ports) for a
    NodeManager, ``None`` for an RM or a client): addresses, ports, directories, and the few
    keys one host needs. Pure.

    >>> from pathlib import Path
    >>> s = LocalHadoopSpec(Path("/w"))
    >>> o = site_overrides(s, jars=Path("/j"), rm_ports={"rm1": RMPorts(1, 2, 3, 4, 5)},
    ...                    nm=None, zk_port=None)
    >>> o["yarn-site.xml"]["yarn.resourcemanager.webapp.address"]
    '127.0.0.1:5'
    >>> o["core-site.xml"]["fs.defaultFS"]
    'file:///'
    """
    w = spec.workdir.resolve()
    client_conf = w / "etc" / "client"
    core = {
        "fs.defaultFS": "file:///",
        "hadoop.tmp.dir": str(w / "tmp"),
        "hadoop.http.staticuser.user": _user(),
    }
    yarn: dict[str, str] = {
        "yarn.resourcemanager.bind-host": "127.0.0.1",
        "yarn.nodemanager.bind-host": "127.0.0.1",
        "yarn.scheduler.include-port-in-node-name": "true",
        "yarn.scheduler.configuration.fs.path": f"file://{w / 'schedconf'}",
        "yarn.application.classpath": f"{client_conf},{jars}/*",
        "yarn.resourcemanager.recovery.enabled": "true",
        "yarn.resourcemanager.work-preserving-recovery.enabled": "true",
        "yarn.resourcemanager.fs.state-store.uri": f"file://{w / 'rmstore'}",
        "yarn.resourcemanager.store.class":
            "org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore",
        "yarn.nodemanager.recovery.enabled": "true",
        # A NodeManager's containers survive its own restart (work-preserving NM restart).
        "yarn.nodemanager.recovery.supervised": "false",
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99.9",
        "yarn.nodemanager.delete.debug-delay-sec": "0",
        # NodeManagers and clients retry a restarted or failed-over RM every second, not 30 s.
        "yarn.resourcemanager.connect.retry-interval.ms": "1000",
    }  # fmt: skip
    ids = _rm_ids(spec)
    if spec.ha:
        yarn |= {
            "yarn.resourcemanager.ha.enabled": "true",
            "yarn.resourcemanager.ha.rm-ids": ",".join(ids),
            "yarn.resourcemanager.ha.automatic-failover.enabled": "true",
            "yarn.resourcemanager.ha.automatic-failover.embedded": "true",
            "yarn.resourcemanager.cluster-id": "yarn-arbiter-local",
            "hadoop.zk.address": f"127.0.0.1:{zk_port}",
            "yarn.resourcemanager.zk-address": f"127.0.0.1:{zk_port}",
            "yarn.resourcemanager.store.class":
                "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore",
            # Both RMs of the pair read the mutable scheduler configuration: it lives in
            # ZooKeeper too (two RMs creating the same files of an "fs" store race at start).
            "yarn.scheduler.configuration.store.class": "zk",
            "yarn.client.failover-sleep-base-ms": "100",
            "yarn.client.failover-sleep-max-ms": "1000",
        }  # fmt: skip
        for rid in ids:
            p = rm_ports[rid]
            yarn |= {
                f"yarn.resourcemanager.hostname.{rid}": "127.0.0.1",
                f"yarn.resourcemanager.address.{rid}": f"127.0.0.1:{p.address}",
                f"yarn.resourcemanager.scheduler.address.{rid}": f"127.0.0.1:{p.scheduler}",
                f"yarn.resourcemanager.resource-tracker.address.{rid}": f"127.0.0.1:{p.tracker}",
                f"yarn.resourcemanager.admin.address.{rid}": f"127.0.0.1:{p.admin}",
                f"yarn.resourcemanager.webapp.address.{rid}": f"127.0.0.1:{p.webapp}",
            }
    else:
        p = rm_ports[ids[0]]
        yarn |= {
            "yarn.resourcemanager.hostname": "127.0.0.1",
            "yarn.resourcemanager.address": f"127.0.0.1:{p.address}",
            "yarn.resourcemanager.scheduler.address": f"127.0.0.1:{p.scheduler}",
            "yarn.resourcemanager.resource-tracker.address": f"127.0.0.1:{p.tracker}",
            "yarn.resourcemanager.admin.address": f"127.0.0.1:{p.admin}",
            "yarn.resourcemanager.webapp.address": f"127.0.0.1:{p.webapp}",
        }
    if spec.nm_liveness_ms is not None:
        yarn["yarn.nm.liveness-monitor.expiry-interval-ms"] = str(spec.nm_liveness_ms)
        yarn["yarn.resourcemanager.nm.liveness-monitor.interval-ms"] = str(
            max(100, spec.nm_liveness_ms // 4)
        )
    if spec.gpus_per_node != 4:
        yarn["yarn.nodemanager.resource-type.yarn.io/gpu"] = str(spec.gpus_per_node)
    if nm is not None:
        i, np_ = nm
        d = w / f"nm{i}"
        yarn |= {
            "yarn.nodemanager.hostname": "127.0.0.1",
            "yarn.nodemanager.address": f"127.0.0.1:{np_.address}",
            "yarn.nodemanager.localizer.address": f"127.0.0.1:{np_.localizer}",
            "yarn.nodemanager.webapp.address": f"127.0.0.1:{np_.webapp}",
            "yarn.nodemanager.local-dirs": str(d / "local"),
            "yarn.nodemanager.log-dirs": str(d / "logs"),
            "yarn.nodemanager.recovery.dir": str(d / "recovery"),
        }
    yarn |= dict(spec.extra_yarn_site)
    out = {"core-site.xml": core, "yarn-site.xml": yarn}
    if nm is not None:
        # The shuffle service reads its port through a JobConf, whose mapred-default.xml would
        # override a yarn-site value: it must be set in mapred-site.xml.
        out["mapred-site.xml"] = {"mapreduce.shuffle.port": str(nm[1].shuffle)}
    return out


def _user() -> str:
    import getpass

    return getpass.getuser()


def write_conf_dir(dest: Path, overrides: Mapping[str, Mapping[str, str]]) -> Path:
    """``deploy/conf`` files with ``overrides`` applied, plus a console log4j file, in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in SITE_FILES:
        src = DEPLOY_CONF / name
        props = read_site(src) if src.exists() else {}
        props.update(overrides.get(name, {}))
        note = f"written by yarn_bridge.local_hadoop from deploy/conf/{name}"
        write_site(dest / name, props, comment=note)
    (dest / "log4j.properties").write_text(LOG4J)
    return dest


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


class PortPool:
    """Free loopback ports, never the same one twice in one pool: each is held bound until
    :meth:`release`, so the kernel cannot hand it out again meanwhile."""

    def __init__(self) -> None:
        self._held: list[socket.socket] = []

    def take(self) -> int:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self._held.append(s)
        return s.getsockname()[1]

    def release(self) -> None:
        for s in self._held:
            s.close()
        self._held.clear()


def port_busy(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@dataclass(frozen=True)
class Daemon:
    name: str  # rm1, rm2, nm1, nm2, zk
    main_class: str
    pid: int
    conf_dir: str
    log: str
    webapp: str = ""  # http://127.0.0.1:PORT for RMs and NMs
    node_id: str = ""  # NMs: the node id the RM reports (host:port)


@dataclass(frozen=True)
class ClusterState:
    """What ``DIR/state.json`` holds: enough to find, use and stop a running cluster."""

    workdir: str
    jars: str
    java_home: str
    client_conf: str
    rm_urls: tuple[str, ...]
    daemons: tuple[Daemon, ...]
    zk_address: str = ""
    started_unix_s: float = 0.0
    startup_s: float = 0.0

    @property
    def rm_url(self) -> str:
        return self.rm_urls[0]

    def daemon(self, name: str) -> Daemon:
        for d in self.daemons:
            if d.name == name:
                return d
        raise KeyError(name)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        raw = json.loads(text)
        raw["rm_urls"] = tuple(raw["rm_urls"])
        raw["daemons"] = tuple(Daemon(**d) for d in raw["daemons"])
        return cls(**raw)


def _rm_state(url: str) -> str | None:
    """``ACTIVE`` or ``STANDBY`` (a started RM's HA state), else ``None`` (not answering)."""
    try:
        r = httpx.get(f"{url}/ws/v1/cluster/info", timeout=2.0, follow_redirects=False)
        info = r.json()["clusterInfo"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return info.get("haState") if info.get("state") == "STARTED" else None


def _alive(pid: int, main_class: str) -> bool:
    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE and main_class in p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _tail(path: str | Path, n: int = 15) -> str:
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    lines = [x for x in lines if "classpath = " not in x]  # the start banner's huge line
    first_error = next((x for x in lines if "Exception" in x and not x.startswith("\t")), "")
    tail = "\n".join(lines[-n:])
    return tail if first_error in tail else f"{first_error}\n...\n{tail}"


class LocalHadoop:
    """Start, find, query and stop the daemons of one work dir (see the module docstring)."""

    def __init__(self, workdir: Path | str) -> None:
        self.workdir = Path(workdir).resolve()
        self.state_file = self.workdir / "state.json"

    # -- state -------------------------------------------------------------------------------

    def state(self) -> ClusterState | None:
        if not self.state_file.exists():
            return None
        return ClusterState.from_json(self.state_file.read_text())

    def _save(self, state: ClusterState) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(state.to_json())
        tmp.replace(self.state_file)

    def running(self) -> dict[str, bool]:
        st = self.state()
        return {} if st is None else {d.name: _alive(d.pid, d.main_class) for d in st.daemons}

    # -- start -------------------------------------------------------------------------------

    def up(
        self,
        spec: LocalHadoopSpec | None = None,
        *,
        timeout_s: float = 180.0,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> ClusterState:
        """Start the cluster described by ``spec`` and wait until it is usable.

        Ports are free when chosen but another process may take one before the daemon binds
        it: a start that fails on ``BindException`` is retried once with new ports."""
        try:
            return self._up(spec, timeout_s=timeout_s, progress=progress)
        except HadoopError as e:
            if "BindException" not in str(e) and "Address already in use" not in str(e):
                raise
            progress(f"a port was taken meanwhile ({str(e).splitlines()[0]}); retrying")
            return self._up(spec, timeout_s=timeout_s, progress=progress)

    def _up(
        self,
        spec: LocalHadoopSpec | None,
        *,
        timeout_s: float,
        progress: Callable[[str], None],
    ) -> ClusterState:
        spec = replace(spec or LocalHadoopSpec(self.workdir), workdir=self.workdir)
        if any(self.running().values()):
            raise HadoopError(f"a cluster already runs from {self.workdir} "
                              f"(yarn-arbiter hadoop down --workdir {self.workdir})")  # fmt: skip
        if spec.rm_webapp_port and port_busy(spec.rm_webapp_port):
            raise HadoopError(f"port {spec.rm_webapp_port} on 127.0.0.1 is busy: choose another "
                              "--rm-port or 0 for a free one")  # fmt: skip
        t0 = time.monotonic()
        java = find_java()
        jars = ensure_jars(progress=progress)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        ids = _rm_ids(spec)
        pool = PortPool()
        rm_ports = {
            rid: RMPorts(pool.take(), pool.take(), pool.take(), pool.take(),
                         spec.rm_webapp_port if (spec.rm_webapp_port and rid == "rm1")
                         else pool.take())
            for rid in ids
        }  # fmt: skip
        nm_ports = [NodeManagerPorts(pool.take(), pool.take(), pool.take(), pool.take())
                    for _ in range(spec.nodes)]  # fmt: skip
        zk_port = pool.take() if spec.ha else None
        pool.release()
        env = {**os.environ, "JAVA_HOME": str(java_home(java))}
        client_conf = self.workdir / "etc" / "client"
        common = dict(jars=jars, rm_ports=rm_ports, zk_port=zk_port)
        write_conf_dir(client_conf, site_overrides(spec, nm=None, **common))
        env["HADOOP_CONF_DIR"] = str(client_conf)
        daemons: list[Daemon] = []
        state = ClusterState(
            workdir=str(self.workdir), jars=str(jars), java_home=env["JAVA_HOME"],
            client_conf=str(client_conf),
            rm_urls=tuple(f"http://127.0.0.1:{rm_ports[r].webapp}" for r in ids),
            daemons=(), zk_address=f"127.0.0.1:{zk_port}" if zk_port else "",
            started_unix_s=time.time(),
        )  # fmt: skip
        try:
            if zk_port is not None:
                daemons.append(self._start_zk(java, jars, zk_port, env))
                self._save(replace(state, daemons=tuple(daemons)))
                _wait(lambda: port_busy(zk_port), timeout_s, "ZooKeeper to listen",
                      daemons[-1])  # fmt: skip
            for rid in ids:
                conf = write_conf_dir(self.workdir / "etc" / rid,
                                      site_overrides(spec, nm=None, **common))  # fmt: skip
                if spec.ha:  # each RM of a pair must know which one it is
                    props = read_site(conf / "yarn-site.xml")
                    props["yarn.resourcemanager.ha.id"] = rid
                    write_site(conf / "yarn-site.xml", props)
                d = self._spawn(rid, RM_CLASS, java, jars, conf, env, heap_mb=512,
                                webapp=f"http://127.0.0.1:{rm_ports[rid].webapp}")  # fmt: skip
                daemons.append(d)
                self._save(replace(state, daemons=tuple(daemons)))
                if spec.ha:  # one at a time: the first becomes ACTIVE, the second STANDBY
                    _wait(lambda d=d: _rm_state(d.webapp) in ("ACTIVE", "STANDBY"), timeout_s,
                          f"{rid} to join the election", d)  # fmt: skip
            progress(f"ResourceManager starting ({', '.join(state.rm_urls)}) ...")
            _wait(lambda: self._active_rm(state) is not None, timeout_s,
                  "a ResourceManager to become ACTIVE", *daemons)  # fmt: skip
            for i in range(1, spec.nodes + 1):
                d = self._start_nm(spec, i, nm_ports[i - 1], java, jars, env, common)
                daemons.append(d)
                self._save(replace(state, daemons=tuple(daemons)))
            progress(f"{spec.nodes} NodeManagers starting ...")
            state = replace(state, daemons=tuple(daemons))
            _wait(lambda: self._nodes_running(state) == spec.nodes, timeout_s,
                  f"{spec.nodes} NodeManagers to be RUNNING", *daemons)  # fmt: skip
            state = self._with_node_ids(state)
        except BaseException:
            self._save(replace(state, daemons=tuple(daemons)))
            self.down()
            raise
        state = replace(state, startup_s=round(time.monotonic() - t0, 2))
        self._save(state)
        (self.workdir / "spec.json").write_text(json.dumps(
            {**asdict(spec), "workdir": str(spec.workdir),
             "extra_yarn_site": dict(spec.extra_yarn_site)}, indent=2))  # fmt: skip
        return state

    def _start_zk(self, java: Path, jars: Path, port: int, env: Mapping[str, str]) -> Daemon:
        conf = self.workdir / "etc" / "zk"
        conf.mkdir(parents=True, exist_ok=True)
        (self.workdir / "zk-data").mkdir(exist_ok=True)
        cfg = conf / "zoo.cfg"
        cfg.write_text(
            f"tickTime=500\ndataDir={self.workdir / 'zk-data'}\nclientPort={port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,stat\n"
        )
        (conf / "log4j.properties").write_text(LOG4J)
        return self._spawn("zk", ZK_CLASS, java, jars, conf, env, heap_mb=128, args=[str(cfg)])

    def _start_nm(self, spec: LocalHadoopSpec, i: int, ports: NodeManagerPorts, java: Path,
                  jars: Path, env: Mapping[str, str], common: Mapping) -> Daemon:  # fmt: skip
        for sub in ("local", "logs", "recovery"):
            (self.workdir / f"nm{i}" / sub).mkdir(parents=True, exist_ok=True)
        conf = write_conf_dir(self.workdir / "etc" / f"nm{i}",
                              site_overrides(spec, nm=(i, ports), **common))  # fmt: skip
        return self._spawn(f"nm{i}", NM_CLASS, java, jars, conf, env, heap_mb=384,
                           webapp=f"http://127.0.0.1:{ports.webapp}",
                           node_id=f"127.0.0.1:{ports.address}")  # fmt: skip

    def _spawn(self, name: str, main_class: str, java: Path, jars: Path, conf: Path,
               env: Mapping[str, str], *, heap_mb: int, args: Iterable[str] = (),
               webapp: str = "", node_id: str = "") -> Daemon:  # fmt: skip
        log = self.workdir / "logs" / f"{name}.log"
        cmd = [str(java), f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dhadoop.log.dir={self.workdir / 'logs'}",
               f"-Dyarn.log.dir={self.workdir / 'logs'}",
               f"-Dhadoop.home.dir={jars}",
               f"-Dyarn.arbiter.workdir={self.workdir}",
               "-cp", f"{conf}:{jars}/*", main_class, *args]  # fmt: skip
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                    stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        # Popen returns while execve may still be under way (an empty /proc/<pid>/cmdline):
        # wait for the JVM's command line, so liveness checks never see a half-started daemon.
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                if main_class in psutil.Process(proc.pid).cmdline():
                    break
            time.sleep(0.005)
        return Daemon(name, main_class, proc.pid, str(conf), str(log), webapp, node_id)

    # -- queries -----------------------------------------------------------------------------

    def _active_rm(self, state: ClusterState) -> str | None:
        return next((u for u in state.rm_urls if _rm_state(u) == "ACTIVE"), None)

    def _nodes(self, state: ClusterState) -> list[dict]:
        url = self._active_rm(state)
        if url is None:
            return []
        try:
            r = httpx.get(f"{url}/ws/v1/cluster/nodes", timeout=2.0)
            return (r.json().get("nodes") or {}).get("node") or []
        except (httpx.HTTPError, ValueError):
            return []

    def _nodes_running(self, state: ClusterState) -> int:
        ports = {d.node_id.rsplit(":", 1)[1] for d in state.daemons if d.node_id}
        return sum(
            1 for n in self._nodes(state)
            if n.get("state") == "RUNNING" and n["id"].rsplit(":", 1)[1] in ports
        )  # fmt: skip

    def _with_node_ids(self, state: ClusterState) -> ClusterState:
        by_port = {n["id"].rsplit(":", 1)[1]: n["id"] for n in self._nodes(state)}
        daemons = tuple(
            replace(d, node_id=by_port.get(d.node_id.rsplit(":", 1)[1], d.node_id))
            if d.node_id else d
            for d in state.daemons
        )  # fmt: skip
        return replace(state, daemons=daemons)

    def active_rm(self) -> str | None:
        st = self.state()
        return None if st is None else self._active_rm(st)

    def status(self) -> dict:
        """Every daemon with pid, liveness and resident memory; the active RM; the nodes."""
        st = self.state()
        if st is None:
            return {"workdir": str(self.workdir), "running": False, "daemons": []}
        rows = []
        for d in st.daemons:
            alive = _alive(d.pid, d.main_class)
            rss = 0
            if alive:
                with contextlib.suppress(psutil.Error):
                    rss = psutil.Process(d.pid).memory_info().rss
            rows.append({"name": d.name, "pid": d.pid, "alive": alive,
                         "rss_mb": round(rss / 2**20), "webapp": d.webapp,
                         "node_id": d.node_id, "log": d.log})  # fmt: skip
        nodes = [{"id": n["id"], "state": n["state"]} for n in self._nodes(st)]
        return {"workdir": st.workdir, "running": any(r["alive"] for r in rows),
                "active_rm": self._active_rm(st), "rm_urls": list(st.rm_urls),
                "client_conf": st.client_conf, "startup_s": st.startup_s,
                "daemons": rows, "nodes": nodes}  # fmt: skip

    # -- faults and restarts (tests) -----------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal one daemon (``nm1``, ``rm1``, ...) and wait for it to exit."""
        st = self._require()
        d = st.daemon(name)
        if _alive(d.pid, d.main_class):
            with contextlib.suppress(ProcessLookupError):
                os.kill(d.pid, sig)
            _wait(lambda: not _alive(d.pid, d.main_class), 60, f"{name} to exit")

    def restart(self, name: str, *, timeout_s: float = 120.0) -> ClusterState:
        """Start a stopped daemon again with its own conf dir (same ports, same dirs)."""
        st = self._require()
        d = st.daemon(name)
        if _alive(d.pid, d.main_class):
            raise HadoopError(f"{name} is still running (pid {d.pid})")
        java = Path(st.java_home) / "bin" / "java"
        env = {**os.environ, "JAVA_HOME": st.java_home, "HADOOP_CONF_DIR": st.client_conf}
        heap = {RM_CLASS: 512, NM_CLASS: 384}.get(d.main_class, 128)
        args = [str(Path(d.conf_dir) / "zoo.cfg")] if d.main_class == ZK_CLASS else []
        new = self._spawn(name, d.main_class, java, Path(st.jars), Path(d.conf_dir), env,
                          heap_mb=heap, args=args, webapp=d.webapp, node_id=d.node_id)  # fmt: skip
        st = replace(st, daemons=tuple(new if x.name == name else x for x in st.daemons))
        self._save(st)
        if d.main_class == RM_CLASS:
            _wait(lambda: self._active_rm(st) is not None, timeout_s, "an ACTIVE RM", new)
        elif d.main_class == NM_CLASS:
            _wait(lambda: any(n["id"] == d.node_id and n["state"] == "RUNNING"
                              for n in self._nodes(st)), timeout_s,
                  f"{name} to be RUNNING again", new)  # fmt: skip
        return st

    def _require(self) -> ClusterState:
        st = self.state()
        if st is None:
            raise HadoopError(f"no cluster in {self.workdir} (yarn-arbiter hadoop up)")
        return st

    # -- stop --------------------------------------------------------------------------------

    def down(self, *, timeout_s: float = 30.0) -> list[str]:
        """Stop every daemon of this work dir (NMs first), then orphaned containers."""
        st = self.state()
        if st is None:
            return []
        stopped = []
        order = sorted(st.daemons, key=lambda d: {NM_CLASS: 0, RM_CLASS: 1}.get(d.main_class, 2))
        for d in order:
            if _alive(d.pid, d.main_class):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGTERM)
                stopped.append(d.name)
        deadline = time.monotonic() + timeout_s
        for d in order:
            while _alive(d.pid, d.main_class) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(d.pid, d.main_class):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGKILL)
        kill_orphan_containers(self.workdir)
        return stopped


def kill_orphan_containers(workdir: Path, *, node: str | None = None) -> list[int]:
    """Kill processes whose working directory is under a NodeManager's local dirs of
    ``workdir`` (``node`` = ``nm1`` to limit it to one), with their children: container
    processes whose NodeManager is gone (DefaultContainerExecutor starts each container in its
    own session, so they outlive a killed NodeManager). Waits until they are gone (a job's
    shell may fork meanwhile, so it looks again until a pass finds nothing). Returns the pids."""
    root = workdir.resolve() / (node or "")
    killed: list[int] = []
    for _ in range(5):
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                cwd = Path(p.cwd())
            except (psutil.Error, OSError):
                continue
            if root in cwd.parents and "local" in cwd.relative_to(root).parts:
                with contextlib.suppress(psutil.Error):
                    found.extend([p, *p.children(recursive=True)])
        if not found:
            break
        for p in found:
            with contextlib.suppress(psutil.Error):
                p.kill()
                killed.append(p.pid)
        psutil.wait_procs(found, timeout=5)
    return sorted(set(killed))


def _wait(ready: Callable[[], bool], timeout_s: float, what: str, *watch: Daemon) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if ready():
            return
        for d in watch:
            if not _alive(d.pid, d.main_class):
                kind = d.main_class.rsplit(".", 1)[1]
                raise HadoopError(f"{d.name} ({kind}) exited while waiting for {what}; "
                                  f"last lines of {d.log}:\n{_tail(d.log)}")  # fmt: skip
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- {d.log}\n{_tail(d.log, 8)}" for d in watch)
            raise HadoopError(f"timed out after {timeout_s:.0f} s waiting for {what}{logs}")
        time.sleep(0.2)
