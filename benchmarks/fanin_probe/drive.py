"""Probe run: arbiter_load with the server's loop lag (sitecustomize) and raw generator samples."""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.environ["TREE"] + "/benchmarks")
import arbiter_load as al

root = Path(sys.argv[1])
agents = int(sys.argv[2])
seconds = float(sys.argv[3])
out = Path(sys.argv[4])
lagfile = out.with_suffix(".serverlag")
lagfile.unlink(missing_ok=True)
_Popen = subprocess.Popen


def Popen(cmd, *a, env=None, **k):
    if env is not None and "serve" in cmd:
        env = {
            **env,
            "PYTHONPATH": str(Path(__file__).resolve().parent) + ":" + env["PYTHONPATH"],
            "FANIN_LAG_OUT": str(lagfile),
            "FANIN_STALLS": str(out.with_suffix("")),
            "FANIN_TIME": os.environ.get("FANIN_TIME", ""),
            "FANIN_SWITCH": os.environ.get("FANIN_SWITCH", ""),
            "FANIN_UVLOOP": os.environ.get("FANIN_UVLOOP", ""),
        }
    return _Popen(cmd, *a, env=env, **k)


al.subprocess.Popen = Popen
al.PROBE = {}
al.QUIET_GC = os.environ.get("GEN_GC", "quiet") == "quiet"
Q = al.QUIET_GC
rec = al.serve_and_load(root, agents, seconds, "stream", "themis", 1, quiet=Q)
rec.pop("per_type", None)
print(json.dumps({k: v for k, v in rec.items() if not isinstance(v, dict)}))
out.write_text(json.dumps({"rec": rec, **al.PROBE}))
