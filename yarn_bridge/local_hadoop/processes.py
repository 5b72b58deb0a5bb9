"""The local Hadoop's daemon processes, seen from outside: free loopback ports, the records of
what runs (:class:`Daemon`, :class:`ClusterState`, the work dir's ``state.json``), liveness (a
pid counts only while it still runs the expected main class), a ResourceManager's HA state
(``GET /ws/v1/cluster/info``: ``haState`` of a STARTED RM), waiting for readiness with a
daemon's log tail when it dies, and killing YARN container processes that outlived their
NodeManager (DefaultContainerExecutor starts each container in its own session)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import psutil

from arbiter.localhost import PortPool
from yarn_bridge.local_hadoop.common import HadoopError
from yarn_bridge.rm.errors import RMError

__all__ = ["ClusterState", "Daemon", "PortPool", "kill_orphan_containers", "port_busy"]


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
    address: str = ""  # arbiters (arb1, arb2): their gRPC host:port


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
    # Kerberos (``up --kerberos``): the realm's krb5.conf, the client principal and its keytab
    krb5_conf: str = ""
    principal: str = ""
    keytab: str = ""

    @property
    def rm_url(self) -> str:
        return self.rm_urls[0]

    @property
    def arbiter_addresses(self) -> str:
        """The arbiter pair's gRPC addresses, ``a:1,b:2`` (empty: no pair), what Agents,
        ``submit --arbiter`` and ``qoop-hive --arbiter`` take."""
        return ",".join(d.address for d in self.daemons if d.address)

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


# (method, url) -> headers: SPNEGO on a Kerberized cluster (yarn_bridge.rm.AuthHook's shape)
Headers = Callable[[str, str], Mapping[str, str]]


def _rm_get(url: str, auth: Headers | None = None) -> httpx.Response:
    """``GET url`` with ``auth``'s headers (none: an unsecured cluster)."""
    headers = dict(auth("GET", url)) if auth is not None else {}
    return httpx.get(url, timeout=2.0, follow_redirects=False, headers=headers)


def _rm_state(url: str, auth: Headers | None = None) -> str | None:
    """``ACTIVE`` or ``STANDBY`` (a started RM's HA state), else ``None`` (not answering)."""
    try:
        r = _rm_get(f"{url}/ws/v1/cluster/info", auth)
        info = r.json()["clusterInfo"]
    except (httpx.HTTPError, ValueError, KeyError, RMError):
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
