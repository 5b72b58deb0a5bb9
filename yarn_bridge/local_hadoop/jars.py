"""Jars and Java for the local Hadoop: the Hadoop and ZooKeeper jars fetched from Maven Central
into one cache shared by all work dirs (``java/runtime/pom.xml`` pins the versions; the cache
is marked complete with the pom's hash so a changed pom refetches), the lease AM's jar built
from ``java/am`` with Maven, and the ``java`` the daemons run with."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from yarn_bridge.local_hadoop.common import HADOOP_VERSION, REPO, ZOOKEEPER_VERSION, HadoopError

__all__ = [
    "AM_JAR",
    "AM_POM",
    "RUNTIME_POM",
    "build_am_jar",
    "ensure_jars",
    "fetch_jars",
    "find_java",
    "jar_cache_dir",
    "java_home",
]

RUNTIME_POM: Final = REPO / "java" / "runtime" / "pom.xml"
AM_POM: Final = REPO / "java" / "am" / "pom.xml"
AM_JAR: Final = REPO / "java" / "am" / "target" / "yarn-arbiter-am.jar"


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
