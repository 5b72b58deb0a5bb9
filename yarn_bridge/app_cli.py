"""``yarn-arbiter app list|status|kill`` and ``submit --wait``: the apps as YARN sees them.

The operator's counterpart of ``yarn application -list / -status / -kill``, through the RM's
REST API (:class:`yarn_bridge.rm.RMClient`, so RM HA, retries and SPNEGO as for the bridge):
``list`` shows the arbiter's ML apps (YARN tag ``yarn-arbiter-ml``; ``--all`` every app) with
their state, queue, containers and GPUs; ``status`` one app in full; ``kill`` asks YARN to kill
one and waits for the RM to confirm. The RM comes from ``--rm-url``, ``$YARN_ARBITER_RM_URL``
or the Hadoop configuration directory (``--hadoop-conf``, ``$HADOOP_CONF_DIR``:
:mod:`yarn_bridge.hadoop_conf`). ``--json`` prints what the RM said, for scripts.

:func:`wait_for_app` is ``submit --wait``: it polls the app until YARN reports a final state
and maps it to an exit status like ``yarn``'s own client (0 for FINISHED/SUCCEEDED).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, TextIO

from arbiter.tables import format_table
from yarn_bridge.auth import add_auth_arguments, auth_hook_from_args
from yarn_bridge.env import ENV_RM_URL, ML_APP_TAG
from yarn_bridge.hadoop_conf import rm_urls_from_conf_dir
from yarn_bridge.rm import App, RMClient, RMError

__all__ = ["FINAL_STATES", "add_parsers", "rm_urls_for", "wait_for_app"]

FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})


def rm_urls_for(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The RM URL(s) a command uses: the flag, the variable, then the Hadoop configuration."""
    if getattr(args, "rm_url", None):
        return str(args.rm_url)
    if environ.get(ENV_RM_URL):
        return environ[ENV_RM_URL]
    conf = getattr(args, "hadoop_conf", None) or environ.get("HADOOP_CONF_DIR")
    if conf:
        return ",".join(rm_urls_from_conf_dir(conf, environ))
    raise ValueError(
        f"no ResourceManager: give --rm-url, set {ENV_RM_URL}, or point --hadoop-conf "
        "(or $HADOOP_CONF_DIR) at the cluster's configuration"
    )


def _client(args: argparse.Namespace, urls: str) -> RMClient:
    options: dict[str, Any] = {"user": args.rm_user, "deadline": args.timeout}
    auth = auth_hook_from_args(args)  # ValueError: a keytab or principal that cannot log in
    if auth is not None:
        options["auth"] = auth
    return RMClient(urls, **options)


def _gpus(app: App) -> str:
    return "-" if app.allocated_gpus is None else str(app.allocated_gpus)


