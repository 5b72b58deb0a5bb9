"""Where the tail is, relative to the rounds: a probe run (``drive.py``) split by the time each
heartbeat was sent after the latest round's first offer reached the generator.

Usage: ``python benchmarks/fanin_probe/window.py /tmp/probe/run.json`` (after ``drive.py`` with
``FANIN_STALLS``; the instrumented tree of ``instrument.py`` for the read/yield split). Prints:
loop stalls and slow holds of the core's lock while measuring (``stalls.py``); the share of slow
heartbeats per 100 ms after an offer; the round trip split (generator -> arbiter read -> ack
yielded -> generator) within 0.5 s of an offer and elsewhere; both processes' loop lag there;
slow shares of the round's bidders and of the other Agents.
"""

from __future__ import annotations

import bisect
import collections
import json
import sys
from pathlib import Path

WINDOW_S = 0.5


def pct(v: list[float], q: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] if v else float("nan")


def main(path: str) -> None:
    base = Path(path)
    d = json.loads(base.read_text())
    beats = d["beats"]
    offers = sorted(d["offers"])
    t0, t1 = min(b[0] for b in beats), max(b[0] for b in beats)

    def after_offer(t: float) -> float:
        i = bisect.bisect_right(offers, t) - 1
        return t - offers[i] if i >= 0 else float("inf")

    stalls_file = base.with_suffix(".stalls")
    if stalls_file.is_file():
        stalls = [json.loads(x) for x in stalls_file.read_text().splitlines()]
        stalls = [s for s in stalls if t0 <= s["at"] <= t1]
        print(f"server loop stalls > 20 ms while measuring: {len(stalls)}, "
              f"{sum(s['ms'] for s in stalls):.0f} ms in all, longest "
              f"{max((s['ms'] for s in stalls), default=0):.0f} ms")  # fmt: skip
        holds = collections.defaultdict(list)
        for line in base.with_suffix(".locks").read_text().splitlines():
            t, thread, taker, wait, hold = line.split()
            if t0 <= float(t) <= t1:
                holds[(thread, taker)].append((float(wait), float(hold)))
        for (thread, taker), v in sorted(holds.items(), key=lambda x: -len(x[1])):
            w, h = [x[0] for x in v], [x[1] for x in v]
            print(f"  {thread:12s} {taker:32s} {len(v):4d} over 2 ms: wait max {max(w):6.1f} "
                  f"hold p50 {pct(h, 50):6.1f} max {max(h):6.1f} ms")  # fmt: skip
    bins: dict[int, list[float]] = collections.defaultdict(list)
    for sent, rtt, _, _ in beats:
        dt = after_offer(sent)
        if dt < 3.5:
            bins[int(dt * 10)].append(rtt)
    print("sent after an offer: beats, share over 50 ms, p99 ms")
    for b in sorted(bins)[:12]:
        v = bins[b]
        print(f"  {b / 10:.1f}-{(b + 1) / 10:.1f} s {len(v):6d} "
              f"{sum(x > 50 for x in v) / len(v):6.1%} {pct(v, 99):7.1f}")  # fmt: skip
    events = Path(str(base.with_suffix(".serverlag")) + ".events")
    if events.is_file():
        ev: dict = collections.defaultdict(dict)
        bidders: dict[int, set] = collections.defaultdict(set)
        for line in events.read_text().splitlines():
            t, app, seq, k = line.split()
            if k == "2":
                bidders[int(seq)].add(app)
            else:
                ev[(app, int(seq))][k] = float(t)
        parts = collections.defaultdict(list)
        for sent, rtt, app, seq in beats:
            e = ev.get((app, seq))
            if e and "0" in e and "1" in e:
                where = "within 0.5 s of an offer" if after_offer(sent) < WINDOW_S else "elsewhere"
                recv = sent + rtt / 1e3
                parts[where].append(
                    (rtt, (e["0"] - sent) * 1e3, (e["1"] - e["0"]) * 1e3, (recv - e["1"]) * 1e3)
                )
        for where, rows in parts.items():
            print(f"round trip split, heartbeats sent {where} ({len(rows)}): p50 / p90 / p99 ms")
            for i, name in enumerate(("round trip", "sent -> read", "read -> ack yielded",
                                      "yielded -> received")):  # fmt: skip
                v = [r[i] for r in rows]
                print(f"  {name:20s} {pct(v, 50):7.1f} {pct(v, 90):7.1f} {pct(v, 99):7.1f}")
    lag_sets = {"generator": d["lag"]}
    lag_file = base.with_suffix(".serverlag")
    if lag_file.is_file():
        lag_sets["arbiter"] = [
            tuple(map(float, x.split())) for x in lag_file.read_text().splitlines()
        ]
    for who, samples in lag_sets.items():
        inside = [x for t, x in samples if t0 <= t <= t1 and after_offer(t) < WINDOW_S]
        outside = [x for t, x in samples if t0 <= t <= t1 and after_offer(t) >= WINDOW_S]
        print(f"{who} loop lag p99 / max ms: within 0.5 s of an offer {pct(inside, 99):.1f} / "
              f"{max(inside, default=0):.1f}, elsewhere {pct(outside, 99):.1f} / "
              f"{max(outside, default=0):.1f}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
