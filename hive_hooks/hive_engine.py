"""A real HiveServer2 (Apache Hive 4.0.1 on Tez 0.10.3), started from its own jars on 127.0.0.1.

QOOP §3 runs queries on Hive; this is the Hive the replanner (:mod:`hive_hooks.executor`), the
hooks (``java/hive-hooks``) and plain beeline users meet in tests and on a laptop. Beside it,
:mod:`hive_hooks.engine` (the Spark Thrift Server) stays the light engine: it speaks the same
HiveServer2 protocol, starts in a similar time and needs no Maven download.

**Versions** (decision, measured here): Hive 4.1.0 is the release built for Java 17, but
Maven Central does not serve ``hive-service``, ``hive-beeline`` or
``hive-standalone-metastore-server`` at 4.1.0 (nor ``hive-beeline`` at any 4.x), so the server
is **Hive 4.0.1** (the compose cluster's ``apache/hive:4.0.1`` image, so one ``hive-site.xml``
serves both), with Tez 0.10.3 and the Hadoop 3.3.6 client it was built with, on Java 17 with
``--add-opens`` (:data:`JAVA_OPENS`). Its BeeLine is Hive 3.1.3's (the newest served),
running over Hive 4.0.1's JDBC driver: :func:`beeline_command`.

**Configuration: one source.** ``hive-site.xml`` and ``tez-site.xml`` are written from
``deploy/conf`` (the files the compose cluster mounts) with :func:`site_overrides` changing only
what one host needs: paths in the work dir on the local file system (no HDFS), an embedded Derby
metastore (schema created on first start), 127.0.0.1 and the port, NOSASL (pyhive and BeeLine
connect with ``;auth=noSasl``), no web UI, and where Tez runs:

* ``tez="local"``: the DAG runs inside HiveServer2's JVM (``tez.local.mode``), no YARN;
* ``tez="yarn"``: each JDBC session's Tez AM and its task containers run on the YARN whose client
  conf dir is given (the local cluster of :mod:`yarn_bridge.local_hadoop`), in the ``analytics``
  queue; Tez's own jars and the Hadoop client it was built with are localized from the jar cache
  (``tez.lib.uris``, ``tez.use.cluster.hadoop-libs=false``: the cluster's Hadoop 3.5.0 jars are not
  mixed in).

**Hooks.** With ``arbiter=`` the hooks jar (``java/hive-hooks``) is on the server's classpath and
``hive.query.lifetime.hooks`` / ``hive.exec.pre.hooks`` name its two hooks, with the arbiter's
address and the query-service credential file: every query a plain user runs then counts in the
arbiter's |J| while it runs.

**Process.** ``java -cp CONF:HOOKS:JARS/* org.apache.hive.service.server.HiveServer2`` in its own
session, log in ``logs/server.log``; everything else (readiness, stop, kill, restart on the same
work dir with the metastore intact) is :class:`~hive_hooks.engine.LocalHiveServer`'s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from hive_hooks.engine import DEFAULT_START_TIMEOUT, HOST, LocalHiveServer, serve_foreground
from yarn_bridge.local_hadoop import (
    REPO,
    HadoopError,
    fetch_jars,
    find_java,
    read_site,
    write_site,
)

__all__ = [
    "HIVE_VERSION",
    "HOOKS_JAR",
    "TEZ_VERSION",
    "HiveOnTez",
    "beeline_command",
    "build_hooks_jar",
    "ensure_hive_jars",
    "hive_jar_cache_dir",
    "site_overrides",
]

HIVE_VERSION: Final = "4.0.1"
TEZ_VERSION: Final = "0.10.3"
HS2_CLASS: Final = "org.apache.hive.service.server.HiveServer2"
BEELINE_CLASS: Final = "org.apache.hive.beeline.BeeLine"
HIVE_POM: Final = REPO / "java" / "hive-runtime" / "pom.xml"
HOOKS_POM: Final = REPO / "java" / "hive-hooks" / "pom.xml"
HOOKS_JAR: Final = REPO / "java" / "hive-hooks" / "target" / "yarn-arbiter-hive-hooks.jar"
DEPLOY_CONF: Final = REPO / "deploy" / "conf"
QUERY_HOOK: Final = "org.yarnarbiter.hive.ArbiterQueryHook"
PLAN_HOOK: Final = "org.yarnarbiter.hive.ArbiterPlanHook"
# Hadoop 3.3's shaded client API would shadow the unshaded classes Tez 0.10.3 links against,
# and two slf4j bindings would fight: neither goes into the cache.
EXCLUDED: Final = ("hadoop-client-api", "hadoop-client-runtime", "slf4j-reload4j")

# Java 17 closes java.base to reflection; Hive 4.0.x (built for Java 8) reflects into these
# (Kryo plan serialization, DataNucleus, Hadoop's UGI and direct buffers).
JAVA_OPENS: Final = tuple(
    f"--add-opens={m}=ALL-UNNAMED"
    for m in (
        "java.base/java.lang", "java.base/java.lang.reflect", "java.base/java.util",
        "java.base/java.util.concurrent", "java.base/java.util.concurrent.atomic",
        "java.base/java.util.regex", "java.base/java.io", "java.base/java.net",
        "java.base/java.nio", "java.base/sun.nio.ch", "java.base/java.time",
        "java.base/java.math", "java.base/java.text", "java.sql/java.sql",
    )
)  # fmt: skip

LOG4J2: Final = """\
status = WARN
name = HiveServer2
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
logger.dn.name = DataNucleus
logger.dn.level = WARN
logger.dn2.name = org.datanucleus
logger.dn2.level = WARN
logger.tez.name = org.apache.tez
logger.tez.level = WARN
logger.exec.name = org.apache.hadoop.hive.ql.exec
logger.exec.level = WARN
"""


# --------------------------------------------------------------------------------------------
# Jars
# --------------------------------------------------------------------------------------------


def hive_jar_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the Hive jars live: ``$YARN_ARBITER_HIVE_JARS`` or ``~/.cache/yarn-arbiter/hive-V``."""
    env = os.environ if environ is None else environ
    if env.get("YARN_ARBITER_HIVE_JARS"):
        return Path(env["YARN_ARBITER_HIVE_JARS"]).expanduser()
    return Path.home() / ".cache" / "yarn-arbiter" / f"hive-{HIVE_VERSION}"


