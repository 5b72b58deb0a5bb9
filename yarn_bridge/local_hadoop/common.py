"""What every part of the local Hadoop shares: the Hadoop and ZooKeeper versions it runs, the
main classes of its daemons (ResourceManager, NodeManager, ZooKeeper server), the repository
root it finds ``deploy/conf`` and ``java/*/pom.xml`` under, and :class:`HadoopError`."""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = [
    "HADOOP_VERSION",
    "NM_CLASS",
    "REPO",
    "RM_CLASS",
    "ZK_CLASS",
    "ZOOKEEPER_VERSION",
    "HadoopError",
]

HADOOP_VERSION: Final = "3.5.0"
ZOOKEEPER_VERSION: Final = "3.9.5"
RM_CLASS: Final = "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager"
NM_CLASS: Final = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
ZK_CLASS: Final = "org.apache.zookeeper.server.ZooKeeperServerMain"

REPO: Final = Path(__file__).resolve().parents[2]


class HadoopError(RuntimeError):
    """The local Hadoop could not be set up, started or stopped; the message says why."""
