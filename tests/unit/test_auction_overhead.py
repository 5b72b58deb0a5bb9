"""The auction's Python overhead cut without changing a decision: the cyclic
collector paused while an auction runs and restored after it, and the conflict components
against a plain graph search."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Iterator

import pytest

from arbiter.auction import Bid, partial_allocation
from arbiter.auction.formulation import _components, _prepare
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance

EMPTY: frozenset[str] = frozenset()


@pytest.fixture
def collector_on() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.enable()
    yield
    if not was_on:
        gc.disable()


def _bids() -> tuple[list[Bid], frozenset[str]]:
    g = frozenset({"g0", "g1"})
    bids = [
        Bid("a", {EMPTY: 4.0, frozenset({"g0"}): 2.0, g: 1.0}),
        Bid("b", {EMPTY: 3.0, frozenset({"g1"}): 1.5, g: 1.2}),
    ]
    return bids, g


def test_collector_is_off_during_the_auction_and_on_after(collector_on: None) -> None:
    seen: list[bool] = []

    def clock() -> float:  # read by the auction while it solves (time_budget)
        seen.append(gc.isenabled())
        return 0.0

    bids, offered = _bids()
    r = partial_allocation(bids, offered, time_budget=10.0, clock=clock)
    assert r.pf_allocation
    assert seen and not any(seen)
    assert gc.isenabled()


def test_collector_left_off_when_it_was_off(collector_on: None) -> None:
    bids, offered = _bids()
    gc.disable()
    partial_allocation(bids, offered)
    assert not gc.isenabled()


def test_collector_back_on_after_bad_input(collector_on: None) -> None:
    bids = [Bid("a", {EMPTY: 2.0, frozenset({"gX"}): 1.0})]
    with pytest.raises(ValueError, match="not offered"):
        partial_allocation(bids, frozenset({"g0"}))
    assert gc.isenabled()


def test_concurrent_auctions_restore_the_collector(collector_on: None) -> None:
    cluster = load_cluster("themis-sim-256")
    cases = [random_instance(cluster, 16, 64, 16, seed=s) for s in range(6)]
    alone = [partial_allocation(b, o).c for b, o in cases]
    out: dict[int, dict[str, float]] = {}

    def run(k: int) -> None:
        out[k] = partial_allocation(*cases[k]).c

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [out[k] for k in range(len(cases))] == alone
    assert gc.isenabled()


def _plain_components(apps) -> list[list[int]]:
    """Breadth-first search of the conflict graph, components ordered by their first app."""
    gpus = [set().union(*(g for g, _ in app.rows)) for app in apps]
    seen: set[int] = set()
    out = []
    for a in range(len(apps)):
        if a in seen:
            continue
        comp, todo = {a}, [a]
        while todo:
            x = todo.pop()
            for y in range(len(apps)):
                if y not in comp and gpus[x] & gpus[y]:
                    comp.add(y)
                    todo.append(y)
        seen |= comp
        out.append(sorted(comp))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_components_match_a_plain_graph_search(seed: int) -> None:
    rnd = random.Random(seed)
    gpus = [f"g{k}" for k in range(rnd.randint(1, 24))]
    bids = []
    for n in range(rnd.randint(0, 12)):
        rows = {EMPTY: rnd.choice([2.0, 5.0, float("inf")])}
        for _ in range(rnd.randint(0, 4)):
            rows[frozenset(rnd.sample(gpus, rnd.randint(1, min(3, len(gpus)))))] = rnd.uniform(
                0.5, 1.9
            )
        bids.append(Bid(f"app{n}", rows))
    apps = _prepare(bids, frozenset(gpus))
    assert _components(apps) == _plain_components(apps)
