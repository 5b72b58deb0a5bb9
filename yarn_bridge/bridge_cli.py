"""The YARN bridge's entry points: ``yarn-arbiter submit`` and the bridge ``serve`` runs.

* :func:`add_parsers` registers ``submit`` (:mod:`yarn_bridge.submit`) on ``yarn-arbiter``'s
  sub-parsers, as :func:`yarn_bridge.cli.add_parsers` registers ``emulate-rm``.
* :func:`start_bridge` starts what ``yarn-arbiter serve --rm-url URL[,URL]`` runs beside the
  arbiter: one thread that polls the RM every ``poll_s`` seconds, applies what changed to the
  core (:class:`yarn_bridge.watcher.Watcher`) and then enforces leases
  (:class:`yarn_bridge.enforcer.Enforcer`) on the same, fresh view. One thread and one
  :class:`~yarn_bridge.rm.RMClient` (HA-aware, retrying) for both: the enforcer never acts on a
  view older than the last good poll, and never when the poll failed.
* :func:`initial_cluster` builds the arbiter's cluster from the RM's nodes before the core
  exists, so a journal's leases are recovered against the GPUs YARN really has. It waits for an
  RM that does not answer yet and then fails: neither the declared spec (GPUs YARN does not
  have) nor an empty cluster (the journal refuses leases on unknown GPUs) is a safe guess.
* :func:`add_serve_arguments` / :func:`bridge_settings` give ``serve`` its ``--rm-url`` and the
  bridge's knobs: each flag sets a ``yarn.arbiter.bridge.*`` key of the configuration
  (:mod:`yarn_bridge.settings`) and wins over the file and the environment
  (``YARN_ARBITER_RM_URL``, ``YARN_ARBITER_BRIDGE_*``). ``--analytics-queue`` names the
  queue(s) whose capacity is the analytics share's R (default ``analytics``, the compose
  cluster's; :mod:`yarn_bridge.watcher`).
* ``serve`` and ``submit`` take ``--rm-auth-header-command`` / ``--rm-auth-hook`` for SPNEGO
  (:mod:`yarn_bridge.auth`); the hook reaches every RM request of the bridge's client
  (``rm_options["auth"]``) and of ``submit``'s.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1 (RM REST), §1.1 (auth), §1.3 (queues),
§1.5 (submission).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arbiter.cluster import Cluster
from arbiter.config import Config, load_config
from yarn_bridge.auth import add_auth_arguments, auth_hook, auth_hook_from_args
from yarn_bridge.enforcer import DEFAULT_SLACK_S, Enforcer
from yarn_bridge.env import ENV_ARBITER_ADDRESS, ENV_ARBITER_TLS_CA, ENV_RM_URL
from yarn_bridge.rm import RMClient, RMError
from yarn_bridge.rm_events import (
    CLUSTER_NAME,
    DEFAULT_ANALYTICS_QUEUES,
    DEFAULT_CONFIRM_POLLS,
    RMView,
    cluster_from_nodes,
    node_view,
)
from yarn_bridge.settings import (
    ANALYTICS_QUEUES,
    AUTH_CACHE_S,
    AUTH_COMMAND,
    AUTH_HOOK,
    BRIDGE_SCHEMA,
    ENFORCE,
    ENFORCE_SLACK_S,
    GPU_QUEUE,
    KRB5_CONF,
    KRB_KEYTAB,
    KRB_PRINCIPAL,
    RM_CONFIRM_POLLS,
    RM_POLL_S,
    RM_URL,
    RM_USER,
    RM_WAIT_S,
    split_names,
)
from yarn_bridge.submit import (
    LeaseAM,
    SubmitError,
    SubmitSpec,
    application_classpath,
    channel_credentials,
    default_am_jar,
    default_user,
    submit_ml_app,
)
from yarn_bridge.watcher import Watcher

if TYPE_CHECKING:
    from yarn_bridge.arbiter_port import ArbiterPort

__all__ = [
    "Bridge",
    "BridgeSettings",
    "add_parsers",
    "add_serve_arguments",
    "bridge_settings",
    "initial_cluster",
    "start_bridge",
    "with_flags",
]

log = logging.getLogger("yarn_arbiter.bridge")


# --------------------------------------------------------------------------------------------
# The bridge serve runs
# --------------------------------------------------------------------------------------------


def _rm_client(rm_urls: str | Iterable[str], rm_options: Mapping[str, Any]) -> RMClient:
    options = {"timeout": 5.0, "deadline": 10.0, "max_attempts": 4, "backoff": 0.2}
    options.update(rm_options)
    return RMClient(rm_urls, **options)


class Bridge:
    """The watcher and the enforcer on one polling thread (module docstring).

    :meth:`tick` is one poll then one enforcement (tests call it directly); :meth:`start` runs
    it every ``poll_s`` seconds; :meth:`stop` ends the thread and closes the RM client.
    """

    def __init__(
        self,
        core: ArbiterPort,
        rm_urls: str | Iterable[str],
        *,
        poll_s: float = 5.0,
        confirm_polls: int = DEFAULT_CONFIRM_POLLS,
        slack_s: float = DEFAULT_SLACK_S,
        gpu_queue: str | None = None,
        analytics_queues: Iterable[str] | None = None,
        enforce: bool = True,
        rm_user: str | None = None,
        rm_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not poll_s > 0:
            raise ValueError(f"poll_s must be > 0, got {poll_s}")
        self.core = core
        self.poll_s = poll_s
        self.rm = _rm_client(rm_urls, {"user": rm_user, **(rm_options or {})})
        self.watcher = Watcher(
            core,
            self.rm,
            poll_s=poll_s,
            confirm_polls=confirm_polls,
            analytics_queues=analytics_queues,
        )
        self.enforcer = (
            Enforcer(core, self.rm, slack_s=slack_s, gpu_queue=gpu_queue) if enforce else None
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def view(self) -> RMView:
        return self.watcher.view

    def tick(self) -> bool:
        """One poll and, if it succeeded, one enforcement. Returns whether the poll did."""
        events = self.watcher.poll_once()
        if events is None:
            return False
        if self.enforcer is not None:
            self.enforcer.tick(self.watcher.view.apps.values())
        return True

    def status(self) -> dict[str, Any]:
        """The bridge's view of the RM for the arbiter's console and ``/readyz``: ready while
        the last poll succeeded, or the last success is younger than three poll periods (and
        30 s): one failed poll, an RM failover, is not yet unready."""
        stats, view = self.watcher.stats, self.watcher.view
        age = None if stats.last_ok_at is None else max(0.0, time.time() - stats.last_ok_at)
        ready = age is not None and (
            stats.consecutive_failures == 0 or age <= max(3 * self.poll_s, 30.0)
        )
        if age is None:
            detail = "no successful RM poll yet" + (
                f": {stats.last_error}" if stats.last_error else ""
            )
        else:
            detail = f"last RM poll ok {age:.1f} s ago"
            if stats.consecutive_failures:
                detail += f"; {stats.consecutive_failures} failed since: {stats.last_error}"
        ml = sum(1 for a in view.apps.values() if a.kind == "ml")
        return {
            "ready": ready,
            "detail": detail,
            "rm_urls": ", ".join(self.rm.urls),
            "active_rm": self.rm.active_url,
            "poll_seconds": self.poll_s,
            "polls": stats.polls,
            "failed_polls": stats.failures,
            "last_poll_ms": None if stats.last_poll_seconds is None
            else round(stats.last_poll_seconds * 1000, 1),
            "nodes": ", ".join(
                f"{n.node_id} {n.state} {n.gpus} GPUs" for n in sorted(view.nodes.values(),
                                                                      key=lambda n: n.node_id)
            ) or "none",
            "gpu_nodes": sum(1 for n in view.nodes.values() if n.gpus > 0),
            "apps": f"{len(view.apps)} live ({ml} ML, {len(view.apps) - ml} analytics)",
            "analytics_capacity": None if view.capacity is None
            else f"{view.capacity.vcores:g} vcores, {view.capacity.memory_mb:g} MB",
            "enforcing": self.enforcer is not None,
        }  # fmt: skip

    def bind_telemetry(self, telemetry: Any) -> None:
        """Report to the arbiter's telemetry (:class:`arbiter.server.Observed`): RM poll
        times for ``/metrics``, :meth:`status` for the console and ``/readyz``."""
        self.watcher.poll_timer = telemetry.observe_rm_poll
        telemetry.add_source("yarn-bridge", self.status)

    def start(self) -> Bridge:
        if self._thread is not None:
            raise RuntimeError("bridge already started")
        self._thread = threading.Thread(target=self._run, name="yarn-bridge", daemon=True)
        self._thread.start()
        log.info("YARN bridge polling %s every %g s", ", ".join(self.rm.urls), self.poll_s)
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bug must not end the bridge; logged with its traceback
                log.exception("bridge tick crashed; trying again in %g s", self.poll_s)
            self._stop.wait(self.poll_s)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop polling (an RM call in flight finishes first, within its deadline) and give the
        GPU queue all its GPUs back (:meth:`~yarn_bridge.enforcer.Enforcer.release_queue`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self.enforcer is not None:
            self.enforcer.release_queue()
        self.rm.close()


def start_bridge(
    core: ArbiterPort,
    rm_urls: str | Iterable[str],
    *,
    poll_s: float = 5.0,
    confirm_polls: int = DEFAULT_CONFIRM_POLLS,
    slack_s: float = DEFAULT_SLACK_S,
    gpu_queue: str | None = None,
    analytics_queues: Iterable[str] | None = None,
    enforce: bool = True,
    rm_user: str | None = None,
    rm_options: Mapping[str, Any] | None = None,
) -> Bridge:
    """Start the bridge for ``core`` against the RM(s) at ``rm_urls`` (comma-separated or a
    list: RM HA). Returns the running :class:`Bridge`; call ``.stop()`` before stopping the
    arbiter. ``rm_options`` go to :class:`~yarn_bridge.rm.RMClient` (``timeout``,
    ``deadline``, ``auth``, ``verify``, ...)."""
    return Bridge(
        core,
        rm_urls,
        poll_s=poll_s,
        confirm_polls=confirm_polls,
        slack_s=slack_s,
        gpu_queue=gpu_queue,
        analytics_queues=analytics_queues,
        enforce=enforce,
        rm_user=rm_user,
        rm_options=rm_options,
    ).start()


def initial_cluster(
    rm_urls: str | Iterable[str],
    *,
    wait_s: float = 60.0,
    rm_user: str | None = None,
    rm_options: Mapping[str, Any] | None = None,
    name: str = CLUSTER_NAME,
) -> Cluster:
    """The arbiter's cluster as the RM's nodes are now (GPU nodes RUNNING or DECOMMISSIONING,
    :func:`yarn_bridge.rm_events.cluster_from_nodes`). Waits up to ``wait_s`` seconds for an RM
    that does not answer (or answers badly), then raises the last
    :class:`~yarn_bridge.rm.RMError`: an arbiter must not start on a made-up cluster (the
    journal's leases are checked against it)."""
    deadline = time.monotonic() + wait_s
    with _rm_client(rm_urls, {"user": rm_user, **(rm_options or {})}) as rm:
        while True:
            try:
                nodes = [node_view(n) for n in rm.nodes()]
                break
            except RMError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                log.warning("no nodes from the RM yet (%s); retrying for %.0f s", exc, left)
                time.sleep(min(2.0, left))
    return cluster_from_nodes(nodes, name)


# --------------------------------------------------------------------------------------------
# serve's options
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BridgeSettings:
    """What ``serve`` needs to run the bridge (from :func:`bridge_settings`)."""

    rm_urls: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wait_s: float = 60.0  # how long serve waits for the RM at start


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the bridge's options to ``yarn-arbiter serve``."""
    g = parser.add_argument_group(
        "YARN bridge (with --rm-url or $" + ENV_RM_URL + ")",
        "Each option sets a yarn.arbiter.bridge.* key (yarn-arbiter config bridge lists them); "
        "a flag wins over $" + ENV_RM_URL + ", then the YARN_ARBITER_BRIDGE_* variables, then "
        "the --config file, then the defaults.",
    )
    g.add_argument(
        "--rm-url",
        help="ResourceManager web URL(s), comma-separated for RM HA (default $"
        f"{ENV_RM_URL}); the cluster then comes from the RM's nodes, not --cluster",
    )
    g.add_argument("--rm-user", help="simple-auth user for RM REST calls (user.name)")
    add_auth_arguments(g)
    g.add_argument(
        "--rm-wait-seconds",
        type=float,
        help="how long to wait for the RM at start before giving up (default 60)",
    )
    g.add_argument("--rm-poll-seconds", type=float, help="RM poll interval (default 5)")
    g.add_argument(
        "--rm-confirm-polls",
        type=int,
        help="polls an app or node must be missing before it counts as gone "
        f"(default {DEFAULT_CONFIRM_POLLS})",
    )
    g.add_argument(
        "--enforce-slack-seconds",
        type=float,
        help="time after a lease ends before an app still holding its GPUs is killed "
        f"(default {DEFAULT_SLACK_S:g})",
    )
    g.add_argument("--no-enforce", action="store_true", help="watch only: never kill apps")
    g.add_argument(
        "--gpu-queue",
        help="keep this Capacity Scheduler queue's yarn.io/gpu (absolute vectors) equal to the "
        "GPUs under lease, e.g. root.gpu",
    )
    g.add_argument(
        "--analytics-queue",
        action="append",
        default=[],
        help="queue whose capacity is the analytics share's R: its effective guaranteed "
        "resources (Capacity Scheduler) or fair share (Fair Scheduler); repeatable; default "
        f"{', '.join(DEFAULT_ANALYTICS_QUEUES)} (the compose cluster's Hive queue)",
    )


# Each flag of serve's bridge options, the key it sets, and the key's text for the flag's value.
_FLAGS: tuple[tuple[str, str, str, Callable[[Any], str]], ...] = (
    ("rm_url", "--rm-url", RM_URL, str),
    ("rm_user", "--rm-user", RM_USER, str),
    ("rm_wait_seconds", "--rm-wait-seconds", RM_WAIT_S, str),
    ("rm_poll_seconds", "--rm-poll-seconds", RM_POLL_S, str),
    ("rm_confirm_polls", "--rm-confirm-polls", RM_CONFIRM_POLLS, str),
    ("rm_auth_header_command", "--rm-auth-header-command", AUTH_COMMAND, str),
    ("rm_auth_cache_seconds", "--rm-auth-cache-seconds", AUTH_CACHE_S, str),
    ("rm_auth_hook", "--rm-auth-hook", AUTH_HOOK, str),
    ("principal", "--principal", KRB_PRINCIPAL, str),
    ("keytab", "--keytab", KRB_KEYTAB, str),
    ("krb5_conf", "--krb5-conf", KRB5_CONF, str),
    ("no_enforce", "--no-enforce", ENFORCE, lambda _: "false"),
    ("enforce_slack_seconds", "--enforce-slack-seconds", ENFORCE_SLACK_S, str),
    ("gpu_queue", "--gpu-queue", GPU_QUEUE, str),
    ("analytics_queue", "--analytics-queue", ANALYTICS_QUEUES, ",".join),
)


def _given(value: Any) -> bool:
    """Whether a flag was given: its default is None, False (``--no-enforce``) or empty."""
    if value is None or value is False:
        return False
    return not (isinstance(value, str | list) and not value)


def with_flags(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with the bridge flags given in ``args`` applied over it, each validated and
    recorded with the flag as its source (flags win over every other source)."""
    for dest, flag, key, text in _FLAGS:
        value = getattr(args, dest, None)
        if _given(value):
            config = config.with_value(key, text(value), source=flag)
    return config


def bridge_settings(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    config: Config | None = None,
) -> BridgeSettings | None:
    """The bridge settings of ``config`` (loaded with :data:`~yarn_bridge.settings.BRIDGE_SCHEMA`;
    without one, the defaults and ``environ``'s variables) with the flags of ``args`` (from
    :func:`add_serve_arguments`) over it. ``None`` when no RM URL is set (standalone)."""
    if config is None:
        config = load_config(None, environ, schemas=(BRIDGE_SCHEMA,))
    config = with_flags(config, args)
    urls = split_names(config[RM_URL])
    if not urls:
        return None
    auth = auth_hook(config[AUTH_COMMAND] or None, config[AUTH_HOOK] or None, config[AUTH_CACHE_S],
                     principal=config[KRB_PRINCIPAL] or None, keytab=config[KRB_KEYTAB] or None,
                     krb5_conf=config[KRB5_CONF] or None)  # fmt: skip
    return BridgeSettings(
        urls,
        {
            "poll_s": config[RM_POLL_S],
            "confirm_polls": config[RM_CONFIRM_POLLS],
            "slack_s": config[ENFORCE_SLACK_S],
            "gpu_queue": config[GPU_QUEUE] or None,
            "analytics_queues": split_names(config[ANALYTICS_QUEUES]),
            "enforce": config[ENFORCE],
            "rm_user": config[RM_USER] or None,
            **({"rm_options": {"auth": auth}} if auth is not None else {}),
        },
        wait_s=config[RM_WAIT_S],
    )


# --------------------------------------------------------------------------------------------
# yarn-arbiter submit
# --------------------------------------------------------------------------------------------


def _env_pairs(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SubmitError(f"--env {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def add_parsers(sub: Any) -> None:
    """Register ``submit`` on an ``argparse`` sub-parsers object."""
    p = sub.add_parser(
        "submit",
        help="submit an ML application to YARN under the arbiter",
        description="Register an ML application with the arbiter (RegisterApp) and submit it to "
        "YARN (new-application, then POST /apps) with the arbiter's tags and the AM environment "
        f"({ENV_ARBITER_ADDRESS}, YARN_ARBITER_APP_ID, YARN_ARBITER_APP_TOKEN, "
        f"{ENV_ARBITER_TLS_CA}). By default the AM is the arbiter's lease AM: it bids for GPU "
        "leases and runs --command in one YARN container per leased machine (yarn.io/gpu, "
        "strict locality; CUDA_VISIBLE_DEVICES set), releasing it when the lease ends or is "
        "revoked, and finishes when the command exits 0. --am-command submits your own AM "
        "instead. Prints the YARN application id.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--command", help="the job: run by bash -c in every leased container (lease AM)"
    )
    what.add_argument("--am-command", help="your own AM's launch command instead of the lease AM")
    p.add_argument("--gpus", type=int, required=True, help="the app's maximum GPU demand")
    p.add_argument("--name", default="ml-app", help="application name (default ml-app)")
    p.add_argument("--queue", default="default", help="YARN queue (default default)")
    p.add_argument("--priority", type=int, default=0, help="YARN priority (default 0)")
    p.add_argument("--memory-mb", type=int, default=1024, help="AM memory (default 1024)")
    p.add_argument("--vcores", type=int, default=1, help="AM vcores (default 1)")
    p.add_argument(
        "--gang-size", type=int, default=0, help="GPUs the app needs to run at all (default: any)"
    )
    p.add_argument("--tag", action="append", default=[], help="extra YARN tag (repeatable)")
    p.add_argument(
        "--env", action="append", default=[], help="AM environment KEY=VALUE (repeatable)"
    )
    p.add_argument(
        "--application-type", default="YARN", help="YARN application type (default YARN)"
    )
    p.add_argument("--max-attempts", type=int, default=1, help="AM attempts (default 1)")
    p.add_argument("--user", help="owner recorded in the arbiter (default: the login name)")
    p.add_argument("--rm-url", help=f"RM web URL(s), comma-separated (default ${ENV_RM_URL})")
    p.add_argument("--rm-user", help="simple-auth user for the RM (user.name)")
    add_auth_arguments(p)
    p.add_argument(
        "--arbiter",
        help="arbiter host:port, or host:port,host:port of an active/standby pair "
        f"(default ${ENV_ARBITER_ADDRESS})",
    )
    p.add_argument(
        "--am-arbiter",
        help="arbiter address as the AM dials it, if different (e.g. arbiter:50051 inside the "
        "cluster)",
    )
    p.add_argument(
        "--tls-ca", help=f"CA bundle of the arbiter's TLS (default ${ENV_ARBITER_TLS_CA})"
    )
    p.add_argument(
        "--submit-token-file",
        help="file holding the arbiter's submitters' credential (its "
        "arbiter.admission.submit-token-file; default $YARN_ARBITER_SUBMIT_TOKEN_FILE); needed "
        "unless the arbiter accepts anonymous registrations",
    )
    p.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    p.add_argument("--tls-key", help="client private key (mutual TLS)")
    p.add_argument(
        "--am-tls-ca", help="CA path as the AM container sees it (default: the --tls-ca path)"
    )
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default 10)")
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait until YARN reports the app finished, printing each state change; exit 0 "
        "only for FINISHED/SUCCEEDED",
    )
    p.add_argument(
        "--wait-poll-seconds", type=float, default=2.0, help="with --wait: poll period (default 2)"
    )
    p.add_argument(
        "--file", action="append", default=[], help="local file shipped to the AM and the job "
        "containers as a YARN local resource (file:// URL; repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--archive", action="append", default=[], help="local archive (.tar.gz, .zip, .jar) "
        "shipped and unpacked as a YARN local resource (repeatable)",
    )  # fmt: skip
    a = p.add_argument_group("the lease AM (with --command)")
    a.add_argument(
        "--work-gpu-seconds",
        type=float,
        default=3600.0,
        help="the job's serial GPU-seconds of work, for its bids (default 3600)",
    )
    a.add_argument(
        "--am-jar",
        help="the lease AM's jar (default $YARN_ARBITER_AM_JAR, else java/am/target/"
        "yarn-arbiter-am.jar: mvn -q -f java/am/pom.xml package -DskipTests)",
    )
    a.add_argument(
        "--am-classpath",
        help="the AM's Hadoop classpath as the containers see it, comma-separated (default "
        "yarn.application.classpath from $HADOOP_CONF_DIR/yarn-site.xml, else Hadoop's default)",
    )
    a.add_argument(
        "--java",
        help="the AM's java as the container sees it (default ${JAVA_HOME:-J}/bin/java: the "
        "NodeManager's JAVA_HOME, else this environment's J)",
    )
    a.add_argument(
        "--python",
        default=sys.executable,
        help="python that runs the sidecar in the AM container (default this one; e.g. "
        "./venv.tar.gz/bin/python with --archive venv.tar.gz)",
    )
    a.add_argument(
        "--sidecar-arg",
        action="append",
        default=[],
        help="extra argument for python -m yarn_bridge.lease_am (repeatable), e.g. "
        "--sidecar-arg=--hold-seconds=5",
    )
    p.set_defaults(func=cmd_submit)


def _default_java(env: Mapping[str, str]) -> str:
    """The NodeManager's ``$JAVA_HOME`` (whitelisted into containers), else ours."""
    ours = env.get("JAVA_HOME", "")
    return f"${{JAVA_HOME:-{ours}}}/bin/java" if ours else "$JAVA_HOME/bin/java"


def _lease_am(args: argparse.Namespace, env: Mapping[str, str]) -> LeaseAM | None:
    if args.command is None:
        return None
    if args.am_classpath:
        classpath = tuple(e.strip() for e in args.am_classpath.split(",") if e.strip())
    else:
        classpath = application_classpath(env)
    return LeaseAM(
        jar=args.am_jar or default_am_jar(env),
        classpath=classpath,
        java=args.java or _default_java(env),
        python=args.python,
        work_gpu_seconds=args.work_gpu_seconds,
        sidecar_args=tuple(args.sidecar_arg),
    )


def cmd_submit(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    out: Any = None,
    err: Any = None,
) -> int:
    """``yarn-arbiter submit``: 0 and the YARN id on stdout, or 1 and a message on stderr."""
    env = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    rm_url = args.rm_url or env.get(ENV_RM_URL, "")
    arbiter = args.arbiter or env.get(ENV_ARBITER_ADDRESS, "")
    tls_ca = args.tls_ca or env.get(ENV_ARBITER_TLS_CA) or None
    try:
        if not rm_url:
            raise SubmitError(f"no RM: give --rm-url or set {ENV_RM_URL}")
        if not arbiter:
            raise SubmitError(f"no arbiter: give --arbiter or set {ENV_ARBITER_ADDRESS}")
        spec = SubmitSpec(
            name=args.name,
            command=args.command if args.command is not None else args.am_command,
            max_gpus=args.gpus,
            queue=args.queue,
            priority=args.priority,
            memory_mb=args.memory_mb,
            vcores=args.vcores,
            tags=tuple(args.tag),
            env=_env_pairs(args.env),
            application_type=args.application_type,
            max_app_attempts=args.max_attempts,
            user=args.user if args.user is not None else default_user(),
            gang_size=args.gang_size,
            files=tuple(args.file),
            archives=tuple(args.archive),
            lease_am=_lease_am(args, env),
        )
        credentials = channel_credentials(tls_ca, args.tls_cert, args.tls_key)
        token_file = args.submit_token_file or env.get("YARN_ARBITER_SUBMIT_TOKEN_FILE")
        submit_token = None
        if token_file:
            try:
                submit_token = Path(token_file).read_text().strip()
            except OSError as exc:
                raise SubmitError(f"--submit-token-file {token_file}: {exc.strerror}") from None
        options: dict[str, Any] = {"user": args.rm_user, "deadline": args.timeout * 3}
        auth = auth_hook_from_args(args)
        if auth is not None:
            options["auth"] = auth
        with _rm_client(rm_url, options) as rm:
            done = submit_ml_app(
                spec,
                rm,
                arbiter_address=arbiter,
                credentials=credentials,
                am_arbiter_address=args.am_arbiter,
                am_tls_ca=args.am_tls_ca or tls_ca,
                timeout=args.timeout,
                submit_token=submit_token,
            )
            print(
                f"yarn-arbiter submit: {done.yarn_app_id} is arbiter app {done.arbiter_app_id}",
                file=err,
            )
            print(done.yarn_app_id, file=out, flush=True)
            if not getattr(args, "wait", False):
                return 0
            from yarn_bridge.app_cli import exit_status, wait_for_app

            final = wait_for_app(
                rm,
                done.yarn_app_id,
                poll_s=args.wait_poll_seconds,
                on_change=lambda a: print(
                    f"yarn-arbiter submit: {a.id} {a.state}"
                    + (f" ({a.final_status})" if a.is_final else ""),
                    file=err,
                    flush=True,
                ),
            )
            if final.diagnostics and exit_status(final):
                print(f"yarn-arbiter submit: diagnostics: {final.diagnostics}", file=err)
            return exit_status(final)
    except (SubmitError, RMError, ValueError) as exc:
        print(f"yarn-arbiter submit: error: {exc}", file=err)
        return 1
