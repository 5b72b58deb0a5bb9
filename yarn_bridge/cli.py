"""``yarn-arbiter emulate-rm``: serve the ResourceManager emulator (issue 7, the RM link).

The lead wires :func:`add_parsers` into ``arbiter/cli.py`` (as ``arbiter.sim.cli`` is). The
command serves :class:`yarn_bridge.emulator.RMEmulator` (or an :class:`~yarn_bridge.emulator.
RMHAPair` with ``--standby-port``) on a simulated cluster: ``--nodes`` NodeManagers with
``--gpus-per-node`` ``yarn.io/gpu`` each, or one per machine of an arbiter ``--cluster`` spec.
The clock is real time; apps run ``--app-seconds`` (jittered +-20 % by ``--seed``).
``--apps K`` submits K background applications at start, spread over the queues, some holding
GPUs, so that a watcher has something to see. It prints the URL(s) and the
``YARN_ARBITER_RM_URL`` line, then serves until interrupted (or ``--duration`` seconds).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
from typing import Any

from yarn_bridge.emulator import RMEmulator, RMHAPair, SimCluster
from yarn_bridge.env import ENV_RM_URL

__all__ = ["add_parsers", "build_emulator"]


def add_parsers(sub: Any) -> None:
    """Register ``emulate-rm`` on an ``argparse`` sub-parsers object."""
    p = sub.add_parser(
        "emulate-rm",
        help="serve a YARN ResourceManager emulator (REST API, GPUs as yarn.io/gpu)",
        description="Serve the ResourceManager REST API (/ws/v1/cluster, Hadoop 3.3/3.4 JSON "
        "shapes) over a simulated cluster with GPUs: apps go NEW -> ACCEPTED -> RUNNING -> "
        "FINISHED, can be killed, moved, re-prioritised and given lifetimes; the Capacity "
        "Scheduler configuration can be changed with PUT /scheduler-conf. For tests and demos "
        "where no Hadoop is installed.",
    )
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8088, help="listen port (default 8088; 0 = any)")
    p.add_argument(
        "--standby-port",
        type=int,
        help="also serve a STANDBY RM on this port (RM HA pair over one state store)",
    )
    p.add_argument("--nodes", type=int, default=4, help="NodeManagers (default 4)")
    p.add_argument("--gpus-per-node", type=int, default=4, help="yarn.io/gpu per node (default 4)")
    p.add_argument("--memory-mb", type=int, default=65536, help="memory per node (default 65536)")
    p.add_argument("--vcores", type=int, default=32, help="vcores per node (default 32)")
    p.add_argument(
        "--cluster",
        help="arbiter cluster spec (shipped name, YAML or nodes:N:G): one node per machine, "
        "instead of --nodes/--gpus-per-node",
    )
    p.add_argument(
        "--scheduler",
        choices=["capacity", "fair"],
        default="capacity",
        help="scheduler view and behaviour (default capacity: root.default/hive/ml 20/40/40)",
    )
    p.add_argument(
        "--app-seconds", type=float, default=60.0, help="how long an app runs (default 60)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for durations and --apps")
    p.add_argument("--apps", type=int, default=0, help="background apps to submit at start")
    p.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: run until ^C)"
    )
    p.set_defaults(func=_cmd_emulate_rm)


def build_emulator(args: argparse.Namespace) -> RMEmulator | RMHAPair:
    """The emulator (or HA pair) ``args`` describe, not started. Raises ``ValueError``."""
    for name in ("nodes", "gpus_per_node", "apps"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
    if args.app_seconds <= 0:
        raise ValueError("--app-seconds must be > 0")
    common: dict[str, Any] = {
        "scheduler": args.scheduler,
        "app_seconds": args.app_seconds,
        "duration_jitter": 0.2,
        "seed": args.seed,
        "recovery": args.standby_port is not None,
    }
    if args.cluster:
        from arbiter.cluster import load_cluster

        sim = SimCluster.from_cluster(
            load_cluster(args.cluster), memory_mb=args.memory_mb, vcores=args.vcores, **common
        )
    else:
        sim = SimCluster(
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            memory_mb=args.memory_mb,
            vcores=args.vcores,
            **common,
        )
    rng = random.Random(args.seed)
    queues = ["default", "hive", "ml"]
    for k in range(args.apps):
        queue = queues[k % len(queues)]
        sim.add_app(
            name=f"background-{k}",
            user=rng.choice(["alice", "bob", "carol"]),
            queue=queue,
            gpus=rng.choice([1, 2, 4]) if queue == "ml" else 0,
            tags=("yarn-arbiter-ml",) if queue == "ml" else ("hive",),
        )
    if args.standby_port is not None:
        return RMHAPair(sim, host=args.host, ports=(args.port, args.standby_port))
    return RMEmulator(sim, host=args.host, port=args.port)


def _cmd_emulate_rm(args: argparse.Namespace) -> int:
    try:
        emu = build_emulator(args)
    except ValueError as exc:
        print(f"yarn-arbiter emulate-rm: error: {exc}", file=sys.stderr)
        return 2
    try:
        urls = emu.start() if isinstance(emu, RMHAPair) else [emu.start()]
    except OSError as exc:
        print(f"yarn-arbiter emulate-rm: cannot listen: {exc}", file=sys.stderr)
        return 2
    sim = emu.cluster
    gpus = sum(n.gpus for n in sim.nodes.values())
    roles = ["ACTIVE", "STANDBY"]
    for k, url in enumerate(urls):
        role = f" ({roles[k]})" if len(urls) > 1 else ""
        print(
            f"ResourceManager emulator{role}: {url}  [{args.scheduler} scheduler, "
            f"{len(sim.nodes)} nodes, {gpus} GPUs]"
        )
    print(f"export {ENV_RM_URL}={','.join(urls)}", flush=True)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait(args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    return 0
