"""Code shared by the tests (not tests itself: no ``test_`` names here).

``tests`` is on ``sys.path`` (``pythonpath = tests`` in ``setup.cfg``), so a test in any
directory under it imports ``from support import wait_for`` or ``from support.sim import ...``.
Fixtures live in ``tests/conftest.py``; this package holds plain helpers:

* here: polling (:func:`wait_for`), draining a queue (:func:`drain`), a free TCP port
  (:func:`free_port`) and a manual clock (:class:`Clock`);
* :mod:`support.arbiter`: the test cluster, admin token and Agents of a served arbiter;
* :mod:`support.sim`: random traces and the simulator's invariant checker;
* :mod:`support.pki`: a throwaway CA with server and client certificates;
* :mod:`support.yarn`: an arbiter served against a real local YARN, lease-AM jobs, RM queries;
* :mod:`support.hive`: running queries and the replanner on a real HiveServer2.
"""

from __future__ import annotations

import queue
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: The repository's root (tests live in tests/unit, tests/integration and tests/engine).
REPO = Path(__file__).resolve().parents[2]


def wait_for(what: str, probe: Callable[[], T], timeout: float = 60.0, every: float = 0.1) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def drain(q: queue.Queue) -> list:
    """Everything waiting in ``q`` now, in order, without blocking."""
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a server started in another process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    """A manual clock: ``clock()`` is ``clock.t``, which only the test (or :meth:`sleep`) moves."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        """A ``sleep`` for code that takes one: the time passes at once."""
        self.t += seconds
