"""Rate-limited loopback channels (spec §6.5) on real sockets: a paced mesh of two ranks (one
process, two threads) whose transfers cannot beat their channel's rate."""

from __future__ import annotations

import threading
import time

import numpy as np
from support import free_port

from syndicate.dataplane.mesh import Mesh


def _pair(rates: dict[str, float]) -> tuple[Mesh, Mesh]:
    ports = [free_port(), free_port()]
    box: dict[int, Mesh] = {}
    t = threading.Thread(target=lambda: box.__setitem__(1, Mesh(1, ports, rates=rates)))
    t.start()
    box[0] = Mesh(0, ports, rates=rates)
    t.join(30)
    return box[0], box[1]


def test_a_paced_channel_cannot_beat_its_rate() -> None:
    """200 KB on a 1 MB/s channel takes at least 0.2 s however idle the machine is; the other
    channel and unpaced sends are not held behind it."""
    a, b = _pair({"cpu": 1e6, "gpu": 1e9})
    try:
        x = np.arange(25_000, dtype=np.int64)  # 200 kB
        t0 = time.monotonic()
        a.send(1, "slow", x, "cpu")
        assert np.array_equal(b.recv(0, "slow", timeout=30), x)
        assert time.monotonic() - t0 >= x.nbytes / 1e6
        # two back-to-back sends on the channel queue: the second ends >= 2 slots later
        t0 = time.monotonic()
        a.send(1, "s1", x, "cpu")
        a.send(1, "s2", x, "cpu")
        b.recv(0, "s2", timeout=30)
        assert time.monotonic() - t0 >= 2 * x.nbytes / 1e6
        # the receiver's ingress: a payload that arrives while its slot is booked waits
        assert b._ingress["cpu"].reserve(0, time.monotonic()) >= t0 + 2 * x.nbytes / 1e6 - 1e-6
        y = np.ones(10, dtype=np.int64)
        b.send(0, "ctl-like", y)  # no channel: not paced
        assert np.array_equal(a.recv(1, "ctl-like", timeout=30), y)
    finally:
        a.close()
        b.close()
