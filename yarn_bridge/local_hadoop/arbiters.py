"""The arbiter HA pair beside the local YARN's RM HA (``hadoop up --ha --arbiter-pair``).

Two ``yarn-arbiter serve`` processes (:func:`yarn_bridge.ha_local.start_arbiter_process`,
what the failover tests start) elect their active on the RM pair's own ZooKeeper, under their
own root (:data:`ZK_ROOT`, beside YARN's ``/yarn-leader-election`` and ``/rmstore``), and
serve the GPUs the ResourceManagers report (``--rm-url rm1,rm2``: the YARN bridge runs on the
active one only). They are two more :class:`~yarn_bridge.local_hadoop.processes.Daemon`
records in ``state.json`` (``arb1``, ``arb2``; main "class" :data:`ARBITER_MAIN`, the module
the interpreter runs, so liveness checks the pid as for the JVMs), with ``address`` their
gRPC ``host:port`` and ``webapp`` their HTTP port (``/readyz`` gives the role). Decisions:

* **Shared credentials** (``DIR/arbiter/creds``, 0600: admin, submit and query-service tokens),
  as the pair requires; clients read them from there.
* **Ready means one active and one standby**: ``up`` waits for both roles.
* ``down`` stops the arbiters first (SIGTERM: each closes its ZooKeeper session), then YARN
  and ZooKeeper; ``restart arbN`` starts it again on its ports (it comes back a standby).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from yarn_bridge.local_hadoop.common import HadoopError
from yarn_bridge.local_hadoop.processes import Daemon, _alive, _tail

__all__ = [
    "ARBITER_IDS",
    "ARBITER_MAIN",
    "ZK_ROOT",
    "arbiter_roles",
    "credentials_dir",
    "start_arbiter",
    "wait_roles",
]

ARBITER_MAIN: Final = "yarn_arbiter.cli"
ARBITER_IDS: Final = ("arb1", "arb2")
ZK_ROOT: Final = "/yarn-arbiter/local"
SESSION_TIMEOUT_S: Final = 2.0


def credentials_dir(workdir: Path) -> Path:
    return workdir / "arbiter" / "creds"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def start_arbiter(
    workdir: Path,
    ha_id: str,
    zk_address: str,
    rm_urls: Sequence[str],
    *,
    port: int | None = None,
    metrics_port: int | None = None,
) -> Daemon:
    """Start one member (not waiting for its role); on ``port``/``metrics_port`` if given
    (a restart), else free ones."""
    from yarn_bridge.ha_local import HaPairFiles, start_arbiter_process

    files = HaPairFiles.create(credentials_dir(workdir))
    p = start_arbiter_process(
        workdir / "arbiter", ha_id, zk_address, files, zk_root=ZK_ROOT,
        session_timeout_s=SESSION_TIMEOUT_S, port=port, metrics_port=metrics_port,
        rm_urls=rm_urls, log=workdir / "logs" / f"{ha_id}.log",
    )  # fmt: skip
    # as for the JVMs: wait until the pid runs the module, so liveness never sees a half-start
    deadline = time.monotonic() + 30
    while p.proc.poll() is None and not _alive(p.proc.pid, ARBITER_MAIN):
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return Daemon(
        ha_id, ARBITER_MAIN, p.proc.pid, str(workdir / "arbiter" / ha_id), str(p.log),
        webapp=f"http://127.0.0.1:{p.metrics_port}", address=p.address,
    )  # fmt: skip


def arbiter_roles(daemons: Iterable[Daemon]) -> dict[str, str | None]:
    """``{arb1: "active", arb2: "standby"}`` for the arbiter daemons (None: not answering)."""
    from yarn_bridge.ha_local import role_at

    return {
        d.name: (role_at(_port(d.webapp)) if _alive(d.pid, d.main_class) else None)
        for d in daemons
        if d.main_class == ARBITER_MAIN
    }


def wait_roles(daemons: Sequence[Daemon], want: set[str], timeout_s: float) -> dict:
    """Wait until the arbiters' roles are exactly ``want`` (e.g. ``{"active", "standby"}``);
    HadoopError with their log tails if one exits or time runs out."""
    arbiters = [d for d in daemons if d.main_class == ARBITER_MAIN]
    deadline = time.monotonic() + timeout_s
    while True:
        roles = arbiter_roles(arbiters)
        if sorted(r for r in roles.values() if r) == sorted(want):
            return roles
        for d in arbiters:
            if not _alive(d.pid, d.main_class):
                raise HadoopError(f"arbiter {d.name} exited while waiting for its role; "
                                  f"last lines of {d.log}:\n{_tail(d.log)}")  # fmt: skip
        if time.monotonic() > deadline:
            logs = "".join(f"\n--- {d.log}\n{_tail(d.log, 8)}" for d in arbiters)
            raise HadoopError(f"timed out after {timeout_s:.0f} s waiting for the arbiter pair "
                              f"to be {' + '.join(sorted(want))} (now {roles}){logs}")  # fmt: skip
        time.sleep(0.1)
