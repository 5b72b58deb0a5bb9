"""Stopping a long-running process on SIGTERM/SIGINT without taking a lock in the handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread
happens to be. ``threading.Event.set`` takes the event's internal lock; if the handler runs
while the main thread holds that same lock (inside ``Event.wait``, between taking it and
releasing it to sleep, which is where a server's main thread spends its life), the handler
waits for a lock its own thread holds, and the process never stops (seen once: ``serve`` ignored
SIGTERM for 30 s, the signal having arrived while it started). So the handler here only writes
a byte to a pipe (``os.write`` is async-signal-safe and takes no Python lock), and a daemon
thread that waits on the pipe sets the event.

>>> import os, signal, threading
>>> done = threading.Event()
>>> restore = stop_on_signals(done, (signal.SIGUSR1,))
>>> os.kill(os.getpid(), signal.SIGUSR1)
>>> done.wait(10)
True
>>> restore()
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_on_signals(
    done: threading.Event, signals: Iterable[signal.Signals] = DEFAULT_SIGNALS
) -> Callable[[], None]:
    """Set ``done`` when one of ``signals`` arrives (the handlers take no lock; module
    docstring). Call from the main thread. Returns a function that puts the previous handlers
    back and ends the waiting thread."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # a handler never blocks, even with the pipe full

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):  # the pipe is full (a signal waits) or closed
            os.write(write_fd, b"s")

    def relay() -> None:
        try:
            byte = os.read(read_fd, 1)
        except OSError:
            byte = b""
        if byte == b"s":
            done.set()
        os.close(read_fd)

    sigs = tuple(signals)
    previous = {sig: signal.signal(sig, handler) for sig in sigs}
    thread = threading.Thread(target=relay, name="stop-on-signal", daemon=True)
    thread.start()

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)
        with contextlib.suppress(OSError):  # it already relayed a signal and closed its end
            os.write(write_fd, b"r")  # wakes the relay without setting ``done``
        thread.join(5)
        os.close(write_fd)

    return restore
