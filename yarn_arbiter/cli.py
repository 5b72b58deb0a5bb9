"""``yarn-arbiter``: the umbrella command line, wiring every package's subcommands together.

* ``demo``: the arbiter on a real local YARN (:mod:`yarn_arbiter.yarn_demo`) or, with
  ``--on standalone``, served alone with example application masters
  (:mod:`yarn_arbiter.live_demo`).
* ``rounds``: Themis rounds on a declared cluster (no server): synthetic ML apps report ρ, the
  worst (1 - f) bid for the free GPUs, a partial-allocation auction decides, leftovers go to the
  others, leases expire and the next round starts. Each round is printed as a table.
* ``cluster``: list the shipped cluster specs or describe one (or a YAML file).
* ``serve``: the gRPC arbiter, alone or with the YARN bridge (:mod:`yarn_arbiter.serve`).
* ``config``: the configuration keys with their effective values.
* ``simulate`` / ``compare``: replay a trace under one or several policies
  (:mod:`arbiter.sim.cli`); ``admin`` (:mod:`yarn_arbiter.admin_cli`); ``submit``, the
  bridge's and the local Hadoop's subcommands (:mod:`yarn_bridge`).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from arbiter.auction import Rounding
from arbiter.bids import generate_bid
from arbiter.cluster import Cluster, ClusterSpecError, load_cluster, shipped_specs
from arbiter.config import Schema, env_name
from arbiter.placement import placement_of
from arbiter.rounds import (
    DEFAULT_FAIRNESS_KNOB,
    DEFAULT_LEASE_SECONDS,
    ArbiterState,
    check_invariants,
    expire_leases,
    filter_participants,
    free_gpus,
    run_round,
)
from arbiter.synthetic import SyntheticApp, random_apps
from arbiter.tables import format_table


def _fmt_rho(rho: float) -> str:
    return "inf" if math.isinf(rho) else f"{rho:.3f}"


def _shape(cluster: Cluster, gpus: frozenset[str]) -> str:
    if not gpus:
        return "-"
    per_machine = Counter(cluster.gpu(g).machine for g in gpus)
    racks = len({cluster.gpu(g).rack for g in gpus})
    where = "+".join(str(n) for n in sorted(per_machine.values(), reverse=True))
    return f"{len(gpus)} ({where}{', ' + str(racks) + ' racks' if racks > 1 else ''})"


def run_demo(
    cluster: Cluster,
    *,
    apps: int,
    rounds: int,
    fairness_knob: float,
    lease_seconds: float,
    seed: int,
    rounding: Rounding,
    out=sys.stdout,
) -> ArbiterState:
    """Run ``rounds`` Themis rounds with synthetic apps and print each one."""
    rng = random.Random(seed)
    population: dict[str, SyntheticApp] = {a.app_id: a for a in random_apps(apps, rng)}
    estimators = {a.app_id: a.rho(cluster.num_gpus) for a in population.values()}
    state = ArbiterState(cluster.gpu_ids)
    now = 0.0
    print(
        f"cluster {cluster.name}: {cluster.num_gpus} GPUs on {len(cluster.machines)} machines "
        f"in {len(cluster.racks)} racks; {apps} apps; f = {fairness_knob}; "
        f"lease {lease_seconds:.0f} s; rounding {rounding.value}",
        file=out,
    )
    last_bid: dict[str, float] = {}
    for _ in range(rounds):
        state, _freed = expire_leases(state, now)
        offered = free_gpus(state, now)
        held = {a: state.held_by(a, now) for a in population}
        if not offered or not population:
            break
        rho_now = {a: estimators[a](held[a], placement_of(cluster, held[a])) for a in population}
        participants = filter_participants(rho_now, fairness_knob, tie_break=last_bid)
        bids = [
            generate_bid(
                a,
                cluster,
                offered,
                estimators[a],
                demand_max=population[a].demand_max,
                held=held[a],
            )
            for a in participants
        ]
        others = [a for a in population if a not in participants]
        state, outcome = run_round(
            state,
            offered=offered,
            bids=bids,
            participants=participants,
            non_participants=others,
            now=now,
            seed=seed + state.round,
            lease_seconds=lease_seconds,
            rounding=rounding,
            room={a: population[a].demand_max - len(held[a]) for a in population},
        )
        last_bid.update(dict.fromkeys(participants, float(outcome.round)))
        check_invariants(state)
        r = outcome.result
        print(
            f"\nround {outcome.round} at t = {now:.0f} s: {len(offered)} GPUs offered, "
            f"{len(participants)} of {len(population)} apps bid (largest ρ first)",
            file=out,
        )
        rows = []
        for a in participants:
            rows.append(
                [
                    a,
                    str(population[a].demand_max),
                    _fmt_rho(rho_now[a]),
                    _shape(cluster, r.pf_allocation[a]),
                    _fmt_rho(r.pf_rho[a]),
                    f"{r.c[a]:.3f}",
                    f"{r.lease_fraction[a] * lease_seconds:.0f} s" if r.allocation[a] else "-",
                ]
            )
        print(
            format_table(
                ["app", "demand", "rho now", "PF GPUs", "rho PF", "c_i", "held for"], rows
            ),
            file=out,
        )
        leftovers: Counter[str] = Counter()
        for lease in outcome.granted:
            if lease.source == "leftover":
                leftovers[lease.app_id] += len(lease.gpus)
        leased = frozenset().union(*(lease.gpus for lease in outcome.granted))
        print(
            "leftover to non-bidders: "
            + (", ".join(f"{a} x{n}" for a, n in sorted(leftovers.items())) or "none")
            + f"; idle (no app can use them): {len(offered - leased)} GPUs",
            file=out,
        )
        # Apps train until the next lease ends; finished apps leave (their leases end too).
        later = min((lease.end for lease in state.leases), default=now + lease_seconds)
        population, estimators, state = _progress(cluster, population, state, now, later)
        now = later
        if not population:
            print("\nall apps finished", file=out)
            break
    return state


def _progress(
    cluster: Cluster,
    population: dict[str, SyntheticApp],
    state: ArbiterState,
    start: float,
    end: float,
) -> tuple[dict[str, SyntheticApp], dict, ArbiterState]:
    """Advance every app from ``start`` to ``end`` on what it holds; drop finished apps."""
    moved: dict[str, SyntheticApp] = {}
    for a, app in population.items():
        gpus = state.held_by(a, start)
        slowdown = app.locality.slowdown(placement_of(cluster, gpus))
        later = app.advance(end - start, len(gpus), slowdown)
        if later.iters_left > 0:
            moved[a] = later
    gone = set(population) - set(moved)
    if gone:
        state = replace(
            state,
            leases=tuple(lease for lease in state.leases if lease.app_id not in gone),
        )
    return moved, {a: app.rho(cluster.num_gpus) for a, app in moved.items()}, state


def _cmd_live_demo(args: argparse.Namespace) -> int:
    if args.on == "yarn":
        from yarn_arbiter.yarn_demo import run_yarn_demo

        return run_yarn_demo(args.workdir, hive=not args.no_hive)
    from yarn_arbiter.live_demo import run_live_demo

    if args.apps < 1:
        raise ValueError("--apps must be >= 1")
    if args.seconds <= 0 or args.lease_seconds <= 0:
        raise ValueError("--seconds and --lease-seconds must be positive")
    run_live_demo(
        load_cluster(args.cluster),
        apps=args.apps,
        seconds=args.seconds,
        lease_seconds=args.lease_seconds,
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    for name in ("apps", "rounds"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be >= 1")
    if not 0.0 <= args.fairness_knob <= 1.0:
        raise ValueError(f"fairness knob f must be in [0, 1], got {args.fairness_knob}")
    if not args.lease_seconds > 0:
        raise ValueError(f"--lease-seconds must be positive, got {args.lease_seconds}")
    cluster = load_cluster(args.cluster)
    run_demo(
        cluster,
        apps=args.apps,
        rounds=args.rounds,
        fairness_knob=args.fairness_knob,
        lease_seconds=args.lease_seconds,
        seed=args.seed,
        rounding=Rounding(args.rounding),
    )
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    if not args.spec:
        for name, path in sorted(shipped_specs().items()):
            c = load_cluster(path)
            print(f"{name:18s} {c.num_gpus:4d} GPUs  {len(c.machines):3d} machines  {path}")
        return 0
    c = load_cluster(args.spec)
    print(f"{c.name}: {c.num_gpus} GPUs, {len(c.machines)} machines, {len(c.racks)} racks")
    kinds = Counter((m.rack, m.slots, m.gpus_per_slot, m.gpu_type) for m in c.machines)
    rows = [
        [rack, str(n), f"{slots} x {per}", gtype, str(n * slots * per)]
        for (rack, slots, per, gtype), n in kinds.items()
    ]
    print(format_table(["rack", "machines", "slots x GPUs", "type", "GPUs"], rows))
    return 0


def state_dir(flag: str | None, environ: Mapping[str, str]) -> Path:
    """Where ``serve`` keeps its journal and credentials unless told otherwise: ``--state-dir``,
    else systemd's ``$STATE_DIRECTORY`` (``StateDirectory=`` in the unit), else
    ``$YARN_ARBITER_STATE_DIR``, else ``$XDG_STATE_HOME/yarn-arbiter`` (default
    ``~/.local/state/yarn-arbiter``). Never the current directory.

    >>> state_dir(None, {"STATE_DIRECTORY": "/var/lib/yarn-arbiter"})
    PosixPath('/var/lib/yarn-arbiter')
    >>> state_dir(None, {"XDG_STATE_HOME": "/s"})
    PosixPath('/s/yarn-arbiter')
    """
    if flag:
        return Path(flag)
    for name in ("STATE_DIRECTORY", "YARN_ARBITER_STATE_DIR"):
        if environ.get(name):
            return Path(environ[name].split(":")[0])
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "yarn-arbiter"


NO_CLUSTER = (
    "serve needs to know which cluster it schedules; give one of:\n"
    "  --rm-url http://RM:8088[,http://RM2:8088]   the GPUs the ResourceManager reports "
    "(with the YARN bridge)\n"
    "  --hadoop-conf DIR (or $HADOOP_CONF_DIR)     the same, the RM address(es) read from "
    "DIR/yarn-site.xml\n"
    "  --cluster SPEC                              a declared cluster (yarn-arbiter cluster "
    "lists the shipped specs)\n"
    "  --demo                                      the Themis paper's 64-GPU testbed, for "
    "trying the arbiter out"
)


def _cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from arbiter.config import load_config
    from arbiter.logs import setup_logging
    from yarn_arbiter.serve import serve

    setup_logging(args.log_level, args.log_format)
    environ = dict(os.environ)
    if args.port is not None:
        environ[env_name("arbiter.grpc.port")] = str(args.port)
    if args.journal is not None:
        environ[env_name("arbiter.journal.path")] = args.journal
    if args.policy is not None:
        environ[env_name("arbiter.policy")] = args.policy
    if args.policy_knobs is not None:
        environ[env_name("arbiter.policy.knobs")] = args.policy_knobs
    if args.metrics_port is not None:
        environ[env_name("arbiter.metrics.port")] = str(args.metrics_port)
    if args.ha_zk is not None:
        environ[env_name("arbiter.ha.zk-address")] = args.ha_zk
    if args.ha_id is not None:
        environ[env_name("arbiter.ha.id")] = args.ha_id
    from yarn_bridge.bridge_cli import bridge_settings
    from yarn_bridge.hadoop_conf import rm_urls_from_conf_dir

    config = load_config(args.config, environ=environ, schemas=config_schemas())
    if config.sources["arbiter.journal.path"] == "default":
        # the journal (and the credentials generated beside it) under the state directory
        home = state_dir(args.state_dir, environ)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = config.with_value(
            "arbiter.journal.path", str(home / "arbiter-journal.db"), source="state directory"
        )
    conf_dir = args.hadoop_conf
    if conf_dir is None and not (args.cluster or args.demo):
        conf_dir = environ.get("HADOOP_CONF_DIR") or environ.get("YARN_CONF_DIR")
    if conf_dir and not args.rm_url and not config["yarn.arbiter.bridge.rm.url"]:
        urls = rm_urls_from_conf_dir(conf_dir, environ)
        logging.getLogger("yarn_arbiter.serve").info(
            "ResourceManager from %s/yarn-site.xml: %s", conf_dir, ", ".join(urls)
        )
        args.rm_url = ",".join(urls)
    bridge = bridge_settings(args, environ, config)  # None unless an RM URL is set
    if bridge is not None:
        return serve(None, config, bridge=bridge)
    if args.demo and args.cluster:
        raise ValueError("--demo serves the Themis testbed: give --demo or --cluster, not both")
    if not (args.cluster or args.demo):
        raise ValueError(NO_CLUSTER)
    return serve(load_cluster(args.cluster or "themis-testbed"), config)


def config_schemas() -> tuple[Schema, ...]:
    """Every package's configuration keys: the arbiter's (``arbiter.*``), the YARN bridge's
    (``yarn.arbiter.bridge.*``) and the replanner's (``qoop.hive.*``). ``serve`` and
    ``config`` load all of them, so one file may hold them all and both judge it alike."""
    from arbiter.config import SCHEMA
    from hive_hooks.settings import REPLANNER_SCHEMA
    from yarn_bridge.settings import BRIDGE_SCHEMA

    return (SCHEMA, BRIDGE_SCHEMA, REPLANNER_SCHEMA)


def _cmd_config(args: argparse.Namespace) -> int:
    """Every configuration key with its effective value, where it came from, and its meaning;
    a bad file or environment value fails here with the same error ``serve`` would give."""
    from arbiter.config import load_config

    config = load_config(args.config, schemas=config_schemas())
    keys = [k for k in config.values if not args.key or any(part in k for part in args.key)]
    if not keys:
        raise ValueError(f"no configuration key contains {' or '.join(args.key)!r}")
    rows = []
    for key in keys:
        prop, value = config.property(key), config[key]
        shown = "" if value is None else str(value).lower() if isinstance(value, bool) else value
        variables = ", ".join((env_name(key), *prop.legacy_env))
        rows.append([key, str(shown), config.sources[key], variables, prop.help])
    print(format_table(["key", "value", "source", "environment", "meaning"], rows))
    return 0


def _cmd_completion(args: argparse.Namespace) -> int:
    from arbiter.about import version_line
    from yarn_arbiter.completion import bash_script

    parser = build_parser()
    add_version_flags(parser, version_line("yarn-arbiter"))
    print(bash_script(parser), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yarn-arbiter",
        description="Fair GPU leases for ML apps on a YARN cluster (Themis auctions).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    live = sub.add_parser(
        "demo",
        help="the arbiter on a real local YARN: leases become GPU containers, shares executors",
        description="--on yarn (the default): start a real local YARN (Hadoop 3.5.0 RM and "
        "NodeManagers from their jars) and the arbiter on it, submit ML apps with yarn-arbiter "
        "submit whose GPU leases become YARN containers on the leased nodes, then run Hive "
        "queries whose arbiter share is the number of Spark executors they get in YARN. "
        "--on standalone: serve the arbiter alone on a declared cluster and run example "
        "Hyperband AMs (virtual GPUs); ends with a table of rounds, leases and ρ.",
    )
    live.add_argument("--on", choices=["yarn", "standalone"], default="yarn",
                      help="yarn (default): a real local YARN; standalone: no Hadoop")  # fmt: skip
    live.add_argument("--workdir", type=Path, default=Path(".yarn-local"),
                      help="--on yarn: the local YARN's directory (default .yarn-local; reused "
                      "when a cluster runs there)")  # fmt: skip
    live.add_argument("--no-hive", action="store_true", help="--on yarn: skip the Hive queries")
    live.add_argument("--cluster", default="themis-testbed", help="spec name or YAML path")
    live.add_argument("--apps", type=int, default=8, help="example AMs (default 8)")
    live.add_argument("--seconds", type=float, default=60.0, help="time limit (default 60)")
    live.add_argument(
        "--lease-seconds", type=float, default=3.0, help="lease length (default 3 s, to see rounds)"
    )
    live.set_defaults(func=_cmd_live_demo)
    demo = sub.add_parser(
        "rounds",
        help="walk through Themis rounds with synthetic apps (no server)",
        description="Run round-by-round partial-allocation auctions with synthetic ML apps "
        "on a declared cluster and print every round (pure mechanism, no server).",
    )
    demo.add_argument(
        "--cluster",
        default="themis-testbed",
        help="shipped spec name or YAML path (default: themis-testbed, 64 K80 GPUs)",
    )
    demo.add_argument("--apps", type=int, default=24, help="number of ML apps (default 24)")
    demo.add_argument("--rounds", type=int, default=4, help="auction rounds to run (default 4)")
    demo.add_argument(
        "--fairness-knob",
        type=float,
        default=DEFAULT_FAIRNESS_KNOB,
        help=f"f: the (1 - f) apps with the worst rho bid each round "
        f"(default {DEFAULT_FAIRNESS_KNOB})",
    )
    demo.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_SECONDS,
        help="lease length in seconds (default 600)",
    )
    demo.add_argument(
        "--rounding",
        choices=[r.value for r in Rounding],
        default=Rounding.LEASE_TIME.value,
        help="how a fractional c_i becomes GPUs (default lease-time)",
    )
    demo.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    demo.set_defaults(func=_cmd_demo)
    serve = sub.add_parser(
        "serve",
        help="run the arbiter daemon beside a YARN cluster (or on a declared cluster)",
        description="Serve the arbiter's gRPC API (AppMaster, QueryShare, Admin, health, "
        "reflection) with a durable journal, for the cluster the ResourceManager reports "
        "(--rm-url, --hadoop-conf) or a declared one (--cluster, --demo). Settings, later ones "
        "winning: the defaults, --config (Hadoop *-site.xml or key=value), the environment "
        "variables named after the keys (ARBITER_*, YARN_ARBITER_BRIDGE_*), the older "
        "YARN_ARBITER_RM_URL, then the flags below.",
    )
    serve.add_argument(
        "--cluster",
        help="a declared cluster: a shipped spec name (yarn-arbiter cluster lists them) or a "
        "YAML file; ignored when the ResourceManager gives the cluster (--rm-url)",
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="serve the Themis paper's 64-GPU testbed (a declared cluster, to try it out)",
    )
    serve.add_argument(
        "--hadoop-conf",
        metavar="DIR",
        help="read the ResourceManager address(es), RM HA ids included, from DIR/yarn-site.xml "
        "(default $HADOOP_CONF_DIR when neither --cluster nor --demo is given)",
    )
    serve.add_argument("--port", type=int, help="gRPC listen port (arbiter.grpc.port)")
    serve.add_argument(
        "--journal",
        help="the arbiter's durable state, an SQLite file (arbiter.journal.path; default "
        "arbiter-journal.db in the state directory)",
    )
    serve.add_argument(
        "--state-dir",
        help="where the journal and generated credentials live by default ($STATE_DIRECTORY "
        "under systemd, else $YARN_ARBITER_STATE_DIR, else ~/.local/state/yarn-arbiter)",
    )
    serve.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default INFO; DEBUG also shows the HTTP and gRPC libraries' lines)",
    )
    serve.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text: one readable line per event (default); json: one JSON object per line",
    )
    serve.add_argument("--config", help="configuration file (arbiter-site.xml or key=value)")
    serve.add_argument(
        "--policy",
        help="scheduling policy (arbiter.policy): themis runs auctions with Agents; fifo, las, "
        "yarn-cs, tiresias, tiresias-gittins, afs-l, afs-p, synergy-tune, synergy-opt, gandiva, "
        "srtf, optimus decide centrally and grant leases",
    )
    serve.add_argument(
        "--policy-knobs", help="the policy's knobs as name=value,... (arbiter.policy.knobs)"
    )
    serve.add_argument(
        "--metrics-port",
        type=int,
        help="serve the web console (/), Prometheus /metrics, /healthz and /readyz on this "
        "HTTP port (arbiter.metrics.port; 0: any free port; bound to "
        "arbiter.metrics.bind-host, default 127.0.0.1; on any other address the console asks "
        "for the admin token)",
    )
    serve.add_argument(
        "--ha-zk",
        metavar="HOST:PORT[,...]",
        help="run as one of an active/standby pair elected on this ZooKeeper, the journal kept "
        "in it (arbiter.ha.zk-address; needs --ha-id, a fixed --port and shared token files)",
    )
    serve.add_argument("--ha-id", help="this arbiter's name in the HA pair (arbiter.ha.id)")
    from yarn_bridge.bridge_cli import add_serve_arguments

    add_serve_arguments(serve)
    serve.set_defaults(func=_cmd_serve)
    config = sub.add_parser(
        "config",
        help="list the configuration keys with their effective values, or check a config file",
        description="Print every key (arbiter.*, the YARN bridge's yarn.arbiter.bridge.*, the "
        "replanner's qoop.hive.*): its effective value (defaults, then --config, then the "
        "environment variables, as serve reads them; serve's flags go over them), where the "
        "value came from, the environment variables that set it, and what it means. A "
        "malformed value fails with the error serve would give, naming the key and its source.",
    )
    config.add_argument("--config", help="configuration file (arbiter-site.xml or key=value)")
    config.add_argument("key", nargs="*", help="only keys containing one of these strings")
    config.set_defaults(func=_cmd_config)
    cluster = sub.add_parser("cluster", help="list shipped cluster specs or describe one")
    cluster.add_argument("spec", nargs="?", help="spec name or YAML path")
    cluster.set_defaults(func=_cmd_cluster)
    from arbiter.sim.cli import add_parsers
    from arbiter.sim.sweep_cli import add_parser as add_sweep_parser
    from yarn_arbiter.admin_cli import add_parser as add_admin_parser
    from yarn_bridge.bridge_cli import add_parsers as add_submit_parser
    from yarn_bridge.cli import add_parsers as add_bridge_parsers
    from yarn_bridge.hadoop_cli import add_parsers as add_hadoop_parsers

    add_parsers(sub)
    add_sweep_parser(sub)
    add_hadoop_parsers(sub)
    add_admin_parser(sub)
    add_bridge_parsers(sub)
    add_submit_parser(sub)
    from yarn_bridge.app_cli import add_parsers as add_app_parser

    add_app_parser(sub)
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash; zsh through bashcompinit)",
        description="Print the bash completion script for yarn-arbiter, e.g. "
        "yarn-arbiter completion bash > /etc/bash_completion.d/yarn-arbiter",
    )
    completion.add_argument("shell", choices=["bash"], help="the shell (bash)")
    completion.set_defaults(func=_cmd_completion)
    return parser


def add_version_flags(parser: argparse.ArgumentParser, line: str) -> None:
    """``--version`` on ``parser`` and on every subcommand below it."""
    parser.add_argument("--version", action="version", version=line)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                if not any("--version" in a.option_strings for a in sub._actions):
                    add_version_flags(sub, line)


def main(argv: Sequence[str] | None = None) -> int:
    from arbiter.about import version_line
    from arbiter.sqlite_store import StoreError

    parser = build_parser()
    add_version_flags(parser, version_line("yarn-arbiter"))
    args = parser.parse_args(argv)
    from yarn_bridge.rm import RMError

    try:
        return args.func(args)
    except BrokenPipeError:
        # `yarn-arbiter config | head`: the reader left; no traceback, and none at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command killed by it
    except (ClusterSpecError, ValueError, FileNotFoundError, RMError) as exc:  # PolicyError too
        print(f"yarn-arbiter: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, StoreError) as exc:  # the environment, not the command line: a port in
        # use, a journal that cannot be opened or written
        print(f"yarn-arbiter: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
