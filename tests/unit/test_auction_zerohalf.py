"""Zero-half cuts (arbiter.auction.zerohalf; Themis §3.3 PA auction, spec B.5 solver): every
cut holds for every 0/1 point the rows allow, and cuts off the LP point it was found at."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.auction.zerohalf import zero_half_cuts


def feasible_points(n: int, rows: list[tuple[int, ...]]):
    for bits in itertools.product((0, 1), repeat=n):
        if all(sum(bits[k] for k in r) <= 1 for r in rows):
            yield np.array(bits, dtype=float)


def test_odd_cycle_of_conflicts() -> None:
    """Three rows pairwise in conflict (x0+x1, x1+x2, x0+x2 <= 1) at x = ½: the cut is the
    triangle x0 + x1 + x2 <= 1."""
    rows = [(0, 1), (1, 2), (0, 2)]
    cuts = zero_half_cuts(rows, np.array([0.5, 0.5, 0.5]))
    assert cuts == [((0, 1, 2), (1, 1, 1), 1)]


def test_integral_point_has_no_cut() -> None:
    rows = [(0, 1), (1, 2), (0, 2), (2, 3)]
    assert zero_half_cuts(rows, np.array([1.0, 0.0, 0.0, 1.0])) == []


def test_odd_cycle_of_cliques() -> None:
    """Five cliques in a cycle, consecutive ones sharing a column, each at ½ on its two shared
    columns (an odd hole over cliques): the cut is the sum of the shared columns <= 2."""
    rows = [(0, 1, 5), (1, 2, 6), (2, 3, 7), (3, 4, 8), (4, 0, 9)]
    values = np.zeros(10)
    values[:5] = 0.5
    cuts = zero_half_cuts(rows, values)
    assert ((0, 1, 2, 3, 4), (1, 1, 1, 1, 1), 2) in cuts


@st.composite
def instances(draw: st.DrawFn) -> tuple[int, list[tuple[int, ...]], np.ndarray]:
    n = draw(st.integers(3, 9))
    rows = draw(
        st.lists(
            st.sets(st.integers(0, n - 1), min_size=2, max_size=4).map(lambda s: tuple(sorted(s))),
            min_size=2,
            max_size=10,
        )
    )
    values = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=n, max_size=n)))
    return n, rows, values


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(instances())
def test_every_cut_is_valid_and_violated(instance) -> None:
    n, rows, values = instance
    for cols, coef, rhs in zero_half_cuts(rows, values):
        assert all(c >= 1 for c in coef) and rhs >= 0
        assert float(np.dot(values[list(cols)], coef)) > rhs
        for x in feasible_points(n, rows):
            assert float(np.dot(x[list(cols)], coef)) <= rhs + 1e-9, (cols, coef, rhs, x)
