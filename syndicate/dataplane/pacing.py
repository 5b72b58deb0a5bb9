"""Rate-limited channels for the loopback data plane (spec §6.5, "Channels"; thesis T:1764,
T:1804 for the two channels).

On one machine every rank's sockets run at loopback speed and the two channels, ``gpu``
(NVLink + GPUDirect RDMA) and ``cpu`` (PCIe + TCP over the host NICs), contend for the same
cores, so neither the channels' bandwidth ratio nor the gain of running them side by side
(comm-comm overlap, thesis T:1764-1769) would show. The spec's remedy: a user-space token
bucket per (rank, channel, direction) emulating a scaled 150 : 12.5 : 3.125 ratio.

:class:`Pacer` is one such bucket, kept as a virtual clock: a transfer of ``n`` bytes occupies
the channel for ``n / rate`` seconds from when it is free, so back-to-back transfers queue and
an idle channel does not bank credit (a bucket of depth zero, which is what a link is). The
mesh (:mod:`syndicate.dataplane.mesh`) holds one pacer per channel per direction: a send waits
out its egress slot before it leaves; a received payload's ingress slot is booked as if it
began with the egress slot (a link carries a transfer through both ends at once), so it is
delayed only when several senders converge on one receiver (incast) and queue at its ingress.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

__all__ = ["CHANNELS", "Pacer", "check_rates", "scaled_rates"]

CHANNELS = ("gpu", "cpu")


class Pacer:
    """One (rank, channel, direction) token bucket at ``rate`` bytes per second.

    >>> p = Pacer(1000.0)
    >>> p.reserve(500, now=10.0)    # an idle channel: the transfer ends 0.5 s from now
    10.5
    >>> p.reserve(1000, now=10.2)   # queued behind it
    11.5
    >>> p.reserve(100, now=20.0)    # idle again: no credit was banked meanwhile
    20.1
    """

    def __init__(self, rate: float) -> None:
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"a channel rate must be a finite number of bytes/s > 0, got {rate}")
        self.rate = rate
        self._free = -math.inf
        self._lock = threading.Lock()

    def reserve(self, nbytes: int, now: float) -> float:
        """Book ``nbytes`` on the channel at time ``now``; returns when the transfer ends."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        with self._lock:
            end = max(now, self._free) + nbytes / self.rate
            self._free = end
            return end


def check_rates(rates: Mapping[str, float] | None) -> dict[str, float]:
    """``rates`` (channel -> bytes/s) checked: known channels, finite positive rates."""
    out = dict(rates or {})
    for ch, r in out.items():
        if ch not in CHANNELS:
            raise ValueError(f"unknown channel {ch!r} (channels: {', '.join(CHANNELS)})")
        Pacer(r)  # validates the rate
    return out


def scaled_rates(gpu_bytes_per_s: float) -> dict[str, float]:
    """The testbed's scale-out ratio (spec §5.1): a GPU's RoCE NIC (12.5 GB/s, ``gpu``) against
    its share of the host NICs (3.125 GB/s, ``cpu``), scaled so ``gpu`` runs at
    ``gpu_bytes_per_s``.

    >>> scaled_rates(40e6)
    {'gpu': 40000000.0, 'cpu': 10000000.0}
    """
    return check_rates({"gpu": gpu_bytes_per_s, "cpu": gpu_bytes_per_s * 3.125 / 12.5})
