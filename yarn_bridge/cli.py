"""``yarn-arbiter emulate-rm``: serve the ResourceManager emulator (the RM link).

Spec: ``../shared/spec/yarn-hive-integration.md`` §1.1-1.6 (what is emulated), §5.1 (the
compose cluster runs ``apache/hadoop:3.3.6``: ``--hadoop-version 3.3`` serves its shapes).

The lead wires :func:`add_parsers` into ``yarn_arbiter/cli.py`` (as ``arbiter.sim.cli`` is). The
command serves :class:`yarn_bridge.emulator.RMEmulator` (or an :class:`~yarn_bridge.emulator.
RMHAPair` with ``--standby-port``) on a simulated cluster: ``--nodes`` NodeManagers with
``--gpus-per-node`` ``yarn.io/gpu`` each, or one per machine of an arbiter ``--cluster`` spec.
The clock is real time; apps run ``--app-seconds`` (jittered +-20 % by ``--seed``).
``--apps K`` submits K background applications at start, spread over the queues, some holding
GPUs, so that a watcher has something to see. It prints the URL(s) and the
``YARN_ARBITER_RM_URL`` line, then serves until interrupted (or ``--duration`` seconds).

Faults from the command line (faults on demand): ``--delay`` slows every answer,
``--outage-after`` / ``--outage-mode`` / ``--outage-seconds`` schedule one outage, and while it
runs the emulator answers ``GET`` / ``POST /emulator/faults`` (:data:`~yarn_bridge.emulator.
FAULTS_PATH`, outside Hadoop's ``/ws/v1``; ``--no-faults-endpoint`` turns it off) to change
faults at run time, e.g. ``curl -XPOST localhost:8088/emulator/faults -d '{"outage":"503",
"outage_seconds":5}'``. Decision: an endpoint rather than signals or a control file, because a
test or a user then drives faults with the same HTTP tooling it uses on the RM, and the answer
reports what is in force. ``--queue NAME=CAPACITY`` (repeatable) replaces the default queues;
a capacity is a percentage or an absolute vector such as ``[memory=8192,vcores=8]``.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
from typing import Any

from arbiter.signals import stop_on_signals
from yarn_bridge.emulator import FAULTS_PATH, HADOOP_VERSIONS, RMEmulator, RMHAPair, SimCluster
from yarn_bridge.env import ENV_RM_URL

__all__ = ["FAULTS_HELP", "add_parsers", "build_emulator"]

FAULTS_HELP = f"""\
fault control (unless --no-faults-endpoint): GET {FAULTS_PATH} shows the faults in force;
POST {FAULTS_PATH} with a JSON object changes them, e.g.
  curl -XPOST http://127.0.0.1:8088{FAULTS_PATH} -d '{{"delay": 0.5}}'
keys (all optional, applied in this order):
  "clear": true                    drop every fault first
  "delay": S                       every answer waits S seconds (0 to stop)
  "inject": {{"path": "/apps", "status": 200, "body": "...", "truncate": 0.5,
             "disconnect": false, "method": "GET", "times": 1}}   (or a list)
                                   answer the next requests for a /ws/v1/cluster path
                                   differently: a raw body, the real answer cut to a
                                   fraction, or a connection cut half-way
  "nodes": {{"node-01:8041": "LOST"}}  LOST, UNHEALTHY, DECOMMISSIONED or RUNNING
  "outage": "503" | "drop" | "refused" | null, "outage_after": S, "outage_seconds": S
                                   503 answers, dropped connections, or a closed port
                                   ("refused" needs outage_seconds); null ends an outage
  "restart": {{"keep_apps": true, "downtime": S, "after": S}}
                                   restart the RM (new cluster id; apps survive with
                                   keep_apps, i.e. RM recovery)
