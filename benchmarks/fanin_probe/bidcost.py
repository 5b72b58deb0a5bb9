import random
import sys
import time

import arbiter.cluster as C
from arbiter.config import load_config
from arbiter.core import ArbiterCore
from arbiter.journal import SQLiteJournal
from arbiter.service import _offer_bytes
from arbiter.wire.appmaster import bid_from_pb
from protos.yarnarbiter.v1 import arbiter_pb2 as pb

tmp = sys.argv[1]
cluster = C.load_cluster("themis-sim-256")
config = load_config(
    environ={
        "ARBITER_JOURNAL_PATH": tmp + "/j.db",
        "ARBITER_POLICY": "themis",
        "ARBITER_ADMISSION_MAX_APPS": "100000",
        "ARBITER_ADMISSION_MAX_APPS_PER_USER": "100000",
    }
)
clock = [1000.0]
core = ArbiterCore(
    cluster, config, SQLiteJournal(tmp + "/j.db"), admin_token="a", clock=lambda: clock[0]
)


class Box:
    def __init__(self):
        self.items = []

    def put(self, x):
        self.items.append(x)


boxes = {}
for k in range(3000):
    app, _ = core.register_app(
        app_name=f"a{k}", user="u", queue_name="", max_gpu_demand=random.choice((1, 2, 4, 8))
    )
    boxes[app] = Box()
    core.open_session(app, boxes[app])
for _ in range(30):
    clock[0] += 0.6
    core.tick()
    if core.scheduler.pending:
        break
p = core.scheduler.pending
print("participants", len(p.participants), "offered gpus", len(p.offered))
ids = sorted(p.offered)
msgs = {
    a: pb.Bid(
        round=p.round,
        rho_old=8.0,
        rows=[pb.BidRow(gpu_ids=random.sample(ids, n), rho=4.0 / n) for n in (1,)],
    )
    for a in p.participants
}
offer = next(x for x in boxes[p.participants[0]].items)
print("offer bytes", len(_offer_bytes(offer, cluster)))
t = time.perf_counter()
parsed = {a: bid_from_pb(a, m) for a, m in msgs.items()}
t1 = time.perf_counter()
for a, b in parsed.items():
    core.submit_bid(a, p.round, b)
t2 = time.perf_counter()
n = len(msgs)
print(
    f"per bid: bid_from_pb {(t1 - t) / n * 1e6:.1f} us, "
    f"core.submit_bid {(t2 - t1) / n * 1e6:.1f} us; "
    f"whole round's {n} bids {(t2 - t) * 1e3:.1f} ms"
)
# parse cost of the wire message itself
raw = {a: pb.AgentMessage(bid=m).SerializeToString() for a, m in msgs.items()}
t = time.perf_counter()
[pb.AgentMessage.FromString(r) for r in raw.values()]
print(f"deserialize per bid {(time.perf_counter() - t) / n * 1e6:.1f} us")
t = time.perf_counter()
for a in list(p.participants)[:1]:
    core.beat(a, (), rho=True)
t = time.perf_counter()
for a in list(boxes)[:3000]:
    core.beat(a, (), rho=True)
print(f"core.beat with rho per heartbeat {(time.perf_counter() - t) / 3000 * 1e6:.1f} us")
