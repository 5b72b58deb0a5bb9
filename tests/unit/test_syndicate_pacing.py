"""Rate-limited loopback channels (spec §6.5): the token bucket and the channel rates (the
paced mesh on real sockets is in tests/integration/test_syndicate_paced_mesh.py)."""

from __future__ import annotations

import math

import pytest

from syndicate.dataplane.pacing import Pacer, check_rates, scaled_rates


def test_the_bucket_queues_transfers_and_banks_no_credit() -> None:
    p = Pacer(100.0)
    assert p.reserve(50, now=0.0) == pytest.approx(0.5)
    assert p.reserve(50, now=0.1) == pytest.approx(1.0)  # queued behind the first
    assert p.reserve(0, now=0.2) == pytest.approx(1.0)
    assert p.reserve(10, now=5.0) == pytest.approx(5.1)  # idle meanwhile: no burst
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="rate"):
            Pacer(bad)
    with pytest.raises(ValueError, match="nbytes"):
        p.reserve(-1, now=6.0)


def test_rates_name_known_channels() -> None:
    assert scaled_rates(4e6) == {"gpu": 4e6, "cpu": 1e6}
    assert check_rates(None) == {}
    with pytest.raises(ValueError, match="unknown channel 'nic'"):
        check_rates({"nic": 1e6})
    with pytest.raises(ValueError, match="rate"):
        check_rates({"cpu": -5.0})
