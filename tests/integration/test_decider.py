"""The auction worker process (arbiter.decider): same outcomes as solving in-thread, errors
raised as the inline call raises them, a dead worker restarted, and no orphan left behind when
the arbiter is killed."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pytest

from arbiter.auction import PAYMENT_GAP, Bid
from arbiter.cluster import shorthand_cluster
from arbiter.decider import ProcessDecider, decide_inline
from arbiter.policies.base import CallForBids, Snapshot
from arbiter.policies.themis import Themis, ThemisState
from arbiter.rounds import ArbiterState

CLUSTER = shorthand_cluster("nodes:1:8")


def _round(seed: int, **knobs) -> tuple[Themis, Snapshot]:
    """Themis's auction step with random bids for every GPU of one machine."""
    rng = random.Random(seed)
    gpus = CLUSTER.gpu_ids
    apps = tuple(f"app{i}" for i in range(rng.randint(2, 6)))
    bids = {}
    for a in apps:
        rows = {frozenset(): rng.uniform(2, 8)}
        for _ in range(3):
            n = rng.randint(1, 4)
            rows[frozenset(rng.sample(sorted(gpus), n))] = rng.uniform(0.5, 2) / n
        bids[a] = Bid(a, rows)
    call = CallForBids(1, gpus, apps, (), 30.0)
    snapshot = Snapshot(100.0, CLUSTER, (), ThemisState(call), book=ArbiterState(gpus),
                        demand=dict.fromkeys(apps, 4), bids=bids)  # fmt: skip
    return Themis(lease_s=30.0, seed=seed, **knobs), snapshot


def _granted(decision):
    return decision.outcome.granted


@pytest.fixture(scope="module")
def decider():
    d = ProcessDecider()
    yield d
    d.close()


def test_worker_gives_the_inline_outcome(decider: ProcessDecider) -> None:
    assert decider.worker_pid not in (None, os.getpid())
    for seed in range(10):
        policy, snapshot = _round(seed)
        remote = decider(policy, snapshot)
        local = decide_inline(policy, snapshot)
        assert remote.outcome.granted == local.outcome.granted
        assert remote.outcome.result.c == pytest.approx(local.outcome.result.c)
        assert remote.policy_state == local.policy_state  # read-only mappings survive the trip


def test_a_bad_round_raises_like_inline(decider: ProcessDecider) -> None:
    policy, snapshot = _round(1)
    policy = replace(policy, payment_gap=0.5)  # outside [0, 0.1]: the auction refuses it
    with pytest.raises(ValueError, match="payment_gap"):
        decide_inline(policy, snapshot)
    with pytest.raises(ValueError, match="payment_gap"):
        decider(policy, snapshot)
    policy, snapshot = _round(2)  # the worker is still there
    assert _granted(decider(policy, snapshot)) == _granted(decide_inline(policy, snapshot))


def test_dead_worker_is_restarted(decider: ProcessDecider) -> None:
    old = decider.worker_pid
    os.kill(old, signal.SIGKILL)
    time.sleep(0.2)
    policy, snapshot = _round(3)
    decision = decider(policy, snapshot)  # solved in-thread while the worker restarts
    assert _granted(decision) == _granted(decide_inline(policy, snapshot))
    assert decider.restarts == 1 and decider.worker_pid not in (None, old)
    policy, snapshot = _round(4)
    assert _granted(decider(policy, snapshot)) == _granted(decide_inline(policy, snapshot))


def test_closed_decider_solves_inline() -> None:
    d = ProcessDecider()
    pid = d.worker_pid
    d.close()
    d.close()  # idempotent
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
    policy, snapshot = _round(5)
    assert _granted(d(policy, snapshot)) == _granted(decide_inline(policy, snapshot))


