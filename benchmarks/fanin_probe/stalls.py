"""Measurement probe (not part of the arbiter): what stalls the served arbiter's event loop.

Imported by ``sitecustomize.py`` when ``FANIN_STALLS`` names an output file. Two records:

* ``<out>.stalls``: a watchdog thread checks every 2 ms when the gRPC event loop last ran a
  2 ms timer; once the loop is ``FANIN_STALL_MS`` (default 20) late it takes every thread's
  Python stack (``sys._current_frames``) once per stall, and writes the loop thread's and the
  scheduler thread's innermost frames with the stall's length when it ends;
* ``<out>.locks``: every outermost hold of ``ArbiterCore``'s lock that waited or held longer
  than 2 ms: thread, the function that took it, wait and hold in ms.

``python benchmarks/fanin_probe/stalls.py <out>`` summarises both.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback
from collections import Counter

OUT = os.environ.get("FANIN_STALLS", "")
STALL_MS = float(os.environ.get("FANIN_STALL_MS", "20"))


def _stack(frame, depth: int = 12) -> list[str]:
    return [
        f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
        for f in traceback.extract_stack(frame)[-depth:]
    ]


class TimedLock:
    """An RLock that records its slow outermost holds (wait, hold, taker)."""

    def __init__(self, inner, sink: list) -> None:
        self._inner = inner
        self._sink = sink
        self._local = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        t = time.perf_counter()
        ok = self._inner.acquire(blocking, timeout)
        if ok:
            depth = getattr(self._local, "depth", 0)
            if depth == 0:
                self._local.t_wait = time.perf_counter() - t
                self._local.t_got = time.perf_counter()
                self._local.taker = sys._getframe(2).f_code.co_name
            self._local.depth = depth + 1
        return ok

    def release(self) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            hold = time.perf_counter() - self._local.t_got
            if hold > 0.002 or self._local.t_wait > 0.002:
                self._sink.append(
                    (
                        self._local.t_got,
                        threading.current_thread().name,
                        self._local.taker,
                        self._local.t_wait * 1e3,
                        hold * 1e3,
                    )
                )
        self._inner.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def install() -> None:
    locks: list = []
    stalls: list = []
    state = {"loop": None, "thread": None, "last": time.perf_counter()}
    orig_new = asyncio.new_event_loop

    def new_event_loop():
        loop = orig_new()
        if state["loop"] is not None:
            return loop
        state["loop"] = loop

        def tick() -> None:
            state["last"] = time.perf_counter()
            state["thread"] = threading.get_ident()
            loop.call_later(0.002, tick)

        loop.call_soon(tick)
        return loop

    asyncio.new_event_loop = new_event_loop

    import arbiter.core as core_mod

    orig_init = core_mod.ArbiterCore.__init__

    def init(self, *a, **k):
        orig_init(self, *a, **k)
        self._lock = TimedLock(self._lock, locks)

    core_mod.ArbiterCore.__init__ = init

    # how long the scheduling loop's phases take (the lock is held through each)
    import importlib

    def timed(fn, name):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                d = time.perf_counter() - t
                if d > 0.002:
                    locks.append((t, f"phase-{os.getpid()}", name, 0.0, d * 1e3))

        return wrapper

    for spec in os.environ.get("FANIN_TIME", "").split(","):
        if not spec:
            continue
        mod, _, attr = spec.partition(":")
        cls, _, meth = attr.rpartition(".")
        owner = importlib.import_module(mod)
        if cls:
            owner = getattr(owner, cls)
        setattr(owner, meth, timed(getattr(owner, meth), attr))

    def watch() -> None:
        current = None  # (started, stacks) of the stall in progress
        last_flush = time.perf_counter()
        while True:
            time.sleep(0.002)
            now = time.perf_counter()
            late = now - state["last"]
            if state["thread"] is not None and late * 1e3 > STALL_MS:
                if current is None:
                    frames = sys._current_frames()
                    names = {t.ident: t.name for t in threading.enumerate()}
                    stacks = {
                        names.get(ident, str(ident)): _stack(f)
                        for ident, f in frames.items()
                        if names.get(ident) in ("grpc-loop", "scheduler")
                    }
                    current = (state["last"], stacks)
            elif current is not None:
                stalls.append(
                    {"at": current[0], "ms": (state["last"] - current[0]) * 1e3,
                     "stacks": current[1]}
                )  # fmt: skip
                current = None
            if now - last_flush > 1.0:
                last_flush = now
                with open(OUT + ".stalls", "a") as f:
                    n = len(stalls)
                    for s in stalls[:n]:
                        f.write(json.dumps(s) + "\n")
                    del stalls[:n]
                with open(OUT + ".locks", "a") as f:
                    n = len(locks)
                    for e in locks[:n]:
                        f.write("{:.6f} {} {} {:.3f} {:.3f}\n".format(*e))
                    del locks[:n]

    threading.Thread(target=watch, name="stall-watch", daemon=True).start()


def summary(out: str) -> None:
    with open(out + ".stalls") as fh:
        stalls = [json.loads(x) for x in fh]
    print(f"{len(stalls)} loop stalls > {STALL_MS} ms; lengths (ms):",
          sorted(round(s["ms"]) for s in stalls)[-20:])  # fmt: skip
    where = Counter()
    for s in stalls:
        loop = s["stacks"].get("grpc-loop", [])
        sched = s["stacks"].get("scheduler", [])
        key = (" < ".join(reversed(loop[-4:])), " < ".join(reversed(sched[-5:])))
        where[key] += 1
    for (lp, sc), n in where.most_common(15):
        print(f"{n:4d}  loop: {lp}\n      sched: {sc}")
    holds = Counter()
    worst: dict = {}
    with open(out + ".locks") as fh:
        lock_lines = fh.read().splitlines()
    for line in lock_lines:
        _, thread, taker, wait, hold = line.split()
        holds[(thread, taker)] += 1
        w = worst.setdefault((thread, taker), [0.0, 0.0, []])
        w[0] = max(w[0], float(wait))
        w[1] = max(w[1], float(hold))
        w[2].append(float(hold))
    print("slow lock holds: thread taker count max-wait max-hold p50-hold (ms)")
    for (thread, taker), n in holds.most_common(20):
        w = worst[(thread, taker)]
        print(f"  {thread:12s} {taker:22s} {n:5d} {w[0]:8.1f} {w[1]:8.1f} "
              f"{sorted(w[2])[len(w[2]) // 2]:8.1f}")  # fmt: skip


if __name__ == "__main__":
    summary(sys.argv[1])
