"""The ``-i`` solves shared with a forked child (arbiter.auction.split; Themis §3.3, Pseudocode 1;
spec B.5).

Every task must be answered exactly once whatever the child does (answers, dies, raises), the
parent must never leave a child behind, and the auction must give the same answers with and
without the fork.
"""

from __future__ import annotations

import math
import os
import signal
import threading

import pytest

from arbiter.auction import Solver, partial_allocation, split
from arbiter.auction import payments as auction_payments
from arbiter.auction.split import can_fork, share
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance


@pytest.fixture(autouse=True)
def enabled():  # type: ignore[no-untyped-def]
    """Forking on for each test (the arbiter's auction worker turns it on), whatever the
    machine's load."""
    split.enable(when_idle=False)
    yield
    split.enable(False)


pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two CPUs"
)


FORKED: list[int] = []


@pytest.fixture(autouse=True)
def forked(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Record the pid of every child forked during a test."""
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            FORKED.append(pid)
        return pid

    FORKED.clear()
    monkeypatch.setattr(os, "fork", fork)
    yield


def _no_children_left() -> bool:
    """Every child forked in this test has been reaped."""
    for pid in FORKED:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return bool(FORKED)


def test_every_task_answered_once_by_one_of_two_processes() -> None:
    parent = os.getpid()
    shared = share(
        200,
        lambda n: ("here", os.getpid(), n * n),
        lambda n: ("there", os.getpid(), n * n),
        lambda: os.getpid(),
    )
    assert set(shared.here) | set(shared.there) == set(range(200))
    assert not set(shared.here) & set(shared.there)
    for n, (where, pid, square) in {**shared.here, **shared.there}.items():
        assert square == n * n
        assert (where == "here") == (pid == parent)
    assert shared.tally is not None and shared.tally != parent  # the child's pid
    assert _no_children_left()


@pytest.mark.parametrize("how", ["exit", "raise", "unpicklable"])
def test_a_failed_child_leaves_its_tasks_to_the_parent(how: str) -> None:
    # The parent's first task waits until the child has taken one (no timing assumption).
    took_r, took_w = os.pipe()
    waited: list[int] = []

    def here(n: int) -> int:
        if not waited:
            waited.append(n)
            assert os.read(took_r, 1) == b"x"
        return n + 1

    def there(n: int) -> object:
        os.write(took_w, b"x")
        if how == "exit":
            os._exit(3)
        if how == "raise":
            raise RuntimeError("child failed")
        return threading.Lock()  # cannot be pickled

    try:
        shared = share(50, here, there, lambda: "tally")
    finally:
        os.close(took_r)
        os.close(took_w)
    assert shared.there == {} and shared.tally is None
    assert shared.here == {n: n + 1 for n in range(50)}
    assert _no_children_left()


def test_answers_arrive_when_children_are_reaped_automatically() -> None:
    """With SIGCHLD ignored the kernel reaps the child itself (waitpid then fails): its
    answers still count."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        shared = share(100, lambda n: -n, lambda n: -n, lambda: "tally")
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert {**shared.here, **shared.there} == {n: -n for n in range(100)}
    assert shared.tally == "tally" or not shared.there


def test_a_failure_in_the_parent_kills_and_reaps_the_child() -> None:
    def here(n: int) -> int:
        raise ValueError("parent failed")

    with pytest.raises(ValueError, match="parent failed"):
        share(10, here, lambda n: n, lambda: None)
    assert _no_children_left()


def test_no_fork_without_an_idle_core(monkeypatch: pytest.MonkeyPatch) -> None:
    cpus = os.cpu_count() or 1
    split.enable()  # as the auction worker: only when a core is idle
    monkeypatch.setattr(os, "getloadavg", lambda: (cpus + 3.0, 1.0, 1.0))
    assert not can_fork()
    monkeypatch.setattr(os, "getloadavg", lambda: (cpus - 1.0, 9.0, 9.0))
    assert can_fork()


def test_task_count_is_checked() -> None:
    with pytest.raises(ValueError, match="tasks"):
        share(0, lambda n: n, lambda n: n, lambda: None)


def test_no_fork_while_another_thread_runs() -> None:
    seen: list[bool] = []
    inner = threading.Thread(target=lambda: seen.append(can_fork()))
    inner.start()
    inner.join()
    assert seen == [False]  # not the main thread
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork()  # the main thread, but not the only one
    finally:
        stop.set()
        other.join()
    assert can_fork()
    split.enable(False)
    assert not can_fork()  # not enabled: the simulator, replays and tests solve in-process


def test_auction_with_and_without_the_fork_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 x 256 x 32 benchmark instance whose ``-i`` solves are shared with a child: the same
    PF allocation and the same optimum of every market without one app as solved in one
    process."""
    cluster = load_cluster("themis-sim-256")
    bids, offered = random_instance(cluster, 64, 256, 32, seed=26012)
    forks = []
    real_share = auction_payments.share

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        forks.append(args[0])
        return real_share(*args, **kwargs)

    monkeypatch.setattr(auction_payments, "share", counted)
    split = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert forks and forks[0] >= 8  # the -i solves were shared
    monkeypatch.setattr(auction_payments, "can_fork", lambda: False)
    alone = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert len(forks) == 1
    assert split.pf_rho == alone.pf_rho
    assert split.value_without.keys() == alone.value_without.keys()
    for app, value in alone.value_without.items():
        assert math.isclose(split.value_without[app], value, abs_tol=2e-4)
    assert _no_children_left()
