"""The configuration of the local Hadoop's daemons (pure apart from writing files): Hadoop
``*-site.xml`` files read and written, and each daemon's conf dir generated from
``deploy/conf/*.xml`` (the files the compose cluster mounts) with :func:`site_overrides`
applied.

The overrides change only addresses, ports, directories and what one host needs that a cluster
of hosts does not: ``yarn.scheduler.include-port-in-node-name`` (two NodeManagers on one host
are told apart by port, so strict locality can name one of them: node name = node id
``host:port``, which is also the machine name the watcher gives the arbiter), each NodeManager's
own shuffle port, the application classpath (the jar cache), the state store paths (Hadoop's
*ResourceManagerRestart*, work-preserving recovery; ZooKeeper for an *ResourceManagerHA* pair),
and the NodeManager liveness expiry when a test asks for it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from yarn_bridge.local_hadoop.common import REPO
from yarn_bridge.local_hadoop.kdc import NM_PRINCIPAL, RM_PRINCIPAL, KdcFiles, kdc_files

__all__ = [
    "DEPLOY_CONF",
    "LOG4J",
    "SITE_FILES",
    "LocalHadoopSpec",
    "NodeManagerPorts",
    "RMPorts",
    "kerberos_user",
    "read_site",
    "secure_overrides",
    "site_overrides",
    "write_conf_dir",
    "write_site",
]

DEPLOY_CONF: Final = REPO / "deploy" / "conf"
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
    # Hadoop secure mode on a MiniKdc realm (kdc.py, :func:`secure_overrides`); the client
    # principal is ``<kerberos_user>@EXAMPLE.COM`` (empty: the login name).
    kerberos: bool = False
    kerberos_user: str = ""
    # an arbiter HA pair on the RM pair's ZooKeeper (needs ``ha``; local_hadoop/arbiters.py)
    arbiter_pair: bool = False


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
        "yarn.scheduler.configuration.store.class": "fs",  # deploy/conf's is "zk" (RM HA)
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
            # deploy/conf's yarn-site.xml is the compose cluster's RM HA pair: one RM here. The
            # pair's keys go (None removes a key): with a cluster id set, the RM reports it in
            # every app (rmClusterId), which a single RM does not; the per-RM addresses and the
            # ZooKeeper address left are inert with HA off
            "yarn.resourcemanager.ha.enabled": "false",
            "yarn.resourcemanager.cluster-id": None,
            "yarn.resourcemanager.ha.rm-ids": None,
            "yarn.resourcemanager.ha.automatic-failover.enabled": None,
            "yarn.resourcemanager.ha.automatic-failover.embedded": None,
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
    if spec.kerberos:
        sec = secure_overrides(kdc_files(w, kerberos_user(spec)))
        core |= sec["core-site.xml"]
        yarn |= sec["yarn-site.xml"]
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


def kerberos_user(spec: LocalHadoopSpec) -> str:
    """The client principal's name: ``spec.kerberos_user``, else the login name."""
    return spec.kerberos_user or _user()


def http_secret_file(files: KdcFiles) -> Path:
    """The secret the web servers sign their ``hadoop.auth`` cookies with."""
    return files.root / "http-signature-secret"


def secure_overrides(files: KdcFiles) -> dict[str, dict[str, str]]:
    """What Hadoop's secure mode needs on one host, per file (Hadoop's *SecureMode* and
    *HttpAuthentication*). Pure.

    >>> from yarn_bridge.local_hadoop.kdc import kdc_files
    >>> o = secure_overrides(kdc_files(Path("/w"), "alice"))
    >>> o["core-site.xml"]["hadoop.security.authentication"]
    'kerberos'
    >>> o["yarn-site.xml"]["yarn.resourcemanager.keytab"]
    '/w/kdc/service.keytab'
    """
    keytab = str(files.service_keytab)
    core = {
        # Kerberos for RPC (clients and NodeManagers to the RM, AMs to NMs with tokens).
        "hadoop.security.authentication": "kerberos",
        # Service-level ACLs stay off, as yarn.acl.enable=false in deploy/conf: any
        # authenticated principal may call any protocol. Authentication is the point here.
        "hadoop.security.authorization": "false",
        # Principal -> short name: DEFAULT strips the default realm (alice@EXAMPLE.COM -> alice,
        # rm/localhost@EXAMPLE.COM -> rm). Written out because secure mode depends on it.
        "hadoop.security.auth_to_local": "DEFAULT",
        # SPNEGO on every web server (RM and NMs): Hadoop's AuthenticationFilter, which the RM
        # swaps for its RMAuthenticationFilter (SPNEGO plus RM delegation tokens).
        "hadoop.http.filter.initializers":
            "org.apache.hadoop.security.AuthenticationFilterInitializer",
        "hadoop.http.authentication.type": "kerberos",
        # "*": every HTTP/ principal of the keytab (HTTP/localhost and HTTP/127.0.0.1), so a
        # client may name the host either way.
        "hadoop.http.authentication.kerberos.principal": "*",
        "hadoop.http.authentication.kerberos.keytab": keytab,
        "hadoop.http.authentication.simple.anonymous.allowed": "false",
        # The default secret file is ~/hadoop-http-auth-signature-secret: one per work dir.
        "hadoop.http.authentication.signature.secret.file": str(http_secret_file(files)),
    }  # fmt: skip
    yarn = {
        "yarn.resourcemanager.principal": RM_PRINCIPAL,
        "yarn.resourcemanager.keytab": keytab,
        "yarn.nodemanager.principal": NM_PRINCIPAL,
        "yarn.nodemanager.keytab": keytab,
        # The web apps' own SPNEGO keys (WebApps warns when unset and the RM copies them over
        # hadoop.http.authentication.kerberos.*).
        "yarn.resourcemanager.webapp.spnego-principal": "*",
        "yarn.resourcemanager.webapp.spnego-keytab-file": keytab,
        "yarn.nodemanager.webapp.spnego-principal": "*",
        "yarn.nodemanager.webapp.spnego-keytab-file": keytab,
        # Containers run as the NodeManager's OS user, under the app user's name in YARN. A
        # real secure cluster uses LinuxContainerExecutor (setuid container-executor, an OS
        # account per principal), which needs root-owned binaries this local cluster has not.
        "yarn.nodemanager.container-executor.class":
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
    }  # fmt: skip
    return {"core-site.xml": core, "yarn-site.xml": yarn}


def write_conf_dir(dest: Path, overrides: Mapping[str, Mapping[str, str | None]]) -> Path:
    """``deploy/conf`` files with ``overrides`` applied (a value of None removes the key),
    plus a console log4j file, in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in SITE_FILES:
        src = DEPLOY_CONF / name
        props = read_site(src) if src.exists() else {}
        for key, value in overrides.get(name, {}).items():
            if value is None:
                props.pop(key, None)  # an override of None removes the key
            else:
                props[key] = value
        note = f"written by yarn_bridge.local_hadoop from deploy/conf/{name}"
        write_site(dest / name, props, comment=note)
    (dest / "log4j.properties").write_text(LOG4J)
    return dest
