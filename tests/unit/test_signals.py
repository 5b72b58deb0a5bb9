"""Stopping on a signal without a lock in the handler (:mod:`arbiter.signals`)."""

from __future__ import annotations

import os
import signal
import threading

from arbiter.signals import stop_on_signals


def test_a_signal_while_the_main_thread_holds_the_events_lock_still_stops() -> None:
    """The deadlock a handler calling ``done.set()`` has: the signal's handler runs while the
    main thread is inside ``Event.wait`` holding the event's lock. Here the main thread holds
    that lock on purpose when the signal arrives; the handler must return (a handler that took
    the lock would hang this test), and the event is set once the lock is free."""
    done = threading.Event()
    restore = stop_on_signals(done, (signal.SIGUSR1,))
    try:
        with done._cond:  # what Event.wait holds between its bytecodes
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):  # bytecodes: the handler runs among them, in this thread
                pass
        assert done.wait(10)
    finally:
        restore()


def test_restore_puts_the_old_handler_back_and_sets_nothing() -> None:
    seen: list[int] = []
    old = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        done = threading.Event()
        restore = stop_on_signals(done, (signal.SIGUSR2,))
        restore()
        assert not done.is_set()
        os.kill(os.getpid(), signal.SIGUSR2)
        for _ in range(1000):
            pass
        assert seen == [signal.SIGUSR2] and not done.is_set()
    finally:
        signal.signal(signal.SIGUSR2, old)
