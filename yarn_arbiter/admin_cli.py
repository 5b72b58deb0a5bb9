"""``yarn-arbiter admin``: an operator's client for a running arbiter (like ``yarn rmadmin``).

It calls the Admin service of ``protos/yarnarbiter/v1/arbiter.proto`` (spec B.7: the arbiter's
state, its leases and apps, knob changes, draining a node) over gRPC with the admin credential
in ``x-admin-token`` metadata. Subcommands:

- ``state``: cluster, policy, round, GPUs free / leased / drained, and GPUs by machine;
- ``apps``: every registered app with its demand, ρ, GPUs held and whether its Agent is connected;
- ``leases [--app ID]``: live leases (source, round, GPUs, seconds left);
- ``set KEY VALUE``: change a knob at run time (``arbiter.themis.fairness-knob``, ...), printing
  the previous value; the arbiter validates it as it validates its config file;
- ``undrain MACHINE``: offer a drained machine's GPUs again;
- ``drain MACHINE [--grace S]``: revoke the machine's leases with a grace period and stop
  offering its GPUs.

Decisions: the credential comes from ``--token-file`` or, failing that,
``$YARN_ARBITER_ADMIN_TOKEN`` (never a flag, so it stays out of ``ps`` and shell history);
``serve`` prints the file it wrote.
The address defaults to ``$YARN_ARBITER_ADDRESS`` (what an AM launched by ``yarn-arbiter submit``
receives), else ``localhost:50051`` (``arbiter.grpc.port``'s default). TLS and mutual TLS use
the same ``--tls-ca/--tls-cert/--tls-key`` files as ``yarn-arbiter submit``. ``--json`` prints
the reply as protobuf JSON for scripts. A refused call exits 2 with the gRPC status and the
arbiter's message (which names the bad field); nothing is retried, so nothing happens twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from arbiter.agent_env import ENV_ARBITER_ADDRESS
from arbiter.tables import format_table
from arbiter.wire.appmaster import lease_source_from_pb
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc

__all__ = ["ENV_ADMIN_TOKEN", "AdminError", "add_parser", "run_admin"]

ENV_ADMIN_TOKEN = "YARN_ARBITER_ADMIN_TOKEN"
DEFAULT_ADDRESS = "localhost:50051"


def _source_name(value: int) -> str:
    source = lease_source_from_pb(value)
    return source.value if source is not None else "?"


class AdminError(RuntimeError):
    """An admin call could not be made or was refused; the message says why."""


def _token(args: argparse.Namespace, environ: dict[str, str]) -> str:
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise AdminError(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise AdminError(f"--token-file {args.token_file} is empty")
        return token
    token = environ.get(ENV_ADMIN_TOKEN, "").strip()
    if token:
        return token
    from yarn_arbiter.cli import state_dir

    default = state_dir(None, environ) / "arbiter-journal.db.admin-token"
    if default.is_file() and default.read_text().strip():
        return default.read_text().strip()  # what serve generated in its state directory
    raise AdminError(
        f"no admin credential: pass --token-file (serve prints 'admin token in PATH'; by "
        f"default <journal>.admin-token, {default} for serve's default journal) or set "
        f"${ENV_ADMIN_TOKEN}"
    )


def _channel(args: argparse.Namespace, address: str) -> grpc.Channel:
    from yarn_bridge.submit import SubmitError, channel_credentials

    try:
        creds = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except SubmitError as exc:
        raise AdminError(str(exc)) from None
    if creds is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, creds)


def _call(method: Callable[..., Any], request: Any, token: str, address: str, timeout: float):
    try:
        return method(request, metadata=[("x-admin-token", token)], timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
        detail = exc.details() if hasattr(exc, "details") else str(exc)
        if code == grpc.StatusCode.UNAVAILABLE:
            detail = f"no arbiter reachable at {address} ({detail})"
        raise AdminError(f"{code.name}: {detail}") from None


def _state_text(state: pb.ClusterState, leases: pb.ListLeasesResponse) -> str:
    leased = {g for lease in leases.leases for g in lease.gpu_ids}
    free = set(state.free_gpu_ids)
    drained = set(state.drained_machines)
    lines = [
        f"cluster {state.cluster_name}  policy {state.policy}  round {state.round}",
        f"GPUs {len(state.gpus)}: {len(free)} free, {len(leased)} leased, "
        f"{len(drained)} machine(s) drained",
        "",
    ]
    per: dict[str, Counter[str]] = {}
    types: dict[str, str] = {}
    for g in state.gpus:
        c = per.setdefault(g.machine, Counter())
        c["gpus"] += 1
        c["free"] += g.id in free
        c["leased"] += g.id in leased
        types[g.machine] = g.gpu_type
    rows = [
        [
            m,
            types[m],
            str(c["gpus"]),
            str(c["leased"]),
            str(c["free"]),
            "drained" if m in drained else "",
        ]
        for m, c in sorted(per.items())
    ]
    lines.append(format_table(["machine", "type", "GPUs", "leased", "free", "state"], rows))
    return "\n".join(lines)


def _apps_text(reply: pb.ListAppsResponse) -> str:
    rows = [
        [
            a.app_id,
            a.app_name,
            a.user,
            a.queue,
            str(a.max_gpu_demand),
            "inf" if a.rho == float("inf") else f"{a.rho:.3g}",
            str(len(a.held_gpu_ids)),
            "yes" if a.connected else "no",
        ]
        for a in reply.apps
    ]
    headers = ["app", "name", "user", "queue", "demand", "rho", "GPUs held", "connected"]
    return format_table(headers, rows) if rows else "no apps registered"


def _leases_text(reply: pb.ListLeasesResponse, now: float) -> str:
    rows = [
        [
            lease.lease_id,
            lease.app_id,
            _source_name(lease.source),
            str(lease.round),
            str(len(lease.gpu_ids)),
            f"{max(0.0, lease.end_unix_s - now):.1f}",
            ",".join(lease.gpu_ids),
        ]
        for lease in sorted(reply.leases, key=lambda x: (x.app_id, x.start_unix_s))
    ]
    headers = ["lease", "app", "source", "round", "GPUs", "s left", "GPU ids"]
    return format_table(headers, rows) if rows else "no live leases"


def run_admin(args: argparse.Namespace, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    address = args.address or environ.get(ENV_ARBITER_ADDRESS) or DEFAULT_ADDRESS
    token = _token(args, environ)
    channel = _channel(args, address)
    stub = rpc.AdminStub(channel)
    t = args.timeout
    try:
        if args.admin_command == "state":
            state = _call(stub.GetClusterState, pb.ClusterStateRequest(), token, address, t)
            leases = _call(stub.ListLeases, pb.ListLeasesRequest(), token, address, t)
            reply: Any = state
            text = _state_text(state, leases)
        elif args.admin_command == "apps":
            reply = _call(stub.ListApps, pb.ListAppsRequest(), token, address, t)
            text = _apps_text(reply)
        elif args.admin_command == "leases":
            reply = _call(stub.ListLeases, pb.ListLeasesRequest(app_id=args.app), token, address, t)
            text = _leases_text(reply, time.time())
        elif args.admin_command == "set":
            request = pb.SetKnobRequest(key=args.key, value=args.value)
            reply = _call(stub.SetKnob, request, token, address, t)
            text = f"{reply.key}: {reply.previous_value} -> {reply.value}"
        elif args.admin_command == "undrain":
            request = pb.UndrainNodeRequest(machine=args.machine)
            reply = _call(stub.UndrainNode, request, token, address, t)
            text = (
                f"{args.machine} offered again"
                if reply.was_drained
                else f"{args.machine} was not drained: nothing changed"
            )
        else:  # drain
            request = pb.DrainNodeRequest(machine=args.machine, grace_seconds=args.grace)
            reply = _call(stub.DrainNode, request, token, address, t)
            n = len(reply.revoked_lease_ids)
            text = f"draining {args.machine}: {n} lease(s) revoked" + (
                f" ({', '.join(reply.revoked_lease_ids)})" if n else ""
            )
    finally:
        channel.close()
    if args.json:
        print(json.dumps(MessageToDict(reply, preserving_proto_field_name=True), indent=2))
    else:
        print(text)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    admin = sub.add_parser(
        "admin",
        help="operate a running arbiter: state, apps, leases, knobs, draining a node",
        description="Call a running arbiter's Admin service with the admin credential "
        f"(--token-file, or ${ENV_ADMIN_TOKEN}). The address defaults to "
        f"${ENV_ARBITER_ADDRESS}, else {DEFAULT_ADDRESS}.",
    )
    admin.add_argument("--address", help="arbiter host:port")
    admin.add_argument(
        "--token-file",
        help="file holding the admin token (serve prints its path; default <journal>.admin-token)",
    )
    admin.add_argument("--tls-ca", help="CA bundle to verify the arbiter's TLS certificate")
    admin.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    admin.add_argument("--tls-key", help="client key (mutual TLS)")
    admin.add_argument("--timeout", type=float, default=10.0, help="seconds per call (10)")
    admin.add_argument("--json", action="store_true", help="print the reply as JSON")
    cmds = admin.add_subparsers(dest="admin_command", required=True)
    cmds.add_parser("state", help="cluster, policy, round and GPUs by machine")
    cmds.add_parser("apps", help="registered apps with demand, rho, GPUs held, connection")
    leases = cmds.add_parser("leases", help="live leases")
    leases.add_argument("--app", default="", help="only this app's leases")
    knob = cmds.add_parser(
        "set",
        help="change a knob at run time (validated by the arbiter)",
        description="Change a configuration knob of the running arbiter, e.g. "
        "'set arbiter.themis.fairness-knob 0.9'; `yarn-arbiter config` lists the keys.",
    )
    knob.add_argument("key")
    knob.add_argument("value")
    drain = cmds.add_parser("drain", help="revoke a machine's leases and stop offering it")
    drain.add_argument("machine", help="machine name (see `admin state`)")
    drain.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="seconds the apps get to checkpoint before their GPUs move (default 30, as "
        "arbiter.revocation.grace.seconds; 0 moves them now)",
    )
    undrain = cmds.add_parser("undrain", help="offer a drained machine's GPUs again")
    undrain.add_argument("machine", help="machine name (see `admin state`)")
    admin.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        return run_admin(args)
    except AdminError as exc:
        print(f"yarn-arbiter admin: error: {exc}", file=sys.stderr)
        return 2
