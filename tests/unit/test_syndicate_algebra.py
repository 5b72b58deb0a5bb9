"""Syndicate's motif algebra (seed 000 §4.3, App. C; spec §2, checkable facts F1-F6)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from syndicate.motifs import MAX_CHAINS, CommOp, ExecOption, execute, expand, flows, reference

RNG = np.random.default_rng(20260)


def _ar_options(n: int) -> list[ExecOption]:
    return [ExecOption("ring", s) for s in (1, 2, 3, 4)] + [
        ExecOption("tree", s, tree_n=f) for s in (1, 2) for f in (2, 3, 4, 8)
    ]


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_f1_all_reduce_rules_equal_the_reference_ints_exact(n: int) -> None:
    for _ in range(3):
        d = int(RNG.integers(1, 50))
        op = CommOp("ar", "AR", d, n)
        xs = [RNG.integers(-1000, 1000, d) for _ in range(n)]
        for opt in _ar_options(n):
            got = execute(op, expand(op, opt), xs)
            for a, b in zip(got, reference(op, xs), strict=True):
                np.testing.assert_array_equal(a, b, err_msg=f"{opt}")


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_f1_all_reduce_floats_within_1e6(n: int) -> None:
    op = CommOp("ar", "AR", 37, n)
    xs = [RNG.standard_normal(37) for _ in range(n)]
    for opt in _ar_options(n):
        for a, b in zip(execute(op, expand(op, opt), xs), reference(op, xs), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_f1_all_to_all_rules_equal_the_reference(n: int) -> None:
    d = int(RNG.integers(1, 20))
    op = CommOp("aa", "AA", d, n)
    xs = [RNG.integers(0, 10_000, (n, d)) for _ in range(n)]
    for ways in (k for k in (1, 2, 4, 8, 16) if n % k == 0):
        for seg in (1, 2, 3):
            if ways * seg > MAX_CHAINS:
                continue
            got = execute(op, expand(op, ExecOption("aa", seg, ways)), xs)
            for a, b in zip(got, reference(op, xs), strict=True):
                np.testing.assert_array_equal(a, b)


def test_f2_motif_counts() -> None:
    aa = CommOp("aa", "AA", 10, 8)
    for seg in (1, 2, 3, 4):
        for ways in (1, 2, 4):
            n_motifs = len(expand(aa, ExecOption("aa", seg, ways)))
            assert n_motifs == math.ceil(10 / math.ceil(10 / seg)) * ways
    # k-way <=> n = N / k destinations per motif; N = 128 at 4-way gives 32 (T:1797).
    big = CommOp("aa", "AA", 1, 128)
    for m in expand(big, ExecOption("aa", 1, 4)):
        out_degree = Counter(t.src for t in m.transfers)
        assert set(out_degree.values()) == {32}
    # Ragged segments (Gap 2.1b): D = 10 at d = ceil(10/3) = 4 gives 4 + 4 + 2.
    m = expand(CommOp("aa", "AA", 10, 2), ExecOption("aa", 3, 1))
    assert [t.hi - t.lo for t in (mm.transfers[0] for mm in m)] == [4, 4, 2]


def test_f3_splined_all_to_all_degrees_and_cover() -> None:
    for n, ways in [(4, 4), (8, 4), (8, 2), (16, 8), (12, 3)]:
        op = CommOp("aa", "AA", 3, n)
        motifs = expand(op, ExecOption("aa", 1, ways))
        pairs: Counter[tuple[int, int]] = Counter()
        for m in motifs:
            outd = Counter(t.src for t in m.transfers)
            ind = Counter(t.dst for t in m.transfers)
            assert set(outd.values()) == {n // ways} == set(ind.values())
            assert len(outd) == len(ind) == n
            pairs.update((t.src, t.dst) for t in m.transfers)
        assert len(pairs) == n * n and set(pairs.values()) == {1}


def test_f4_four_rank_ring() -> None:
    op = CommOp("ar", "AR", 4, 4)
    rs, ag = expand(op, ExecOption("ring"))
    assert (rs.kind, ag.kind, ag.deps) == ("RS", "AG", (rs.id,))
    assert rs.rounds == ag.rounds == 3  # N - 1 rounds per phase (E1)
    assert all(t.dst == (t.src - 1) % 4 for t in rs.transfers)  # towards P_{i-1}
    # After RS, P_j holds the fully reduced piece (j - 1) mod 4 (spec W1).
    xs = [np.array([10**k] * 4) for k in range(4)]  # distinct powers: a full sum is 1111
    after_rs = execute(op, [rs], xs)
    for j in range(4):
        assert after_rs[j][(j - 1) % 4] == 1111
    # Each rank sends 2 (N - 1) D / N = 1.5 D elements.
    d = 400
    big = CommOp("ar", "AR", d, 4)
    sent = Counter()
    for m in expand(big, ExecOption("ring")):
        for (s, _), b in flows(m).items():
            sent[s] += b // big.elem_bytes
    assert set(sent.values()) == {1.5 * d}


def test_f5_four_rank_tree_stages_and_crossover() -> None:
    op = CommOp("ar", "AR", 8, 4)
    motifs = expand(op, ExecOption("tree", tree_n=2))
    assert [m.kind for m in motifs] == ["RE", "RE", "BC", "BC"]  # 4 sequential stages (W2)
    assert [len(m.deps) for m in motifs] == [0, 1, 1, 1]
    assert {(t.src, t.dst) for t in motifs[0].transfers} == {(1, 0), (3, 2)}
    assert {(t.src, t.dst) for t in motifs[1].transfers} == {(2, 0)}

    # Under α-β: tree 4 (α + D/B) < ring 6 α + 1.5 D/B  <=>  D < 0.8 α B.
    alpha, bw = 10e-6, 12.5e9

    def tree(d: float) -> float:
        return 4 * (alpha + d / bw)

    def ring(d: float) -> float:
        return 6 * alpha + 1.5 * d / bw

    edge = 0.8 * alpha * bw
    assert edge == pytest.approx(100e3)
    assert tree(0.99 * edge) < ring(0.99 * edge) and tree(1.01 * edge) > ring(1.01 * edge)


def test_f6_unmodified_collective_is_one_motif() -> None:
    op = CommOp("aa", "AA", 5, 8)
    assert len(expand(op, ExecOption("aa", 1, 1))) == 1


def test_w3_four_way_splined_motifs_are_cyclic_shifts() -> None:
    op = CommOp("aa", "AA", 1, 4)
    motifs = expand(op, ExecOption("aa", 1, 4))
    shifts = [{(t.dst - t.src) % 4 for t in m.transfers} for m in motifs]
    assert shifts == [{0}, {1}, {2}, {3}]
    assert len(expand(op, ExecOption("aa", 2, 4))) == 4  # D = 1 leaves one segment
    assert len(expand(CommOp("aa", "AA", 2, 4), ExecOption("aa", 2, 4))) == 8  # R1∘R2


@pytest.mark.parametrize(
    ("op", "opt", "message"),
    [
        (CommOp("aa", "AA", 4, 6), ExecOption("aa", 1, 4), "ways | N"),
        (CommOp("ar", "AR", 4, 4), ExecOption("aa"), "does not apply"),
    ],
)
def test_bad_options_are_refused(op: CommOp, opt: ExecOption, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand(op, opt)


def test_bad_option_values_are_refused() -> None:
    with pytest.raises(ValueError, match="more than 16"):
        ExecOption("aa", 4, 8)
    with pytest.raises(ValueError, match="channel"):
        ExecOption("ring", channel="nvlink")
    with pytest.raises(ValueError, match="kind"):
        CommOp("x", "BC", 1, 2)


def test_motifs_run_out_of_dependency_order_are_refused() -> None:
    op = CommOp("ar", "AR", 4, 4)
    rs, ag = expand(op, ExecOption("ring"))
    with pytest.raises(ValueError, match="before its deps"):
        execute(op, [ag, rs], [np.zeros(4)] * 4)
