"""What Kerberos costs on a real local YARN: the same cluster started plain and Kerberized
(``LocalHadoopSpec(kerberos=True)``: MiniKdc, secure mode, SPNEGO on the RM's REST API), and the
RM client's calls on each.

Measured, for each of the two clusters (one RM, ``--nodes`` NodeManagers, started in turn in
temp dirs and stopped at the end):

* **start**: ``LocalHadoop.up`` until an ACTIVE RM and every NodeManager RUNNING (the
  Kerberized one includes MiniKdc's start and the daemons' keytab logins);
* **first call**: a new :class:`~yarn_bridge.rm.RMClient` and its first ``GET /nodes`` (with
  Kerberos: the keytab login, the service ticket from the KDC and the SPNEGO handshake);
* **per call**: ``--calls`` more ``GET /ws/v1/cluster/nodes`` on the same client, p50 / p95. With
  Kerberos two ways, in the same cluster: as the client does it (after the first exchange the
  RM's signed ``hadoop.auth`` cookie alone, no SPNEGO check on the RM), and with the cookie
  dropped before each call (a fresh SPNEGO token every call, checked by the RM: what the
  client did before it kept to the cookie, and what a cookie-less client pays).

Other processes share this 2-core machine: compare the two rows of one run, not runs.

Usage: ``python benchmarks/kerberos_rm.py [--quick] [--calls N] [--nodes N] [--out PATH]``.
Writes ``benchmarks/results/kerberos_rm.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yarn_bridge.kerberos import kerberos_hook  # noqa: E402
from yarn_bridge.local_hadoop import LocalHadoop, LocalHadoopSpec  # noqa: E402
from yarn_bridge.rm import RMClient  # noqa: E402


def _percentiles(per: list[float]) -> dict:
    per = sorted(per)
    return {"p50_ms": round(statistics.median(per), 2),
            "p95_ms": round(per[int(0.95 * (len(per) - 1))], 2)}  # fmt: skip


def measure(kerberos: bool, calls: int, nodes: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="krb-bench-") as tmp:
        local = LocalHadoop(Path(tmp))
        try:
            t0 = time.perf_counter()
            spec = LocalHadoopSpec(Path(tmp), nodes=nodes, kerberos=kerberos, kerberos_user="alice")
            state = local.up(spec, progress=lambda _m: None)
            start_s = round(time.perf_counter() - t0, 2)
            t1 = time.perf_counter()
            auth = (
                kerberos_hook(state.principal, state.keytab, state.krb5_conf) if kerberos else None
            )
            with RMClient(state.rm_url, auth=auth) as rm:
                assert len(rm.nodes()) == nodes
                first_ms = round((time.perf_counter() - t1) * 1000, 1)
                ways = [("kerberos" if kerberos else "plain", False)]
                if kerberos:
                    ways.append(("kerberos, SPNEGO every call", True))
                for name, drop_cookie in ways:
                    per = []
                    for _ in range(calls):
                        if drop_cookie:
                            rm._http.cookies.clear()
                        t = time.perf_counter()
                        rm.nodes()
                        per.append((time.perf_counter() - t) * 1000)
                    rows.append({"cluster": name, "start_s": start_s, "first_call_ms": first_ms,
                                 "calls": calls, **_percentiles(per)})  # fmt: skip
        finally:
            local.down()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="30 calls, 1 NodeManager")
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "kerberos_rm.json")
    args = p.parse_args()
    calls, nodes = (30, 1) if args.quick else (args.calls, args.nodes)
    rows = [*measure(False, calls, nodes), *measure(True, calls, nodes)]
    head = f"{'cluster':<28} {'start s':>8} {'1st call ms':>12} {'p50 ms':>8} {'p95 ms':>8}"
    print(f"{head}  (n={calls})")
    for r in rows:
        print(f"{r['cluster']:<28} {r['start_s']:>8} {r['first_call_ms']:>12} {r['p50_ms']:>8} "
              f"{r['p95_ms']:>8}")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"quick": args.quick, "nodes": nodes, "rows": rows}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
