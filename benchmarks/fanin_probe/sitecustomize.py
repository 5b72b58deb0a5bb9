# measurement probe only (not part of the project): event-loop lag of the served arbiter
import asyncio
import os
import sys
import threading
import time

if os.environ.get("FANIN_UVLOOP"):  # the served arbiter's event loop on uvloop
    import uvloop

    asyncio.new_event_loop = uvloop.new_event_loop

_out = os.environ.get("FANIN_LAG_OUT")
if _out:
    _orig = asyncio.new_event_loop
    _done = []

    def new_event_loop():
        loop = _orig()
        if _done:
            return loop
        _done.append(loop)
        samples = []

        def tick(expected):
            now = time.perf_counter()
            samples.append((now, now - expected))
            loop.call_later(0.002, tick, time.perf_counter() + 0.002)

        loop.call_soon(tick, time.perf_counter())

        def flush():
            while True:
                time.sleep(1.0)
                n = len(samples)
                with open(_out, "a") as f:
                    for t, late in samples[:n]:
                        f.write(f"{t:.6f} {late * 1e3:.3f}\n")
                del samples[:n]

        threading.Thread(target=flush, daemon=True).start()
        return loop

    asyncio.new_event_loop = new_event_loop
if _out:
    import gc

    _gc = []
    _gs = [0.0]

    def _cb(phase, info):
        if phase == "start":
            _gs[0] = time.perf_counter()
        else:
            _gc.append((_gs[0], (time.perf_counter() - _gs[0]) * 1e3, info["generation"]))
            if len(_gc) % 20 == 0 or info["generation"] == 2:
                with open(_out + ".gc", "a") as f:
                    for e in _gc:
                        f.write(f"{e[0]:.6f} {e[1]:.3f} {e[2]}\n")
                _gc.clear()

    gc.callbacks.append(_cb)
if os.environ.get("FANIN_STALLS"):
    # what blocks the loop: stacks at its stalls, slow holds of the core's lock (stalls.py)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import stalls

    stalls.install()
if os.environ.get("FANIN_SWITCH"):
    sys.setswitchinterval(float(os.environ["FANIN_SWITCH"]))
