"""How ``journal-v1.db`` was made: run with the release before journal schema 2 (commit
9ea41a1) first on the path, ``PYTHONPATH=<that checkout> python make_journal_v1.py OUT.db``.
Kept to document the stored file, not run by the tests."""

import sqlite3
import sys

from arbiter.auction import Bid
from arbiter.cluster import load_cluster
from arbiter.journal import AppRecord, SQLiteJournal, hash_token
from arbiter.rounds import ArbiterState, Lease, LeaseSource

c = load_cluster("nodes:2:2")
j = SQLiteJournal(sys.argv[1])
one, two = "app-000000000001", "app-000000000002"
j.put_app(AppRecord(one, hash_token("token-one"), "resnet", "alice", "ml", 2,
                    ({"job_id": "j1", "gang_size": 2},), 1000.0, "application_1_0001"))  # fmt: skip
j.put_app(AppRecord(two, hash_token("token-two"), "bert", "bob", "ml", 1, (), 1001.0))
n0 = frozenset({"node-000/s0/g0", "node-000/s0/g1"})
leases = (
    Lease(one, n0, 1000.0, 1600.0, 1, LeaseSource.AUCTION),
    Lease(two, frozenset({"node-001/s0/g0"}), 1001.0, 1601.0, 1, LeaseSource.LEFTOVER),
)
j.commit_round(ArbiterState(c.gpu_ids, leases, 1), [Bid(one, {frozenset(): float("inf"), n0: 1.5})])
j.put_knob("arbiter.lease.seconds", "600")
j.close()
print("user_version", sqlite3.connect(sys.argv[1]).execute("PRAGMA user_version").fetchone())
