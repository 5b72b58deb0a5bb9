"""Plugging an HTTP auth hook (SPNEGO / Kerberos) into the RM client from the command line.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1.1 ("Auth for writes": an authentication
filter must give every write a user; a Kerberos cluster uses SPNEGO, ``hadoop.http.
authentication.type=kerberos``, on reads too) and §2.1 (yarn-api-client's ``HTTPKerberosAuth``
is the optional Kerberos path there). :class:`~yarn_bridge.rm.RMClient` already takes
``auth=``, a hook ``(method, url) -> headers`` called before every attempt; this module builds
that hook for ``yarn-arbiter serve`` and ``yarn-arbiter submit``:

* ``--rm-auth-header-command CMD``: run ``CMD`` (split like a shell would, but no shell) and use
  what it prints. The command sees ``YARN_ARBITER_RM_REQUEST_METHOD``,
  ``YARN_ARBITER_RM_REQUEST_URL`` and ``YARN_ARBITER_RM_HOST`` (the host of the URL: SPNEGO's
  service principal is ``HTTP@<host>``) in its environment. Its standard output is either
  ``Name: value`` header lines, or one line that is the ``Authorization`` value itself
  (``Negotiate YII...``). A non-zero exit, a timeout or empty output fails the request with
  :class:`~yarn_bridge.rm.RMAuthError` (an :class:`~yarn_bridge.rm.RMError`: the watcher's poll
  fails and changes nothing, ``submit`` prints the error). ``--rm-auth-cache-seconds S`` reuses
  a host's headers for ``S`` seconds (default 0: a fresh token per request, because a Kerberos
  service may reject a replayed authenticator; Hadoop's ``hadoop.auth`` cookie, which the client
  keeps, usually makes the header unnecessary after the first answer anyway).
* ``--rm-auth-hook module:function``: import ``function`` from ``module`` (on ``sys.path``) and
  use it as the hook itself, for a Python SPNEGO library (``requests-gssapi``'s / ``pyspnego``'s
  token generation) without a process per request.
* ``--principal P --keytab F`` (``--krb5-conf`` for a realm other than ``/etc/krb5.conf``'s):
  Kerberos done here, no command to write: log in from the keytab into a private credential
  cache and SPNEGO-authenticate every request (:mod:`yarn_bridge.kerberos`).

``yarn-arbiter serve`` takes all three from its configuration too
(``yarn.arbiter.bridge.rm.auth.*``, :mod:`yarn_bridge.settings`; a flag wins) and builds the
hook with :func:`auth_hook`.

Decisions: three forms because a keytab is what a Hadoop service is given, a command suits an
operator's existing ``kinit`` + script setup and an import suits a library; one of them, not
two (an error). Tokens are never logged:
error messages carry the command's exit status and standard error, never its standard output.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from yarn_bridge.rm import AuthHook, RMAuthError

__all__ = [
    "ENV_REQUEST_HOST",
    "ENV_REQUEST_METHOD",
    "ENV_REQUEST_URL",
    "add_auth_arguments",
    "auth_hook",
    "auth_hook_from_args",
    "header_command_hook",
    "import_hook",
]

ENV_REQUEST_METHOD: Final = "YARN_ARBITER_RM_REQUEST_METHOD"
ENV_REQUEST_URL: Final = "YARN_ARBITER_RM_REQUEST_URL"
ENV_REQUEST_HOST: Final = "YARN_ARBITER_RM_HOST"
_HEADER_LINE: Final = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*):\s*(.*)$")


def parse_header_output(text: str) -> dict[str, str]:
    """A header command's standard output -> headers (module docstring).

    >>> parse_header_output("Negotiate dG9rZW4=\\n")
    {'Authorization': 'Negotiate dG9rZW4='}
    >>> parse_header_output("Authorization: Negotiate abc\\nX-Trace: 1\\n")
    {'Authorization': 'Negotiate abc', 'X-Trace': '1'}
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("printed nothing")
    matches = [_HEADER_LINE.match(ln) for ln in lines]
    if all(m is not None for m in matches):
        return {m.group(1): m.group(2) for m in matches if m is not None}
    if len(lines) == 1:
        return {"Authorization": lines[0]}
    raise ValueError("printed several lines that are not all 'Name: value' headers")