def test_worker_exits_when_the_arbiter_is_killed(tmp_path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from arbiter.decider import ProcessDecider
            if __name__ == "__main__":
                d = ProcessDecider()
                print(d.worker_pid, flush=True)
                time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        os.kill(worker, 0)  # alive
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the auction worker outlived its SIGKILLed parent")
    finally:
        parent.kill()
        parent.wait()


def test_core_passes_the_auction_knobs_to_the_decider(tmp_path) -> None:
    """``arbiter.auction.payment-gap`` and ``arbiter.auction.time-budget.seconds`` reach every
    round's auction (the policy's knobs; 0 = no budget), and an admin change applies to the
    next round."""
    from arbiter.cluster import load_cluster
    from arbiter.config import load_config
    from arbiter.core import ArbiterCore, Offer
    from arbiter.journal import SQLiteJournal

    t = [100.0]
    seen: list[dict] = []

    def recording(policy, snapshot):
        seen.append({"payment_gap": policy.payment_gap, "time_budget": policy.time_budget})
        return decide_inline(policy, snapshot)

    env = {
        "ARBITER_OFFER_BATCH_WINDOW_SECONDS": "0",
        "ARBITER_LEASE_SECONDS": "10",
        "ARBITER_AUCTION_PAYMENT_GAP": "0.01",
        "ARBITER_AUCTION_TIME_BUDGET_SECONDS": "0.25",
    }
    core = ArbiterCore(
        load_cluster("nodes:1:4"),
        load_config(environ=env),
        SQLiteJournal(tmp_path / "j.db"),
        admin_token="adm",
        clock=lambda: t[0],
        decider=recording,
    )
    app, _ = core.register_app(app_name="a", user="u", queue_name="", max_gpu_demand=2)
    q = core.open_session(app)

    def one_round() -> dict:
        core.tick()
        offers = []
        while not q.empty():
            m = q.get_nowait()
            if isinstance(m, Offer):
                offers.append(m)
        assert offers, "no offer was sent"
        gpus = sorted(offers[-1].gpus)[:1]
        core.submit_bid(app, offers[-1].round, Bid(app, {frozenset(): 4.0, frozenset(gpus): 2.0}))
        core.tick()
        return seen[-1]

    first = one_round()
    assert first["payment_gap"] == 0.01 and first["time_budget"] == 0.25
    core.set_knob("arbiter.auction.time-budget.seconds", "0")
    t[0] += 20.0  # the lease ends: its GPUs are offered again
    second = one_round()
    assert second["time_budget"] is None


def test_worker_solves_a_large_round_like_inline(decider: ProcessDecider) -> None:
    """A 64-app round on 256 GPUs (the auction benchmark's tail instance 26012, MILP fallbacks
    on the worker's threads): the worker's outcome is the in-thread one."""
    from arbiter.cluster import load_cluster
    from arbiter.synthetic import random_instance

    cluster = load_cluster("themis-sim-256")
    bids, offered = random_instance(cluster, 64, 256, 32, seed=26012)
    apps = tuple(b.app_id for b in bids)
    call = CallForBids(1, offered, apps, (), 30.0)
    book = ArbiterState(cluster.gpu_ids)
    bid_of = {b.app_id: b for b in bids}
    snapshot = Snapshot(100.0, cluster, (), ThemisState(call), book=book,
                        demand=dict.fromkeys(apps, 8), bids=bid_of)  # fmt: skip
    policy = Themis(lease_s=30.0, seed=1)
    remote = decider(policy, snapshot).outcome.result
    local = decide_inline(policy, snapshot).outcome.result
    # The same PF value and the same optimum of each market without one app, within the
    # payment gap (which optimal allocation, hence the leftover, may differ: ties break by
    # each process's hash seed).
    log_pf = [sum(math.log(r) for r in x.pf_rho.values()) for x in (remote, local)]
    assert log_pf[0] == pytest.approx(log_pf[1], abs=1e-9)
    assert remote.value_without == pytest.approx(local.value_without, abs=2 * PAYMENT_GAP)
    assert sum(c < 1 for c in remote.c.values()) >= 10
