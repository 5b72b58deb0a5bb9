"""Code shared by the tests (not tests itself: no ``test_`` names here).

``tests`` is on ``sys.path`` (``pythonpath = tests`` in ``setup.cfg``), so a test in any
directory under it imports ``from support import wait_for`` or ``from support.sim import ...``.
Fixtures live in ``tests/conftest.py``; this package holds plain helpers:

* here: polling (:func:`wait_for`), draining a queue (:func:`drain`), a free TCP port
  (:func:`free_port`, from :mod:`arbiter.localhost`) and a manual clock (:class:`Clock`);
* :mod:`support.arbiter`: the test cluster, admin token and Agents of a served arbiter;
* :mod:`support.sim`: random traces and the simulator's invariant checker;
* :mod:`support.pki`: a throwaway CA with server and client certificates;
* :mod:`support.yarn`: an arbiter served against a real local YARN, lease-AM jobs, RM queries;
* :mod:`support.hive`: running queries and the replanner on a real HiveServer2.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from arbiter.localhost import free_port, wait_until

__all__ = ["REPO", "Clock", "drain", "free_port", "wait_for"]

T = TypeVar("T")

#: The repository's root (tests live in tests/unit, tests/integration and tests/engine).
REPO = Path(__file__).resolve().parents[2]


def wait_for(what: str, probe: Callable[[], T], timeout: float = 60.0, every: float = 0.1) -> T:
    """Poll ``probe`` until it returns something truthy; fail (AssertionError) naming ``what``
    on timeout (:func:`arbiter.localhost.wait_until`)."""
    return wait_until(what, probe, timeout, every, error=AssertionError)


def drain(q: queue.Queue) -> list:
    """Everything waiting in ``q`` now, in order, without blocking."""
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


class Clock:
    """A manual clock: ``clock()`` is ``clock.t``, which only the test (or :meth:`sleep`) moves."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        """A ``sleep`` for code that takes one: the time passes at once."""
        self.t += seconds