def ensure_hive_jars(cache: Path | None = None, *, progress: Callable[[str], None] = print) -> Path:
    """The Hive jar cache (:func:`~yarn_bridge.local_hadoop.fetch_jars` of
    ``java/hive-runtime/pom.xml``, without :data:`EXCLUDED`)."""
    return fetch_jars(HIVE_POM, cache or hive_jar_cache_dir(),
                      f"Hive {HIVE_VERSION} and Tez {TEZ_VERSION}", exclude=EXCLUDED,
                      progress=progress)  # fmt: skip


def build_hooks_jar(*, progress: Callable[[str], None] = lambda _m: None) -> Path:
    """The Hive hooks' jar (``java/hive-hooks``), built with Maven when missing or older than
    its sources; :class:`~yarn_bridge.local_hadoop.HadoopError` with Maven's last lines if the
    build fails."""
    sources = [HOOKS_POM, *(HOOKS_POM.parent / "src" / "main").rglob("*.java")]
    newest = max(p.stat().st_mtime for p in sources)
    if HOOKS_JAR.exists() and HOOKS_JAR.stat().st_mtime >= newest:
        return HOOKS_JAR
    mvn = shutil.which("mvn")
    if not mvn:
        raise HadoopError(
            "Maven (mvn) is not installed: it builds the Hive hooks (java/hive-hooks)"
        )
    progress("building the Hive hooks (java/hive-hooks, Maven) ...")
    cmd = [mvn, "-B", "-q", "-f", str(HOOKS_POM), "package", "-DskipTests"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise HadoopError(f"Maven could not build the Hive hooks ({' '.join(cmd)}):\n{tail}")
    return HOOKS_JAR


# --------------------------------------------------------------------------------------------
# Configuration (pure)
# --------------------------------------------------------------------------------------------


def site_overrides(
    work_dir: Path,
    port: int,
    *,
    tez: str,
    jars: Path,
    queue: str = "analytics",
    arbiter: str | None = None,
    service_token_file: Path | None = None,
    plan_log: Path | None = None,
) -> dict[str, dict[str, str]]:
    """What one host changes in ``deploy/conf``'s ``hive-site.xml`` and ``tez-site.xml``.

    >>> o = site_overrides(Path("/w"), 10000, tez="local", jars=Path("/j"))
    >>> o["hive-site.xml"]["hive.server2.thrift.bind.host"], o["tez-site.xml"]["tez.local.mode"]
    ('127.0.0.1', 'true')
    >>> o["hive-site.xml"]["hive.metastore.warehouse.dir"]
    'file:///w/warehouse'
    >>> site_overrides(Path("/w"), 1, tez="yarn", jars=Path("/j"))["tez-site.xml"]["tez.lib.uris"]
    'file:///j'
    """
    if tez not in ("local", "yarn"):
        raise ValueError(f"tez must be 'local' or 'yarn', not {tez!r}")
    w = work_dir
    hive = {
        # storage: the local file system, in the work dir
        "fs.defaultFS": "file:///",
        "hive.metastore.warehouse.dir": f"file://{w}/warehouse",
        "hive.metastore.warehouse.external.dir": f"file://{w}/external",
        "hive.exec.scratchdir": str(w / "scratch"),
        "hive.exec.local.scratchdir": str(w / "local-scratch"),
        "hive.downloaded.resources.dir": str(w / "tmp" / "${hive.session.id}_resources"),
        "hive.user.install.directory": f"file://{w}/user/",
        "hive.querylog.location": str(w / "querylog"),
        "hive.server2.logging.operation.log.location": str(w / "oplogs"),
        # an embedded Derby metastore, created on first start
        "hive.metastore.uris": "",
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={w}/metastore_db;create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.event.db.notification.api.auth": "false",
        # loopback, NOSASL, no web UI
        "hive.server2.thrift.bind.host": HOST,
        "hive.server2.thrift.port": str(port),
        "hive.server2.authentication": "NOSASL",
        "hive.server2.webui.port": "0",
        "hive.server2.active.passive.ha.enable": "false",
        "hive.server2.support.dynamic.service.discovery": "false",
        "tez.queue.name": queue,
        "hive.server2.tez.default.queues": queue,
    }
    tez_site = {"tez.staging-dir": str(w / "tez-staging"), "tez.queue.name": queue}
    if tez == "local":
        hive["mapreduce.framework.name"] = "local"
        tez_site |= {"tez.local.mode": "true", "tez.runtime.optimize.local.fetch": "true",
                     "tez.ignore.lib.uris": "true"}  # fmt: skip
    else:  # the Tez AM and task JVMs run Java 17 too: the same add-opens
        opens = " ".join(JAVA_OPENS)
        tez_site |= {"tez.local.mode": "false", "tez.lib.uris": f"file://{jars}",
                     "tez.use.cluster.hadoop-libs": "false",
                     "tez.am.launch.cmd-opts": f"-XX:+UseSerialGC {opens}",
                     "tez.task.launch.cmd-opts": f"-XX:+UseSerialGC {opens}",
                     # a session AM whose HiveServer2 is gone (stopped or killed) ends itself
                     "tez.am.client.heartbeat.timeout.secs": "30"}  # fmt: skip
        hive["hive.tez.java.opts"] = f"-Xmx820m -XX:+UseSerialGC {opens}"
    if not arbiter:  # deploy/conf names the hooks; without an arbiter (and jar) they go
        hive |= {"hive.query.lifetime.hooks": "", "hive.exec.pre.hooks": ""}
    else:
        hive |= {"hive.query.lifetime.hooks": QUERY_HOOK, "hive.exec.pre.hooks": PLAN_HOOK,
                 "yarn.arbiter.address": arbiter, "yarn.arbiter.queue": queue}  # fmt: skip
        hive["yarn.arbiter.service.token.file"] = str(service_token_file or "")
        if plan_log is not None:
            hive["yarn.arbiter.plan.log"] = str(plan_log)
    return {"hive-site.xml": hive, "tez-site.xml": tez_site}


def write_conf(
    dest: Path, overrides: Mapping[str, Mapping[str, str]], yarn_conf_dir: Path | None = None
) -> Path:
    """``dest`` with deploy/conf's Hive files plus ``overrides``, a log4j2 file, and (Tez on
    YARN) the YARN client's ``yarn-site.xml`` and ``resource-types.xml``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, extra in overrides.items():
        props = read_site(DEPLOY_CONF / name)
        props.update(extra)
        write_site(dest / name, props, comment=f"deploy/conf/{name} with this host's overrides")
    if yarn_conf_dir is not None:
        for name in ("yarn-site.xml", "resource-types.xml"):
            if (yarn_conf_dir / name).exists():
                shutil.copyfile(yarn_conf_dir / name, dest / name)
    (dest / "hive-log4j2.properties").write_text(LOG4J2)
    return dest


def beeline_command(
    url: str | None, *args: str, jars: Path | None = None, java: Path | None = None
) -> list[str]:
    """The command line of BeeLine (Hive 3.1.3's, the newest on Maven Central, over Hive
    4.0.1's JDBC driver) for ``url``, e.g. ``beeline_command(url, "-e", "SELECT 1")``
    (``qoop-hive beeline -u URL ...`` runs it); ``url=None`` leaves ``-u`` to ``args``."""
    jars = jars or hive_jar_cache_dir()
    java = java or find_java()
    log4j = REPO / "java" / "hive-runtime" / "beeline-log4j2.properties"
    return [str(java), "-Xmx256m", *JAVA_OPENS, f"-Dlog4j.configurationFile={log4j}",
            "-cp", f"{jars}/*", BEELINE_CLASS, *(("-u", url) if url else ()), *args]  # fmt: skip


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class HiveOnTez(LocalHiveServer):
    """HiveServer2 4.0.1 on Tez (module docstring), as a child process on 127.0.0.1.

    ``tez``: ``"local"`` (in the server's JVM) or ``"yarn"`` (needs ``yarn_conf_dir``, the YARN
    client's conf dir). ``arbiter`` (``host:port``) loads the hooks with ``service_token_file``.
    """

    what = f"HiveServer2 {HIVE_VERSION} on Tez"

    def __init__(
        self,
        port: int | None = None,
        work_dir: str | Path | None = None,
        *,
        heap: str = "1g",
        tez: str = "local",
        yarn_conf_dir: Path | None = None,
        queue: str = "analytics",
        arbiter: str | None = None,
        service_token_file: Path | None = None,
        jars: Path | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        extra_conf: dict[str, str] | None = None,
    ) -> None:
        super().__init__(port, work_dir, start_timeout=start_timeout, extra_conf=extra_conf)
        if tez == "yarn" and yarn_conf_dir is None:
            raise ValueError("Tez on YARN needs the YARN client's conf dir (yarn_conf_dir)")
        self.heap, self.tez, self.queue = heap, tez, queue
        self.yarn_conf_dir = Path(yarn_conf_dir).resolve() if yarn_conf_dir else None
        self.arbiter, self.service_token_file = arbiter, service_token_file
        self.jars = jars
        self.conf_dir = self.work_dir / "conf"
        self.plan_log = self.work_dir / "logs" / "arbiter-plans.jsonl"

    def site(self) -> dict[str, dict[str, str]]:
        """The overrides of ``deploy/conf`` this server runs with (then ``extra_conf``)."""
        o = site_overrides(self.work_dir, self.port, tez=self.tez, jars=self.jars or Path(),
                           queue=self.queue, arbiter=self.arbiter,
                           service_token_file=self.service_token_file,
                           plan_log=self.plan_log)  # fmt: skip
        o["hive-site.xml"] |= self.extra_conf
        return o

    def command(self) -> list[str]:
        assert self.jars is not None
        w = self.work_dir
        cp = [str(self.conf_dir)]
        if self.arbiter:
            cp.append(str(HOOKS_JAR))
        cp.append(f"{self.jars}/*")
        return [str(find_java()), f"-Xmx{self.heap}", "-XX:+UseSerialGC", *JAVA_OPENS,
                f"-Djava.io.tmpdir={w / 'tmp'}", f"-Dderby.system.home={w / 'derby'}",
                f"-Dlog4j.configurationFile={self.conf_dir / 'hive-log4j2.properties'}",
                "-cp", ":".join(cp), HS2_CLASS]  # fmt: skip

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for k in ("HADOOP_CONF_DIR", "HIVE_CONF_DIR", "SPARK_HOME"):
            env.pop(k, None)
        return env

    def start(self) -> HiveOnTez:
        if self.running:
            return self
        self.jars = self.jars or ensure_hive_jars()
        if self.arbiter:
            build_hooks_jar(progress=print)
        for sub in ("tmp", "derby", "logs", "scratch", "local-scratch", "warehouse", "external"):
            (self.work_dir / sub).mkdir(parents=True, exist_ok=True)
        write_conf(self.conf_dir, self.site(), self.yarn_conf_dir)
        super().start()
        return self

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"HiveOnTez({self.jdbc_url!r}, tez={self.tez}, dir={str(self.work_dir)!r}, {state})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hive_hooks.hive_engine",
        description=f"Run a local HiveServer2 {HIVE_VERSION} on Tez (NOSASL, 127.0.0.1) "
        "until Ctrl-C.",
    )
    p.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    p.add_argument("--dir", default=None, help="work dir, kept after exit (default: temporary)")
    p.add_argument("--driver-memory", default="1g", help="the server's JVM heap (default 1g)")
    p.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    p.add_argument("--tez", choices=("local", "yarn"), default="local",
                   help="where Tez runs: in the server (local) or on YARN")  # fmt: skip
    p.add_argument("--hadoop-conf-dir", help="--tez yarn: the YARN client's conf dir")
    p.add_argument("--queue", default="analytics", help="YARN queue (default analytics)")
    p.add_argument("--arbiter", metavar="HOST:PORT", help="load the hooks, speaking to it")
    p.add_argument("--service-token-file", help="--arbiter: the query-service credential")
    a = p.parse_args(argv)
    try:
        srv = HiveOnTez(
            a.port, a.dir, heap=a.driver_memory, tez=a.tez, queue=a.queue, arbiter=a.arbiter,
            yarn_conf_dir=Path(a.hadoop_conf_dir) if a.hadoop_conf_dir else None,
            service_token_file=Path(a.service_token_file) if a.service_token_file else None,
            start_timeout=a.timeout,
        )  # fmt: skip
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return serve_foreground(srv, srv.what, lambda: f", Tez {srv.tez}")


if __name__ == "__main__":
    sys.exit(main())
