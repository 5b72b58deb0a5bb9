"""Start, find, query and stop one work dir's local Hadoop (:class:`LocalHadoop`):
ResourceManager(s), NodeManagers and, for an HA pair, ZooKeeper.

* **Processes, not threads.** Each daemon is ``java -cp CONF:JARS/* MainClass`` in its own
  session (``start_new_session``), stdout and stderr in ``DIR/logs/<daemon>.log``, its pid in
  ``DIR/state.json``. ``down`` stops daemons by pid, only if that pid still runs the expected
  main class, first SIGTERM then SIGKILL, and then kills container processes that outlived
  their NodeManager (found by working directory under the NodeManagers' local dirs).
* **Ready means usable.** ``up`` returns when the REST API answers with an ACTIVE RM
  (``/ws/v1/cluster/info``) and every NodeManager is RUNNING in ``/ws/v1/cluster/nodes``; a
  daemon that exits meanwhile fails the start with the last lines of its log.
* **RM HA** (Hadoop's *ResourceManagerHA*): the two RMs start one at a time, so the first
  becomes ACTIVE and the second STANDBY; each is told its own ``yarn.resourcemanager.ha.id``.
* **Small JVMs.** SerialGC and modest heaps (RM 512 MB, NM 384 MB, ZooKeeper 128 MB): a 2-core
  machine runs the cluster beside the test suite.
* **Kerberos** (``spec.kerberos``, Hadoop's *SecureMode*): a MiniKdc daemon (``kdc``,
  :mod:`~yarn_bridge.local_hadoop.kdc`) starts first and every JVM reads its realm's
  ``krb5.conf``; the daemons log in from ``service.keytab``, the web servers want SPNEGO, and
  this class's own readiness checks log in as the client principal from its keytab
  (:mod:`yarn_bridge.kerberos`), which ``state.json`` records for clients (``principal``,
  ``keytab``, ``krb5_conf``). The KDC cannot be restarted (MiniKdc makes new keys each start).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, replace
from pathlib import Path

import httpx
import psutil

from yarn_bridge.local_hadoop.arbiters import (
    ARBITER_IDS,
    ARBITER_MAIN,
    arbiter_roles,
    start_arbiter,
    wait_roles,
)
from yarn_bridge.local_hadoop.common import NM_CLASS, RM_CLASS, ZK_CLASS, HadoopError
from yarn_bridge.local_hadoop.config import (
    LOG4J,
    LocalHadoopSpec,
    NodeManagerPorts,
    RMPorts,
    _rm_ids,
    http_secret_file,
    kerberos_user,
    read_site,
    site_overrides,
    write_conf_dir,
    write_site,
)
from yarn_bridge.local_hadoop.jars import ensure_jars, find_java, java_home
from yarn_bridge.local_hadoop.kdc import (
    KDC_CLASS,
    READY_LINE,
    KdcFiles,
    ensure_minikdc_jars,
    kdc_args,
    kdc_files,
    split_keytabs,
)
from yarn_bridge.local_hadoop.processes import (
    ClusterState,
    Daemon,
    Headers,
    PortPool,
    _alive,
    _rm_get,
    _rm_state,
    _wait,
    kill_orphan_containers,
    port_busy,
)
from yarn_bridge.rm.errors import RMError

__all__ = ["LocalHadoop", "zk_ok"]

log = logging.getLogger(__name__)


def zk_ok(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the ZooKeeper on ``host:port`` answers ``ruok`` with ``imok`` (serving)."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class LocalHadoop:
    """Start, find, query and stop the daemons of one work dir (see the module docstring)."""

    def __init__(self, workdir: Path | str) -> None:
        self.workdir = Path(workdir).resolve()
        self.state_file = self.workdir / "state.json"
        self._auth_hook: tuple[str, Headers] | None = None

    def auth(self, state: ClusterState | None = None) -> Headers | None:
        """SPNEGO headers for the RM's REST API as the cluster's client principal (``None`` on
        an unsecured cluster): what the readiness checks use, and tests may too."""
        st = state or self.state()
        if st is None or not st.keytab:
            return None
        if self._auth_hook is None or self._auth_hook[0] != st.keytab:
            from yarn_bridge.kerberos import KeytabLogin, spnego_hook

            login = KeytabLogin(st.principal, st.keytab, krb5_conf=st.krb5_conf)
            self._auth_hook = (st.keytab, spnego_hook(login))
        return self._auth_hook[1]

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
        if spec.arbiter_pair and not spec.ha:
            raise HadoopError("--arbiter-pair runs on RM HA's ZooKeeper: add --ha")
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
        kdc_port = pool.take() if spec.kerberos else None
        pool.release()
        env = {**os.environ, "JAVA_HOME": str(java_home(java))}
        kdc = kdc_files(self.workdir, kerberos_user(spec)) if spec.kerberos else None
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
        if kdc is not None:
            state = replace(state, krb5_conf=str(kdc.krb5_conf), principal=kdc.user_principal,
                            keytab=str(kdc.user_keytab))  # fmt: skip
        try:
            if kdc is not None and kdc_port is not None:
                daemons.append(self._start_kdc(kdc, kdc_port, java, env, progress))
                self._save(replace(state, daemons=tuple(daemons)))
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
                                webapp=f"http://127.0.0.1:{rm_ports[rid].webapp}",
                                krb5_conf=state.krb5_conf)  # fmt: skip
                daemons.append(d)
                self._save(replace(state, daemons=tuple(daemons)))
                if spec.ha:  # one at a time: the first becomes ACTIVE, the second STANDBY
                    _wait(lambda d=d: _rm_state(d.webapp, self.auth(state))
                          in ("ACTIVE", "STANDBY"), timeout_s,
                          f"{rid} to join the election", d)  # fmt: skip
            progress(f"ResourceManager starting ({', '.join(state.rm_urls)}) ...")
            _wait(lambda: self._active_rm(state) is not None, timeout_s,
                  "a ResourceManager to become ACTIVE", *daemons)  # fmt: skip
            for i in range(1, spec.nodes + 1):
                d = self._start_nm(spec, i, nm_ports[i - 1], java, jars, env, common,
                                   krb5_conf=state.krb5_conf)  # fmt: skip
                daemons.append(d)
                self._save(replace(state, daemons=tuple(daemons)))
            progress(f"{spec.nodes} NodeManagers starting ...")
            state = replace(state, daemons=tuple(daemons))
            _wait(lambda: self._nodes_running(state) == spec.nodes, timeout_s,
                  f"{spec.nodes} NodeManagers to be RUNNING", *daemons)  # fmt: skip
            state = self._with_node_ids(state)
            if spec.arbiter_pair:
                for ha_id in ARBITER_IDS:  # one at a time: the first becomes the active
                    daemons.append(start_arbiter(self.workdir, ha_id, state.zk_address,
                                                 state.rm_urls))  # fmt: skip
                    self._save(replace(state, daemons=tuple(daemons)))
                    progress(f"arbiter {ha_id} starting at {daemons[-1].address} ...")
                    wait_roles(daemons, {"active", "standby"} if ha_id == ARBITER_IDS[-1]
                               else {"active"}, timeout_s)  # fmt: skip
                state = replace(state, daemons=tuple(daemons))
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

    def _start_kdc(self, files: KdcFiles, port: int, java: Path, env: Mapping[str, str],
                   progress: Callable[[str], None]) -> Daemon:  # fmt: skip
        """MiniKdc on 127.0.0.1:``port``; returns once its keytabs and krb5.conf are written."""
        jars = ensure_minikdc_jars(progress=progress)
        args = kdc_args(files, port)
        conf = self.workdir / "etc" / "kdc"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j.properties").write_text(LOG4J)
        log = self.workdir / "logs" / "kdc.log"
        seen = log.stat().st_size if log.exists() else 0  # the log of an earlier start stays
        d = self._spawn("kdc", KDC_CLASS, java, jars, conf, env, heap_mb=128, args=args,
                        home=False)  # fmt: skip
        progress(f"MiniKdc starting (realm EXAMPLE.COM on 127.0.0.1:{port}) ...")

        def ready() -> bool:  # MiniKdc prints the line after it wrote the keytab
            with open(log, "rb") as f:
                f.seek(seen)
                return READY_LINE.encode() in f.read()

        _wait(ready, 60, "MiniKdc to create its principals", d)
        split_keytabs(files, port)
        secret = http_secret_file(files)
        secret.write_text(os.urandom(24).hex())
        secret.chmod(0o600)
        return d

    def up_zookeeper(self, *, timeout_s: float = 60.0) -> ClusterState:
        """Start only ZooKeeper (from the cached jars, on a free loopback port) and wait until
        it answers ``ruok``; ``state().zk_address`` is its ``127.0.0.1:PORT``. For the
        arbiter's HA pair and its tests; :meth:`down` stops it, :meth:`kill` and
        :meth:`restart` work on its daemon (``zk``) as on the others."""
        if any(self.running().values()):
            raise HadoopError(f"a cluster already runs from {self.workdir}")
        java = find_java()
        jars = ensure_jars()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        pool = PortPool()
        port = pool.take()
        pool.release()
        env = {**os.environ, "JAVA_HOME": str(java_home(java))}
        state = ClusterState(
            workdir=str(self.workdir), jars=str(jars), java_home=env["JAVA_HOME"],
            client_conf="", rm_urls=(), daemons=(), zk_address=f"127.0.0.1:{port}",
            started_unix_s=time.time(),
        )  # fmt: skip
        zk = self._start_zk(java, jars, port, env)
        state = replace(state, daemons=(zk,))
        self._save(state)
        try:
            _wait(lambda: zk_ok(port), timeout_s, "ZooKeeper to answer ruok", zk)
        except BaseException:
            self.down()
            raise
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
                  jars: Path, env: Mapping[str, str], common: Mapping,
                  krb5_conf: str = "") -> Daemon:  # fmt: skip
        for sub in ("local", "logs", "recovery"):
            (self.workdir / f"nm{i}" / sub).mkdir(parents=True, exist_ok=True)
        conf = write_conf_dir(self.workdir / "etc" / f"nm{i}",
                              site_overrides(spec, nm=(i, ports), **common))  # fmt: skip
        return self._spawn(f"nm{i}", NM_CLASS, java, jars, conf, env, heap_mb=384,
                           webapp=f"http://127.0.0.1:{ports.webapp}",
                           node_id=f"127.0.0.1:{ports.address}", krb5_conf=krb5_conf)  # fmt: skip

    def _spawn(self, name: str, main_class: str, java: Path, jars: Path, conf: Path,
               env: Mapping[str, str], *, heap_mb: int, args: Iterable[str] = (),
               webapp: str = "", node_id: str = "", krb5_conf: str = "",
               home: bool = True) -> Daemon:  # fmt: skip
        log = self.workdir / "logs" / f"{name}.log"
        krb = [f"-Djava.security.krb5.conf={krb5_conf}"] if krb5_conf else []
        cmd = [str(java), f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dhadoop.log.dir={self.workdir / 'logs'}",
               f"-Dyarn.log.dir={self.workdir / 'logs'}",
               *([f"-Dhadoop.home.dir={jars}"] if home else []), *krb,
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
        auth = self.auth(state)
        return next((u for u in state.rm_urls if _rm_state(u, auth) == "ACTIVE"), None)

    def _nodes(self, state: ClusterState) -> list[dict]:
        url = self._active_rm(state)
        if url is None:
            return []
        try:
            r = _rm_get(f"{url}/ws/v1/cluster/nodes", self.auth(state))
            return (r.json().get("nodes") or {}).get("node") or []
        except (httpx.HTTPError, ValueError, RMError):
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

    def arbiter_roles(self) -> dict[str, str | None]:
        """``{arb1: "active", arb2: "standby"}`` (empty: no arbiter pair; None: not answering)."""
        st = self.state()
        return {} if st is None else arbiter_roles(st.daemons)

    def active_arbiter(self) -> Daemon | None:
        """The arbiter daemon that serves now (None: none, or no pair)."""
        st = self.state()
        active = [n for n, r in self.arbiter_roles().items() if r == "active"]
        return st.daemon(active[0]) if st is not None and active else None

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
        roles = arbiter_roles(st.daemons)
        for r in rows:
            if r["name"] in roles:
                r["role"] = roles[r["name"]]
        active_arb = next((n for n, role in roles.items() if role == "active"), None)
        return {"workdir": st.workdir, "running": any(r["alive"] for r in rows),
                "active_rm": self._active_rm(st), "rm_urls": list(st.rm_urls),
                "active_arbiter": active_arb, "arbiters": st.arbiter_addresses,
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
        if d.main_class == ARBITER_MAIN:
            new = start_arbiter(self.workdir, name, st.zk_address, st.rm_urls,
                                port=int(d.address.rsplit(":", 1)[1]),
                                metrics_port=int(d.webapp.rsplit(":", 1)[1]))  # fmt: skip
            st = replace(st, daemons=tuple(new if x.name == name else x for x in st.daemons))
            self._save(st)
            _wait(lambda: arbiter_roles([new])[name] in ("active", "standby"), timeout_s,
                  f"arbiter {name} to join the election", new)  # fmt: skip
            return st
        if d.main_class == KDC_CLASS:
            raise HadoopError("the KDC cannot be restarted (MiniKdc makes new keys at each start): "
                              "stop the cluster and start it again")  # fmt: skip
        java = Path(st.java_home) / "bin" / "java"
        env = {**os.environ, "JAVA_HOME": st.java_home, "HADOOP_CONF_DIR": st.client_conf}
        heap = {RM_CLASS: 512, NM_CLASS: 384}.get(d.main_class, 128)
        args = [str(Path(d.conf_dir) / "zoo.cfg")] if d.main_class == ZK_CLASS else []
        new = self._spawn(name, d.main_class, java, Path(st.jars), Path(d.conf_dir), env,
                          heap_mb=heap, args=args, webapp=d.webapp, node_id=d.node_id,
                          krb5_conf=st.krb5_conf)  # fmt: skip
        st = replace(st, daemons=tuple(new if x.name == name else x for x in st.daemons))
        self._save(st)
        if d.main_class == RM_CLASS:
            _wait(lambda: self._active_rm(st) is not None, timeout_s, "an ACTIVE RM", new)
        elif d.main_class == ZK_CLASS:
            port = int(st.zk_address.rsplit(":", 1)[1])
            _wait(lambda: zk_ok(port), timeout_s, "ZooKeeper to answer ruok", new)
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
        # the arbiters first (each closes its ZooKeeper session), ZooKeeper and the KDC last
        rank = {ARBITER_MAIN: -1, NM_CLASS: 0, RM_CLASS: 1}
        order = sorted(st.daemons, key=lambda d: rank.get(d.main_class, 2))
        for d in order:
            if _alive(d.pid, d.main_class):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGTERM)
                stopped.append(d.name)
        deadline = time.monotonic() + timeout_s
        killed = []
        for d in order:
            while _alive(d.pid, d.main_class) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(d.pid, d.main_class):
                log.warning("%s (pid %d) still running %.0f s after SIGTERM: SIGKILL",
                            d.name, d.pid, timeout_s)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    os.kill(d.pid, signal.SIGKILL)
                killed.append(d)
        # a SIGKILLed process is gone only once the kernel has torn it down: down() returns
        # when every daemon is
        gone_by = time.monotonic() + 10.0
        for d in killed:
            while _alive(d.pid, d.main_class) and time.monotonic() < gone_by:
                time.sleep(0.05)
        kill_orphan_containers(self.workdir)
        return stopped
