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

Layout, one module per responsibility (each docstring gives its design decisions):

* :mod:`yarn_bridge.local_hadoop.jars`: **jars from Maven Central, once** (``java/runtime/pom.xml``
  pins the versions; :func:`ensure_jars` fills one cache, ``$YARN_ARBITER_JARS`` or
  ``~/.cache/yarn-arbiter/hadoop-3.5.0``, shared by all work dirs), the lease AM's jar, ``java``;
* :mod:`yarn_bridge.local_hadoop.config`: **one source of configuration**, every daemon's conf
  dir written from ``deploy/conf/*.xml`` with :func:`site_overrides` (pure) applied;
* :mod:`yarn_bridge.local_hadoop.processes`: ports, the ``state.json`` records, liveness,
  readiness waits and orphaned containers;
* :mod:`yarn_bridge.local_hadoop.cluster`: :class:`LocalHadoop`, **processes, not threads**
  (one ``java`` per daemon in its own session), **ready means usable** (an ACTIVE RM and every
  NodeManager RUNNING), **small JVMs**;
* :mod:`yarn_bridge.local_hadoop.kdc`: **a Kerberos realm** for ``up --kerberos`` (Hadoop's
  MiniKdc as one more daemon, the daemons' and the user's keytabs, ``krb5.conf``);
* :mod:`yarn_bridge.local_hadoop.common`: versions, main classes, :class:`HadoopError`.
"""

from yarn_bridge.local_hadoop.cluster import LocalHadoop
from yarn_bridge.local_hadoop.common import (
    HADOOP_VERSION,
    NM_CLASS,
    REPO,
    RM_CLASS,
    ZK_CLASS,
    ZOOKEEPER_VERSION,
    HadoopError,
)
from yarn_bridge.local_hadoop.config import (
    DEPLOY_CONF,
    LOG4J,
    SITE_FILES,
    LocalHadoopSpec,
    NodeManagerPorts,
    RMPorts,
    read_site,
    site_overrides,
    write_conf_dir,
    write_site,
)
from yarn_bridge.local_hadoop.jars import (
    AM_JAR,
    AM_POM,
    RUNTIME_POM,
    build_am_jar,
    ensure_jars,
    fetch_jars,
    find_java,
    jar_cache_dir,
    java_home,
)
from yarn_bridge.local_hadoop.processes import (
    ClusterState,
    Daemon,
    PortPool,
    kill_orphan_containers,
    port_busy,
)

__all__ = [
    "AM_JAR",
    "AM_POM",
    "DEPLOY_CONF",
    "HADOOP_VERSION",
    "LOG4J",
    "NM_CLASS",
    "REPO",
    "RM_CLASS",
    "RUNTIME_POM",
    "SITE_FILES",
    "ZK_CLASS",
    "ZOOKEEPER_VERSION",
    "ClusterState",
    "Daemon",
    "HadoopError",
    "LocalHadoop",
    "LocalHadoopSpec",
    "NodeManagerPorts",
    "PortPool",
    "RMPorts",
    "build_am_jar",
    "ensure_jars",
    "fetch_jars",
    "find_java",
    "jar_cache_dir",
    "java_home",
    "kill_orphan_containers",
    "port_busy",
    "read_site",
    "site_overrides",
    "write_conf_dir",
    "write_site",
]
