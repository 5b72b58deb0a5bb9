"""Child process for the crash tests: runs deterministic auction rounds into a journal forever.

``python -P tests/support/journal_worker.py JOURNAL`` resumes from whatever the journal holds,
so a run killed with SIGKILL and restarted continues the same deterministic sequence (:func:`step`).
"""

from __future__ import annotations

import sys
import zlib

from arbiter.auction import Bid
from arbiter.cluster import load_cluster
from arbiter.journal import AppRecord, SQLiteJournal, hash_token
from arbiter.rounds import ArbiterState, expire_leases, free_gpus, run_round

CLUSTER = load_cluster("themis-testbed")
APPS = [f"app-{k}" for k in range(6)]


def step(state: ArbiterState) -> tuple[ArbiterState, list[Bid]]:
    """The next round, a pure function of ``state`` (lease order does not matter)."""
    now = state.round * 100.0
    state, _ = expire_leases(state, now)
    offered = sorted(free_gpus(state, now))
    r = state.round
    participants = sorted(APPS, key=lambda a: zlib.crc32(f"{a}/{r}".encode()))[:2]
    bids = []
    for k, app in enumerate(participants):
        size = 1 + (r + k) % 3
        start = (r * 7 + k * 5) % max(1, len(offered))
        rows: dict[frozenset[str], float] = {frozenset(): float("inf")}
        for shift in range(3):
            pick = offered[(start + shift) % len(offered) :][:size] if offered else []
            if pick:
                rows[frozenset(pick)] = 1.0 / len(pick) + 0.01 * shift
        bids.append(Bid(app, rows))
    new, _ = run_round(
        state,
        offered=frozenset(offered),
        bids=bids,
        participants=participants,
        non_participants=[a for a in APPS if a not in participants],
        now=now,
        seed=r,
        lease_seconds=250.0,
    )
    return new, bids


def main(path: str) -> None:
    journal = SQLiteJournal(path)
    snap = journal.load(CLUSTER.gpu_ids)
    for app in APPS:
        if app not in snap.apps:
            journal.put_app(AppRecord(app, hash_token(app + "-secret")))
    state = snap.state
    while True:
        state, bids = step(state)
        journal.commit_round(state, bids)
        print(state.round, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