def wait_for_app(
    rm: RMClient,
    app_id: str,
    *,
    poll_s: float = 2.0,
    timeout_s: float | None = None,
    on_change: Callable[[App], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> App:
    """Poll ``app_id`` until it reaches a final state (or ``timeout_s`` passes: TimeoutError);
    ``on_change`` sees the app each time its state changes."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = None
    while True:
        app = rm.app(app_id)
        if app.state != last and on_change is not None:
            on_change(app)
        last = app.state
        if app.is_final:
            return app
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"{app_id} still {app.state} after {timeout_s:g} s")
        sleep(poll_s)


def exit_status(app: App) -> int:
    """0 when the app finished and succeeded, else 1 (as ``yarn application`` clients do)."""
    return 0 if (app.state, app.final_status) == ("FINISHED", "SUCCEEDED") else 1


def _cmd_list(args: argparse.Namespace, rm: RMClient, out: TextIO) -> int:
    states = None if args.state == ["ALL"] else (args.state or None)
    apps = rm.apps(tags=None if args.all else [ML_APP_TAG], states=states)
    apps.sort(key=lambda a: a.id)
    if args.json:
        print(json.dumps([asdict(a) for a in apps], default=str, indent=1), file=out)
        return 0
    rows = [
        [a.id, a.name, a.user, a.queue, a.state, a.final_status, f"{a.progress:.0f}%",
         str(a.running_containers), _gpus(a)]
        for a in apps
    ]  # fmt: skip
    print(format_table(
        ["application", "name", "user", "queue", "state", "final status", "progress",
         "containers", "GPUs"], rows), file=out)  # fmt: skip
    return 0


def _cmd_status(args: argparse.Namespace, rm: RMClient, out: TextIO) -> int:
    app = rm.app(args.app_id)
    if args.json:
        print(json.dumps(asdict(app), default=str, indent=1), file=out)
        return 0
    arbiter = next((t.split(":", 1)[1] for t in app.tags if t.startswith("yarn-arbiter-app:")), "")
    fields = [
        ("Application-Id", app.id), ("Application-Name", app.name),
        ("Application-Type", app.application_type), ("User", app.user), ("Queue", app.queue),
        ("State", app.state), ("Final-State", app.final_status),
        ("Progress", f"{app.progress:.0f}%"), ("Running-Containers", app.running_containers),
        ("GPUs", _gpus(app)), ("Arbiter-App", arbiter or "-"), ("Tags", ",".join(app.tags)),
        ("Elapsed", f"{app.elapsed_time / 1000:.1f} s"), ("Tracking-URL", app.tracking_url or "-"),
        ("Diagnostics", app.diagnostics or "-"),
    ]  # fmt: skip
    print(format_table(["field", "value"], [[k, str(v)] for k, v in fields]), file=out)
    return 0


def _cmd_kill(args: argparse.Namespace, rm: RMClient, out: TextIO) -> int:
    state = rm.kill_app(args.app_id)
    print(f"{args.app_id}: {state}", file=out)
    return 0 if state in FINAL_STATES else 1


def _run(args: argparse.Namespace) -> int:
    out, environ = sys.stdout, os.environ
    urls = rm_urls_for(args, environ)  # no RM given: a usage error (exit 2), raised as before
    try:
        with _client(args, urls) as rm:
            return {"list": _cmd_list, "status": _cmd_status, "kill": _cmd_kill}[args.app_cmd](
                args, rm, out
            )
    except (RMError, ValueError) as exc:
        print(f"yarn-arbiter app {args.app_cmd}: error: {exc}", file=sys.stderr)
        return 1


def add_parsers(sub: Any) -> None:
    """Register ``app`` on ``yarn-arbiter``'s sub-parsers."""
    p = sub.add_parser(
        "app",
        help="list, inspect or kill applications on YARN (like yarn application)",
        description="The applications as the ResourceManager reports them (REST API; RM HA, "
        "retries and SPNEGO as for serve's bridge). The RM comes from --rm-url, "
        f"${ENV_RM_URL}, or --hadoop-conf / $HADOOP_CONF_DIR (yarn-site.xml).",
    )
    p.add_argument("--rm-url", help="RM web URL(s), comma-separated for RM HA")
    p.add_argument(
        "--hadoop-conf", metavar="DIR", help="read the RM address from DIR/yarn-site.xml"
    )
    p.add_argument("--rm-user", help="simple-auth user for the RM (user.name)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    add_auth_arguments(p)
    cmds = p.add_subparsers(dest="app_cmd", required=True)
    ls = cmds.add_parser("list", help="the arbiter's ML apps (--all: every app)")
    ls.add_argument("--all", action="store_true", help="every application, not only ML apps")
    ls.add_argument(
        "--state", action="append", type=str.upper, default=[],
        help="only apps in this YARN state (repeatable; ALL for finished ones too; default: "
        "every state the RM lists)",
    )  # fmt: skip
    ls.add_argument("--json", action="store_true", help="the RM's answer as JSON")
    st = cmds.add_parser("status", help="one application in full")
    st.add_argument("app_id", help="application_<cluster timestamp>_<n>")
    st.add_argument("--json", action="store_true", help="the RM's answer as JSON")
    kill = cmds.add_parser("kill", help="kill an application (the RM confirms)")
    kill.add_argument("app_id", help="application_<cluster timestamp>_<n>")
    p.set_defaults(func=_run)