def header_command_hook(
    command: str,
    *,
    cache_seconds: float = 0.0,
    timeout_seconds: float = 10.0,
    environ: Mapping[str, str] | None = None,
) -> AuthHook:
    """An :data:`~yarn_bridge.rm.AuthHook` that runs ``command`` (module docstring)."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("--rm-auth-header-command is empty")
    if cache_seconds < 0:
        raise ValueError(f"--rm-auth-cache-seconds must be >= 0, got {cache_seconds}")
    base_env = dict(os.environ if environ is None else environ)
    cache: dict[str, tuple[float, dict[str, str]]] = {}
    lock = threading.Lock()

    def hook(method: str, url: str) -> Mapping[str, str]:
        host = urlsplit(url).hostname or ""
        if cache_seconds > 0:
            with lock:
                hit = cache.get(host)
                if hit is not None and time.monotonic() < hit[0]:
                    return dict(hit[1])
        env = {**base_env, ENV_REQUEST_METHOD: method, ENV_REQUEST_URL: url, ENV_REQUEST_HOST: host}
        try:
            done = subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=timeout_seconds, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RMAuthError(f"auth header command {argv[0]!r} failed: {exc}") from None
        if done.returncode != 0:
            raise RMAuthError(
                f"auth header command {argv[0]!r} exited {done.returncode}: "
                f"{done.stderr.strip()[:300]}"
            )
        try:
            headers = parse_header_output(done.stdout)
        except ValueError as exc:
            raise RMAuthError(f"auth header command {argv[0]!r} {exc}") from None
        if cache_seconds > 0:
            with lock:
                cache[host] = (time.monotonic() + cache_seconds, headers)
        return headers

    return hook


def import_hook(spec: str) -> AuthHook:
    """``module:function`` -> that function (a ``(method, url) -> headers`` hook)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--rm-auth-hook {spec!r} is not module:function")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--rm-auth-hook {spec!r}: {exc}") from None
    if not callable(obj):
        raise ValueError(f"--rm-auth-hook {spec!r} is not callable")
    return obj


def add_auth_arguments(group: Any) -> None:
    """Add ``--rm-auth-header-command``, ``--rm-auth-cache-seconds`` and ``--rm-auth-hook``
    to an ``argparse`` parser or argument group."""
    group.add_argument(
        "--rm-auth-header-command",
        metavar="CMD",
        help="SPNEGO/Kerberos for RM REST calls: run CMD before each request (env "
        f"{ENV_REQUEST_METHOD}, {ENV_REQUEST_URL}, {ENV_REQUEST_HOST}); it prints "
        "'Name: value' header lines or just the Authorization value (e.g. 'Negotiate <token>')",
    )
    group.add_argument(
        "--rm-auth-cache-seconds",
        type=float,
        help="reuse the command's headers per RM host for this long (default 0: every request)",
    )
    group.add_argument(
        "--rm-auth-hook",
        metavar="MODULE:FUNCTION",
        help="SPNEGO/Kerberos for RM REST calls: a Python function (method, url) -> headers",
    )
    group.add_argument(
        "--principal",
        help="Kerberos: log in as this principal (e.g. alice@EXAMPLE.COM) from --keytab and "
        "authenticate RM REST calls with SPNEGO (a private credential cache; no kinit needed)",
    )
    group.add_argument("--keytab", metavar="FILE", help="Kerberos: the principal's keytab")
    group.add_argument(
        "--krb5-conf",
        metavar="FILE",
        help="Kerberos: the realm's krb5.conf (default $KRB5_CONFIG, else /etc/krb5.conf)",
    )


def auth_hook(
    command: str | None,
    spec: str | None,
    cache_seconds: float = 0.0,
    *,
    principal: str | None = None,
    keytab: str | None = None,
    krb5_conf: str | None = None,
) -> AuthHook | None:
    """The hook a header command, a ``module:function`` or a principal and keytab ask for
    (``None``: none). ``ValueError`` if more than one is given, or a keytab is unusable."""
    given = [flag for flag, v in (("--rm-auth-header-command", command), ("--rm-auth-hook", spec),
                                  ("--principal/--keytab", principal or keytab)) if v]  # fmt: skip
    if len(given) > 1:
        raise ValueError(f"give one of {' and '.join(given)}, "
                         f"{'not both' if len(given) == 2 else 'not all'}")  # fmt: skip
    if principal or keytab:
        from yarn_bridge.kerberos import kerberos_hook

        return kerberos_hook(principal, keytab, krb5_conf or None)
    if command:
        return header_command_hook(command, cache_seconds=cache_seconds)
    if spec:
        return import_hook(spec)
    return None


def auth_hook_from_args(args: argparse.Namespace) -> AuthHook | None:
    """The hook ``args`` ask for (``None``: none). ``ValueError`` if both forms are given."""
    return auth_hook(
        getattr(args, "rm_auth_header_command", None),
        getattr(args, "rm_auth_hook", None),
        getattr(args, "rm_auth_cache_seconds", 0.0) or 0.0,
        principal=getattr(args, "principal", None),
        keytab=getattr(args, "keytab", None),
        krb5_conf=getattr(args, "krb5_conf", None),
    )