The endpoint itself is never delayed and never in a 503/drop outage."""


def _queue_arg(text: str) -> tuple[str, float | str]:
    name, sep, cap = text.partition("=")
    if not sep or not name.strip() or not cap.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=CAPACITY")
    cap = cap.strip()
    if cap.startswith("["):
        return name.strip(), cap
    try:
        return name.strip(), float(cap)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: CAPACITY is a percentage or a vector like [memory=8192,vcores=8]"
        ) from None


def add_parsers(sub: Any) -> None:
    """Register ``emulate-rm`` on an ``argparse`` sub-parsers object."""
    p = sub.add_parser(
        "emulate-rm",
        help="serve a YARN ResourceManager emulator (REST API, GPUs as yarn.io/gpu)",
        description="Serve the ResourceManager REST API (/ws/v1/cluster, Hadoop 3.3/3.4/3.5 JSON "
        "shapes) over a simulated cluster with GPUs: apps go NEW -> ACCEPTED -> RUNNING -> "
        "FINISHED, can be killed, moved, re-prioritised and given lifetimes; the Capacity "
        "Scheduler configuration can be changed with PUT /scheduler-conf. For tests and demos "
        "where no Hadoop is installed.",
        epilog=FAULTS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        "--queue",
        action="append",
        type=_queue_arg,
        default=[],
        metavar="NAME=CAPACITY",
        help="a Capacity Scheduler leaf under root (repeatable; replaces the default queues): "
        "a percentage (all summing to 100) or an absolute vector like "
        "analytics=[memory=8192,vcores=8]; with --scheduler fair, a weight",
    )
    p.add_argument(
        "--hadoop-version",
        choices=sorted(HADOOP_VERSIONS),
        default="3.4",
        help="JSON shapes to serve: 3.4 (3.4.1, the default), 3.3 (3.3.6, the compose "
        "cluster's image: no capacity vectors, weights, queue mode/type/creation method) or "
        "3.5 (3.5.0, the local Hadoop; Jersey 2: empty lists as {}, no empty maps/lists, "
        "full queue paths in apps; checked against tests/golden/rm-3.5.0)",
    )
    p.add_argument(
        "--app-seconds", type=float, default=60.0, help="how long an app runs (default 60)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for durations and --apps")
    p.add_argument("--apps", type=int, default=0, help="background apps to submit at start")
    p.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: run until ^C)"
    )
    f = p.add_argument_group("faults (see also the fault-control endpoint below)")
    f.add_argument(
        "--delay", type=float, default=0.0, help="every answer waits this many seconds first"
    )
    f.add_argument(
        "--outage-after",
        type=float,
        metavar="SECONDS",
        help="start an outage this many seconds after start (default: no outage)",
    )
    f.add_argument(
        "--outage-mode",
        choices=["503", "drop", "refused"],
        default="503",
        help="what the outage looks like: 503 answers (default), dropped connections, or a "
        "closed port (refused)",
    )
    f.add_argument(
        "--outage-seconds",
        type=float,
        help="how long the outage lasts (default: until POST /emulator/faults ends it; "
        "required with --outage-mode refused, which closes that endpoint too)",
    )
    f.add_argument(
        "--no-faults-endpoint",
        action="store_true",
        help=f"do not serve {FAULTS_PATH}",
    )
    p.set_defaults(func=_cmd_emulate_rm)


def build_emulator(args: argparse.Namespace) -> RMEmulator | RMHAPair:
    """The emulator (or HA pair) ``args`` describe, not started. Raises ``ValueError``."""
    for name in ("nodes", "gpus_per_node", "apps"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
    if args.app_seconds <= 0:
        raise ValueError("--app-seconds must be > 0")
    delay = getattr(args, "delay", 0.0)
    outage_after = getattr(args, "outage_after", None)
    outage_seconds = getattr(args, "outage_seconds", None)
    outage_mode = getattr(args, "outage_mode", "503")
    if delay < 0:
        raise ValueError("--delay must be >= 0")
    if outage_after is not None and outage_after < 0:
        raise ValueError("--outage-after must be >= 0")
    if outage_seconds is not None and outage_seconds <= 0:
        raise ValueError("--outage-seconds must be > 0")
    if outage_seconds is not None and outage_after is None:
        raise ValueError("--outage-seconds needs --outage-after")
    control = not getattr(args, "no_faults_endpoint", False)
    if outage_after is not None and outage_mode == "refused" and outage_seconds is None:
        raise ValueError("--outage-mode refused needs --outage-seconds (nothing could end it)")
    if outage_after is not None and outage_seconds is None and not control:
        raise ValueError("an outage without --outage-seconds needs the faults endpoint to end")
    queues = dict(getattr(args, "queue", None) or ()) or None
    common: dict[str, Any] = {
        "scheduler": args.scheduler,
        "queues": queues,
        "hadoop_version": getattr(args, "hadoop_version", "3.4"),
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
    names = list(queues or {"default": 0, "hive": 0, "ml": 0})
    gpu_queue = next((q for q in ("ml", "gpu") if q in names), names[-1])
    for k in range(args.apps):
        queue = names[k % len(names)]
        sim.add_app(
            name=f"background-{k}",
            user=rng.choice(["alice", "bob", "carol"]),
            queue=queue,
            gpus=rng.choice([1, 2, 4]) if queue == gpu_queue else 0,
            tags=("yarn-arbiter-ml",) if queue == gpu_queue else ("hive",),
        )
    if args.standby_port is not None:
        emu: RMEmulator | RMHAPair = RMHAPair(
            sim, host=args.host, ports=(args.port, args.standby_port)
        )
        rms = list(emu.rms)
        for rm in rms:
            rm.control = control
    else:
        emu = RMEmulator(sim, host=args.host, port=args.port, control=control)
        rms = [emu]
    for rm in rms:
        rm.set_delay(delay)
    return emu


def _schedule_faults(args: argparse.Namespace, emu: RMEmulator | RMHAPair) -> None:
    """Start the timed outage ``args`` ask for (after the emulator listens)."""
    if getattr(args, "outage_after", None) is None:
        return
    active = emu.active if isinstance(emu, RMHAPair) else emu
    active.schedule_outage(
        args.outage_mode, after=args.outage_after, seconds=getattr(args, "outage_seconds", None)
    )


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
    _schedule_faults(args, emu)
    sim = emu.cluster
    gpus = sum(n.gpus for n in sim.nodes.values())
    roles = ["ACTIVE", "STANDBY"]
    for k, url in enumerate(urls):
        role = f" ({roles[k]})" if len(urls) > 1 else ""
        print(
            f"ResourceManager emulator{role}: {url}  [Hadoop {sim.version}, {args.scheduler} "
            f"scheduler, {len(sim.nodes)} nodes, {gpus} GPUs]"
        )
    if not getattr(args, "no_faults_endpoint", False):
        print(f"fault control: GET/POST {urls[0]}{FAULTS_PATH}")
    print(f"export {ENV_RM_URL}={','.join(urls)}", flush=True)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        stop_on_signals(stop, (signal.SIGTERM,))
    try:
        stop.wait(args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    return 0
