"""Shared fixtures: a real local YARN (``yarn_bridge.local_hadoop``) for tests marked ``yarn``,
and a throwaway PKI (``pki``) for the TLS tests. Plain helpers are in the ``support`` package.

``yarn_cluster`` (session scope) is one ResourceManager and two NodeManagers (4 ``yarn.io/gpu``
each) started from Hadoop's own jars in a temporary work dir, stopped at the end of the session.
The NodeManager liveness expiry is lowered to 4 s so a killed NodeManager goes LOST within a
test. A test that kills a daemon restarts it before it returns (``restart``), so the next test
finds the cluster whole; ``make_yarn_cluster`` starts a private one (RM HA, say).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from yarn_bridge.local_hadoop import ClusterState, LocalHadoop, LocalHadoopSpec

NM_LIVENESS_MS = 4000


@dataclass
class YarnCluster:
    """What a test needs of a running local YARN."""

    local: LocalHadoop
    state: ClusterState

    @property
    def rm_url(self) -> str:
        return self.local.active_rm() or self.state.rm_url

    @property
    def rm_urls(self) -> tuple[str, ...]:
        return self.state.rm_urls

    @property
    def conf_dir(self) -> Path:
        return Path(self.state.client_conf)

    @property
    def jar_dir(self) -> Path:
        return Path(self.state.jars)

    @property
    def workdir(self) -> Path:
        return Path(self.state.workdir)

    @property
    def node_ids(self) -> list[str]:
        return [d.node_id for d in self.state.daemons if d.node_id]

    def nm_name(self, node_id: str) -> str:
        return next(d.name for d in self.state.daemons if d.node_id == node_id)

    def env(self) -> dict[str, str]:
        """Environment for a client process (yarn-arbiter submit, an AM started by hand)."""
        return {**os.environ, "JAVA_HOME": self.state.java_home,
                "HADOOP_CONF_DIR": self.state.client_conf}  # fmt: skip

    def kill(self, name: str) -> None:
        self.local.kill(name)

    def restart(self, name: str) -> None:
        self.state = self.local.restart(name)

    def kill_nm(self, i: int) -> None:
        self.kill(f"nm{i}")

    def start_nm(self, i: int) -> None:
        self.restart(f"nm{i}")


def _start(workdir: Path, **kw) -> YarnCluster:
    local = LocalHadoop(workdir)
    state = local.up(LocalHadoopSpec(workdir, nm_liveness_ms=NM_LIVENESS_MS, **kw))
    return YarnCluster(local, state)


@pytest.fixture(scope="session")
def yarn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    cluster = _start(tmp_path_factory.mktemp("yarn"))
    try:
        yield cluster
    finally:
        cluster.local.down()


@pytest.fixture
def make_yarn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Start private clusters (``make_yarn_cluster(ha=True)``); all stopped after the test."""
    started: list[YarnCluster] = []

    def make(**kw) -> YarnCluster:
        c = _start(tmp_path_factory.mktemp("yarn-own"), **kw)
        started.append(c)
        return c

    try:
        yield make
    finally:
        for c in started:
            c.local.down()


# -- ZooKeeper alone (the arbiter's HA pair, arbiter.ha) ---------------------------------------


@dataclass
class ZooKeeper:
    """A real ZooKeeper (Hadoop's jars) on a free loopback port: ``address`` is
    ``127.0.0.1:PORT``; ``pause``/``resume`` SIGSTOP/SIGCONT its JVM (a partition of everyone
    from it), ``kill``/``restart`` kill -9 and start it again on the same port and data."""

    local: LocalHadoop
    state: ClusterState

    @property
    def address(self) -> str:
        return self.state.zk_address

    @property
    def pid(self) -> int:
        st = self.local.state()
        assert st is not None
        return st.daemon("zk").pid

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        self.local.kill("zk")

    def restart(self) -> None:
        self.local.restart("zk")


@pytest.fixture
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeper]:
    """A private ZooKeeper for one test (tickTime 500 ms: sessions down to 1 s), stopped after
    it (resumed first if the test left it paused)."""
    local = LocalHadoop(tmp_path_factory.mktemp("zk"))
    zk = ZooKeeper(local, local.up_zookeeper())
    try:
        yield zk
    finally:
        with contextlib.suppress(ProcessLookupError, AssertionError):
            zk.resume()
        local.down()


# -- lease AMs on the real cluster (tests/support/yarn.py) ------------------------------------


@pytest.fixture(scope="session")
def am_jar() -> Path:
    """The lease AM's jar, built with Maven when missing or older than its sources."""
    from yarn_bridge.local_hadoop import build_am_jar

    return build_am_jar()


@pytest.fixture
def arbiter(yarn_cluster, tmp_path: Path) -> Iterator:
    """An arbiter serving the real cluster (5 s leases); YARN apps left running are killed."""
    from support import wait_for
    from support.yarn import KNOBS, Arbiter, yarn_gpus_by_node

    from yarn_bridge.rm import RMClient

    # The previous test's apps were killed: YARN releases their containers within seconds.
    wait_for("no GPU in use (the previous test's apps gone)",
             lambda: yarn_gpus_by_node(yarn_cluster.rm_url) == {}, timeout=60)  # fmt: skip
    arb = Arbiter(tmp_path, yarn_cluster.rm_url, **KNOBS)
    try:
        state = wait_for("the arbiter's cluster from the RM", arb.state, timeout=60)
        assert {g.machine for g in state.gpus} == set(yarn_cluster.node_ids)
        yield arb
    finally:
        with RMClient(yarn_cluster.rm_url) as rm:
            for yid in arb.submitted:
                if not rm.app(yid).is_final:
                    rm.kill_app(yid)
        arb.stop()


# -- TLS -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """PEM files of a CA, a ``localhost`` server and a client (``support.pki.make_pki``)."""
    from support.pki import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


ENGINE_DIR = Path(__file__).resolve().parent / "engine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests under tests/engine carry the ``engine`` marker (``-m "not engine"`` skips them)."""
    for item in items:
        if ENGINE_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.engine)
