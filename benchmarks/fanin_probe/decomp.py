import collections
import json
import sys

with open(sys.argv[1]) as fh:
    d = json.load(fh)
ev = collections.defaultdict(dict)
bids = []
with open(sys.argv[1].replace(".json", ".serverlag") + ".events") as fh:
    lines = fh.read().splitlines()
for line in lines:
    t, app, seq, k = line.split()
    t = float(t)
    if k == "2":
        bids.append(t)
        continue
    ev[(app, int(seq))][k] = t


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] if v else float("nan")


rows = []
for sent, rtt, app, seq in d["beats"]:
    e = ev.get((app, seq))
    if not e or "0" not in e or "1" not in e:
        continue
    recv = sent + rtt / 1e3
    rows.append((sent, rtt, (e["0"] - sent) * 1e3, (e["1"] - e["0"]) * 1e3, (recv - e["1"]) * 1e3))
print("n", len(rows))
for name, sel in (("all", rows), ("slow>50", [r for r in rows if r[1] > 50])):
    print(name, len(sel))
    for i, part in (
        (1, "rtt"),
        (2, "sent->server read"),
        (3, "read->ack yielded"),
        (4, "yielded->gen recv"),
    ):
        v = [r[i] for r in sel]
        print(
            f"   {part:20s} p50 {pct(v, 50):8.1f} p99 {pct(v, 99):8.1f} "
            f"mean {sum(v) / max(1, len(v)):8.1f}"
        )
bids.sort()
t0 = d["beats"][0][0]
print("offers", [round(o - t0, 2) for o in d["offers"]])
# bid arrival spread per offer
for o in d["offers"]:
    b = [x - o for x in bids if o <= x <= o + 3]
    if b:
        print(
            f"offer {o - t0:.2f}: {len(b)} bids read at the arbiter {pct(b, 50) * 1e3:.0f} (p50) "
            f"/ {pct(b, 99) * 1e3:.0f} (p99) / {max(b) * 1e3:.0f} ms after the first offer"
        )
