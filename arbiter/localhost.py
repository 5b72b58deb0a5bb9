"""Free loopback ports and waiting on a condition: the one implementation behind the launchers
(local Hadoop, the Spark engine, the arbiter HA pair, Syndicate's data plane), the tests and the
benchmarks, which start servers in other processes on 127.0.0.1 and wait for them.

No seed section: plumbing. It lives in ``arbiter`` because every other package of the project
may import ``arbiter`` (``tests/unit/test_layering.py``) and this module imports nothing of the
project.

A port is "free" when binding port 0 hands it out; it stays free only until someone else binds
it. A port chosen with its socket closed at once may be handed out again by the next bind, so
several ports for one job come from one :class:`PortPool` (or :func:`free_ports`), which holds
every socket bound until all are chosen.

>>> a, b, c = free_ports(3)
>>> len({a, b, c}) == 3 and all(1024 <= p < 65536 for p in (a, b, c))
True
>>> wait_until("the answer", lambda: 42, timeout=1)
42
>>> wait_until("nothing", lambda: 0, timeout=0, every=0)
Traceback (most recent call last):
    ...
TimeoutError: timed out after 0 s waiting for nothing
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["LOOPBACK", "PortPool", "free_port", "free_ports", "wait_until"]

T = TypeVar("T")

LOOPBACK = "127.0.0.1"


class PortPool:
    """Free ports on ``host``, never the same one twice in one pool: each is held bound until
    :meth:`release`, so the kernel cannot hand it out again meanwhile."""

    def __init__(self, host: str = LOOPBACK) -> None:
        self.host = host
        self._held: list[socket.socket] = []

    def take(self) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.host, 0))
        except OSError:
            s.close()
            raise
        self._held.append(s)
        return int(s.getsockname()[1])

    def release(self) -> None:
        for s in self._held:
            s.close()
        self._held.clear()


def free_ports(n: int, host: str = LOOPBACK) -> list[int]:
    """``n`` distinct ports free on ``host`` now (for listeners started in other processes).
    All ``n`` sockets stay bound until every port is chosen: ports chosen one at a time, each
    socket closed before the next bind, can repeat, and two listeners then fail to bind the
    same port."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pool = PortPool(host)
    try:
        return [pool.take() for _ in range(n)]
    finally:
        pool.release()


def free_port(host: str = LOOPBACK) -> int:
    """A port on ``host`` that nobody listens on right now (for one server in another process;
    several for one job: :func:`free_ports`)."""
    return free_ports(1, host)[0]


def wait_until(
    what: str,
    probe: Callable[[], T],
    timeout: float = 60.0,
    every: float = 0.1,
    error: Callable[[str], BaseException] = TimeoutError,
) -> T:
    """Call ``probe`` every ``every`` seconds until it returns something truthy, and return
    that; after ``timeout`` seconds raise ``error(message)`` naming ``what`` (``TimeoutError``
    by default; the tests pass ``AssertionError``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
