"""Where a fan-in heartbeat's time goes: a one-off probe, not part of the arbiter.

Usage (from the repository root)::

    python benchmarks/fanin_probe/instrument.py REV /tmp/probe/tree   # git archive REV + stamps
    TREE=$PWD PYTHONPATH=$PWD GEN_GC=quiet python benchmarks/fanin_probe/drive.py \\
        /tmp/probe/tree 3000 10 /tmp/probe/run.json
    python benchmarks/fanin_probe/decomp.py /tmp/probe/run.json
    PYTHONPATH=$PWD python benchmarks/fanin_probe/bidcost.py /tmp/probe/bidcost  # per-bid cost
    python benchmarks/fanin_probe/window.py /tmp/probe/run.json  # the tail around the rounds

``drive.py`` also has the served arbiter record its loop's stalls and the slow holds of the
core's lock (``stalls.py``; ``FANIN_TIME=module:Class.method,...`` times those methods too),
and passes ``FANIN_SWITCH`` (a GIL switch interval) and ``FANIN_UVLOOP`` (serve on uvloop, if
installed) to it.

``instrument.py`` unpacks the arbiter at REV and stamps (``time.perf_counter``, CLOCK_MONOTONIC:
one clock for every process on the machine) each heartbeat the Session reader reads, each
HeartbeatAck the Session writer yields and each bid read; ``drive.py`` serves that tree with
``sitecustomize.py`` on its path (its event loop's lag and its cyclic GC pauses) and drives it
with ``benchmarks/arbiter_load.py``, keeping every heartbeat's send time and round trip;
``decomp.py`` splits each round trip into generator -> arbiter read, read -> ack yielded, and
ack yielded -> generator received.
"""

import subprocess
import sys
from pathlib import Path

rev, into = sys.argv[1], Path(sys.argv[2])
into.mkdir(parents=True, exist_ok=True)
tar = subprocess.run(["git", "archive", rev], check=True, capture_output=True).stdout
subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
p = into / "arbiter/service.py"
s = p.read_text()
edits = [
    (
        """                        if kind == "heartbeat":
                            beat = msg.heartbeat""",
        """                        if kind == "heartbeat":
                            beat = msg.heartbeat
                            _PROBE.append((time.perf_counter(), app_id, beat.seq, 0))""",
    ),
    (
        """                yield _outbound(item, self.core.cluster)""",
        """                if isinstance(item, pb.ArbiterMessage):
                    _PROBE.append((time.perf_counter(), app_id, item.heartbeat_ack.seq, 1))
                yield _outbound(item, self.core.cluster)""",
    ),
    (
        """                        elif kind == "bid":""",
        """                        elif kind == "bid":
                            _PROBE.append((time.perf_counter(), app_id, msg.bid.round, 2))""",
    ),
    (
        """log = logging.getLogger("yarn_arbiter.service")""",
        """log = logging.getLogger("yarn_arbiter.service")
import os, time
_PROBE: list = []
def _flush():
    while True:
        time.sleep(1.0)
        n = len(_PROBE)
        with open(os.environ["FANIN_LAG_OUT"] + ".events", "a") as f:
            for e in _PROBE[:n]:
                f.write("%.6f %s %d %d\\n" % e)
        del _PROBE[:n]
if os.environ.get("FANIN_LAG_OUT"):
    threading.Thread(target=_flush, daemon=True).start()""",
    ),
]
for old, new in edits:
    if old not in s:
        sys.exit(f"{p}: cannot find {old.strip()[:60]!r} (the service changed: update the probe)")
    s = s.replace(old, new)
p.write_text(s)
print(f"instrumented {p}")
