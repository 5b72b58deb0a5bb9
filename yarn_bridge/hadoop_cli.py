"""``yarn-arbiter hadoop up|down|status|jars``: a real local YARN (:mod:`yarn_bridge.local_hadoop`).

``up`` prints the active ResourceManager's web address alone on its last line, so a script can
take it with ``tail -1``; ``status`` prints each daemon with its pid and resident memory
(``--json`` for scripts) and, with ``up --ha --arbiter-pair``, which arbiter is active;
``down`` stops everything the work dir started. Errors (no Java, no
Maven, an unreachable repository, a busy port, a daemon that dies at start) print one line
saying what to do, plus the daemon's last log lines, and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from yarn_bridge.local_hadoop import (
    HADOOP_VERSION,
    ZOOKEEPER_VERSION,
    HadoopError,
    LocalHadoop,
    LocalHadoopSpec,
    ensure_jars,
)
from yarn_bridge.local_hadoop.arbiters import ZK_ROOT, credentials_dir
from yarn_bridge.local_hadoop.kdc import ensure_minikdc_jars

__all__ = ["add_parsers"]

DEFAULT_WORKDIR = Path(".yarn-local")


def _err(text: str) -> None:
    print(f"yarn-arbiter hadoop: {text}", file=sys.stderr)


def _cmd(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except HadoopError as e:
        _err(str(e))
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.action == "jars":
        path = ensure_jars(progress=lambda m: print(m, file=sys.stderr))
        ensure_minikdc_jars(progress=lambda m: print(m, file=sys.stderr))  # for up --kerberos
        print(path)
        return 0
    local = LocalHadoop(args.workdir)
    if args.action == "up":
        spec = LocalHadoopSpec(
            args.workdir,
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            ha=args.ha,
            nm_liveness_ms=args.nm_liveness_ms,
            rm_webapp_port=args.rm_port,
            kerberos=args.kerberos,
            kerberos_user=args.kerberos_user or "",
            arbiter_pair=args.arbiter_pair,
        )
        state = local.up(spec, progress=lambda m: print(m, file=sys.stderr))
        print(f"Hadoop {HADOOP_VERSION} up in {state.startup_s:.1f} s from {state.workdir}: "
              f"{args.nodes} NodeManagers x {args.gpus_per_node} yarn.io/gpu"
              f"{', RM HA on ZooKeeper ' + state.zk_address if args.ha else ''}",
              file=sys.stderr)  # fmt: skip
        print(f"client conf: export HADOOP_CONF_DIR={state.client_conf}", file=sys.stderr)
        if state.arbiter_addresses:
            creds = credentials_dir(Path(state.workdir))
            print(f"arbiter pair on ZooKeeper {state.zk_address}{ZK_ROOT}: --arbiter "
                  f"{state.arbiter_addresses} (credentials in {creds})",
                  file=sys.stderr)  # fmt: skip
        if state.keytab:
            print(f"Kerberos: export KRB5_CONFIG={state.krb5_conf}; clients log in with "
                  f"--principal {state.principal} --keytab {state.keytab}",
                  file=sys.stderr)  # fmt: skip
        print(local.active_rm() or state.rm_url)
        return 0
    if args.action == "down":
        stopped = local.down()
        print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running",
              file=sys.stderr)  # fmt: skip
        return 0
    st = local.status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0 if st["running"] else 3
    if not st["daemons"]:
        print(f"no cluster in {st['workdir']}")
        return 3
    arbiter = ""
    if st.get("arbiters"):
        arbiter = f"; active arbiter {st.get('active_arbiter') or 'none'} ({st['arbiters']})"
    print(f"work dir {st['workdir']}; active RM {st.get('active_rm') or 'none'}{arbiter}; "
          f"started in {st.get('startup_s', 0):.1f} s")  # fmt: skip
    for d in st["daemons"]:
        state = "up" if d["alive"] else "DOWN"
        role = f" {d['role'] or 'no role'}" if "role" in d else ""
        print(f"  {d['name']:<4} pid {d['pid']:<8} {state:<5} {d['rss_mb']:>5} MB  "
              f"{d['webapp'] or ''} {d['node_id'] or ''}{role}")  # fmt: skip
    for n in st["nodes"]:
        print(f"  node {n['id']}: {n['state']}")
    return 0 if st["running"] else 3


def add_parsers(sub: Any) -> None:
    """Register ``hadoop`` on ``yarn-arbiter``'s sub-parsers."""
    p = sub.add_parser(
        "hadoop",
        help="start, inspect or stop a real local YARN (RM + NodeManagers from Maven jars)",
        description=f"A real Hadoop {HADOOP_VERSION} YARN on 127.0.0.1: ResourceManager(s), "
        "NodeManagers with countable yarn.io/gpu, Capacity Scheduler queues default/analytics/"
        f"gpu from deploy/conf, optionally an RM HA pair on ZooKeeper {ZOOKEEPER_VERSION}. "
        "Jars come from Maven Central once into ~/.cache/yarn-arbiter (YARN_ARBITER_JARS).",
    )
    p.add_argument("action", choices=["up", "down", "status", "jars"],
                   help="up: start and wait until usable (prints the RM URL last); down: stop; "
                   "status: daemons, memory, nodes; jars: only fetch the jars")  # fmt: skip
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                   help=f"the cluster's own directory (default {DEFAULT_WORKDIR})")  # fmt: skip
    p.add_argument("--nodes", type=int, default=2, help="NodeManagers (default 2)")
    p.add_argument("--gpus-per-node", type=int, default=4, help="yarn.io/gpu each (default 4)")
    p.add_argument("--ha", action="store_true", help="two RMs (rm1, rm2) elected on ZooKeeper")
    p.add_argument("--arbiter-pair", action="store_true",
                   help="with --ha: an arbiter HA pair (arb1, arb2) on the same ZooKeeper, "
                   "serving the RMs' GPUs; status shows which one is active")  # fmt: skip
    p.add_argument("--rm-port", type=int, default=0, help="RM web port (default: a free one)")
    p.add_argument("--nm-liveness-ms", type=int, default=None,
                   help="NodeManager liveness expiry (default YARN's 600000; tests lower "
                   "it)")  # fmt: skip
    p.add_argument("--kerberos", action="store_true",
                   help="secure mode: a MiniKdc realm (EXAMPLE.COM), Kerberos RPC and SPNEGO "
                   "on the RM's and NMs' web servers; prints the client principal and "
                   "keytab")  # fmt: skip
    p.add_argument("--kerberos-user", metavar="NAME",
                   help="with --kerberos: the client principal NAME@EXAMPLE.COM (default: the "
                   "login name)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=_cmd)
