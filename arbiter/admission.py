"""Who may register an ML app or a query with the arbiter, and how much they may register.

The arbiter's admission rules (the papers assume a trusted cluster scheduler; a shared YARN
cluster is not one: Themis §4.3's Agents and QOOP §3's queries must be admitted by someone).
RegisterApp and RegisterQuery are the only calls that need no token of their own, so they are
where an outsider can add state; the rules, checked before anything is kept:

* **Credentials.** A registration carries one of: the admin credential (``x-admin-token``,
  always accepted), the submitters' credential (``x-submit-token``: ``yarn-arbiter submit`` and
  AMs started by hand; from ``arbiter.admission.submit-token-file``), or, for queries, the
  query-service credential HiveServer2's hooks hold (``x-service-token``). A credential that is
  sent must be right (a wrong one is refused even where none is needed).
* **Anonymous registrations** (``arbiter.admission.anonymous``): ``loopback`` (the default)
  accepts them only while gRPC listens on a loopback address (``arbiter.grpc.bind-host``, by
  default 127.0.0.1): only users of the arbiter's own host can reach it. ``never`` always asks
  for a credential; ``always`` restores the open door of earlier releases.
* **Quotas.** At most ``max-apps`` apps, ``max-apps-per-user`` per user, ``max-jobs`` jobs per
  app and ``max-register-bytes`` per request; at most ``max-queries`` queries and
  ``max-queries-per-user`` per user (RESOURCE_EXHAUSTED beyond). A query with no open share
  stream for ``arbiter.query.idle-expiry.seconds`` is unregistered (QOOP's |J| counts only
  queries that listen).

Pure functions; :class:`arbiter.core.ArbiterCore` applies them under its lock.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from arbiter.journal import token_matches
from arbiter.messages import Code, RequestError

__all__ = ["Credentials", "anonymous_ok", "check_credential", "check_quota", "is_loopback"]


@dataclass(frozen=True)
class Credentials:
    """The credentials a registration carried (gRPC metadata), each ``None`` when absent."""

    admin: str | None = None
    submit: str | None = None
    service: str | None = None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (only this machine can connect).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost")
    (True, True, True)
    >>> is_loopback("0.0.0.0"), is_loopback("[::]"), is_loopback("arbiter.example")
    (False, False, False)
    """
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def anonymous_ok(mode: str, bind_host: str) -> bool:
    """Whether a registration without a credential is accepted (module docstring)."""
    return mode == "always" or (mode == "loopback" and is_loopback(bind_host))


def check_credential(
    creds: Credentials,
    *,
    admin_hash: str,
    submit_hash: str | None,
    service_hash: str | None,
    anonymous: bool,
    services: bool = False,
) -> str:
    """Which credential admits the registration: ``"admin"``, ``"submit"``, ``"service"``
    (only when ``services``: queries) or ``"anonymous"``; else :class:`RequestError`."""
    sent = [(n, t) for n, t in (("admin", creds.admin), ("submit", creds.submit),
                                ("service", creds.service)) if t is not None]  # fmt: skip
    hashes = {"admin": admin_hash, "submit": submit_hash, "service": service_hash}
    for name, token in sent:
        if name == "service" and not services:
            continue
        known = hashes[name]
        if known is None or not token_matches(token, known):
            raise RequestError(Code.UNAUTHENTICATED, f"wrong {name} token")
        return name
    if anonymous:
        return "anonymous"
    raise RequestError(
        Code.UNAUTHENTICATED,
        "registration needs a credential (x-submit-token, or x-admin-token"
        + (", or a query service's x-service-token" if services else "")
        + "): this arbiter does not accept anonymous registrations",
    )


def check_quota(what: str, users: Iterable[str], user: str, *, total: int, per_user: int) -> None:
    """Refuse (RESOURCE_EXHAUSTED) one more ``what`` for ``user`` when ``users`` (the user of
    each one registered now) already has ``total`` of them, or ``per_user`` of ``user``'s."""
    users = list(users)
    if len(users) >= total:
        raise RequestError(Code.RESOURCE_EXHAUSTED, f"{len(users)} {what} registered: the limit")
    mine = sum(1 for u in users if u == user)
    if mine >= per_user:
        raise RequestError(
            Code.RESOURCE_EXHAUSTED, f"user {user[:64]!r} has {mine} {what} registered: the limit"
        )
