"""Kerberos from a keytab for the RM client: log in as a principal with its keytab into a private
credential cache and authenticate every REST call with SPNEGO (``Authorization: Negotiate``).

Spec: ``../shared/spec/yarn-hive-integration.md`` §1.1 (a Kerberos cluster puts SPNEGO,
``hadoop.http.authentication.type=kerberos``, in front of the RM's REST API, reads included) and
§2.1 (yarn-api-client's ``HTTPKerberosAuth`` is the Kerberos path there); RFC 4559 (the
``Negotiate`` scheme); Hadoop's *HttpAuthentication*. The shell-command and import hooks of
:mod:`yarn_bridge.auth` stay for setups that already have a token command.

* :class:`KeytabLogin` is ``kinit -kt KEYTAB PRINCIPAL`` done in-process through GSSAPI's
  credential-store extension (MIT Kerberos's ``gss_acquire_cred_from`` with ``client_keytab``):
  the initial ticket goes into a ``MEMORY:`` credential cache of this process (never the user's
  ``KRB5CCNAME``, never a file), and MIT renews it from the keytab by itself when it nears its
  end. ``krb5_conf`` sets ``KRB5_CONFIG`` for the process (MIT reads it for each new context).
* :func:`spnego_hook` is an :data:`~yarn_bridge.rm.AuthHook`: for each request a new SPNEGO
  context for ``HTTP@<host of the URL>`` (the RM's HTTP principal; which name the host
  becomes is the Kerberos library's ``rdns`` / ``dns_canonicalize_hostname`` choice) and its
  first token as ``Authorization: Negotiate <base64>``. A new context per request because a
  Kerberos acceptor rejects a replayed authenticator; the service ticket is cached, so a request
  costs one local context, not a KDC round trip (the RM also answers with a ``hadoop.auth``
  cookie, which the client keeps).
* **Errors** are :class:`~yarn_bridge.rm.RMAuthError` (an :class:`~yarn_bridge.rm.RMError`: the
  watcher's poll fails and changes nothing, ``submit`` prints it) naming the principal, the
  keytab and GSSAPI's own reason ("Cannot contact any KDC for realm", "Preauthentication
  failed"); a missing or unreadable keytab, or one without the principal's keys
  (:mod:`yarn_bridge.keytab`: MIT would only say "No credentials cache found"), is a
  ``ValueError`` at start, before any request.

Decisions: the ``gssapi`` package (MIT's C library underneath, as ``kinit`` and curl use) rather
than a pure-Python Kerberos; it is the optional ``[kerberos]`` extra (building it needs
``libkrb5-dev``), imported only when a keytab is given, with a message saying how to install it.
"""

from __future__ import annotations

import base64
import os
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from yarn_bridge.keytab import keytab_principals
from yarn_bridge.rm import AuthHook, RMAuthError

__all__ = ["KeytabLogin", "kerberos_hook", "spnego_hook"]

SPNEGO_OID: Final = "1.3.6.1.5.5.2"
_RENEW_BEFORE_S: Final = 60  # a ticket with less left than this is replaced from the keytab
_ENV_LOCK = threading.Lock()


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as exc:  # pragma: no cover (the test extra installs it)
        raise ValueError(
            "Kerberos needs the gssapi package: pip install 'yarn-arbiter[kerberos]' (building "
            f"it needs MIT Kerberos's headers, e.g. apt-get install libkrb5-dev): {exc}"
        ) from None
    return gssapi


class KeytabLogin:
    """A principal logged in from its keytab into a private in-memory credential cache."""

    def __init__(self, principal: str, keytab: str | Path, *,
                 krb5_conf: str | Path | None = None) -> None:  # fmt: skip
        if not principal or not principal.strip():
            raise ValueError("a Kerberos principal is needed with a keytab (--principal)")
        path = Path(keytab).expanduser()
        if not path.is_file():
            raise ValueError(f"keytab {path}: no such file")
        try:
            held = keytab_principals(path.read_bytes())
        except OSError as exc:
            raise ValueError(f"keytab {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise ValueError(f"keytab {path}: {exc}") from None
        if not _holds(held, principal.strip()):
            raise ValueError(f"keytab {path} has no key for {principal.strip()} (it holds "
                             f"{', '.join(held) or 'no entries'})")  # fmt: skip
        if krb5_conf is not None:
            conf = Path(krb5_conf).expanduser()
            if not conf.is_file():
                raise ValueError(f"krb5.conf {conf}: no such file")
            with _ENV_LOCK:
                os.environ["KRB5_CONFIG"] = str(conf.resolve())
        self.principal = principal.strip()
        self.keytab = path.resolve()
        self.ccache = f"MEMORY:yarn-arbiter-{uuid.uuid4().hex}"
        self._gss = _gssapi()
        self._creds: Any = None
        self._lock = threading.Lock()

    def _what(self) -> str:
        return f"Kerberos login of {self.principal} from keytab {self.keytab}"

    def credentials(self) -> Any:
        """Initiator credentials, from the cache while they last, else from the keytab."""
        gss = self._gss
        with self._lock:
            if self._creds is not None:
                try:
                    if self._creds.lifetime > _RENEW_BEFORE_S:
                        return self._creds
                except gss.exceptions.GSSError:
                    pass  # expired: acquire again
            try:
                name = gss.Name(self.principal, gss.NameType.kerberos_principal)
                store = {b"client_keytab": str(self.keytab).encode(),
                         b"ccache": self.ccache.encode()}  # fmt: skip
                self._creds = gss.Credentials(name=name, usage="initiate", store=store)
            except gss.exceptions.GSSError as exc:
                raise RMAuthError(f"{self._what()} failed: {_reason(exc)}") from None
            return self._creds

    def negotiate(self, host: str) -> str:
        """``Negotiate <token>`` for the HTTP service on ``host``."""
        gss = self._gss
        creds = self.credentials()
        try:
            target = gss.Name(f"HTTP@{host}", gss.NameType.hostbased_service)
            ctx = gss.SecurityContext(name=target, creds=creds, usage="initiate",
                                      mech=gss.OID.from_int_seq(SPNEGO_OID))  # fmt: skip
            token = ctx.step()
        except gss.exceptions.GSSError as exc:
            raise RMAuthError(
                f"SPNEGO for HTTP@{host} as {self.principal} failed: {_reason(exc)}"
            ) from None
        return "Negotiate " + base64.b64encode(token).decode()

    def check(self) -> str:
        """Log in now (a clear error at start rather than at the first request); the name the
        KDC confirmed."""
        return str(self.credentials().name)


def _holds(held: list[str], principal: str) -> bool:
    """Whether a keytab's principals include ``principal`` (without a realm: any realm).

    >>> _holds(["alice@EXAMPLE.COM"], "alice"), _holds(["alice@EXAMPLE.COM"], "bob@EXAMPLE.COM")
    (True, False)
    """
    if "@" in principal:
        return principal in held
    return any(p.rsplit("@", 1)[0] == principal for p in held)


def _reason(exc: Exception) -> str:
    """GSSAPI's message without its numeric codes; the minor (Kerberos) part says the most.

    >>> _reason(Exception("Major (851968): Unspecified GSS failure.  Minor code may provide "
    ...                   "more information, Minor (2529639068): Cannot contact any KDC for realm "
    ...                   "'EXAMPLE.COM'"))
    "Cannot contact any KDC for realm 'EXAMPLE.COM'"
    """
    text = str(exc)
    parts = [p.split(":", 1)[-1].strip() for p in text.split(", Minor")]
    for part in reversed(parts):
        if part and "Unspecified GSS failure" not in part:
            return part.rstrip(".")
    return text


def spnego_hook(login: KeytabLogin) -> AuthHook:
    """The :data:`~yarn_bridge.rm.AuthHook` that SPNEGO-authenticates each request."""

    def hook(method: str, url: str) -> Mapping[str, str]:
        host = urlsplit(url).hostname or ""
        return {"Authorization": login.negotiate(host)}

    return hook


def kerberos_hook(principal: str | None, keytab: str | None,
                  krb5_conf: str | None = None) -> AuthHook | None:  # fmt: skip
    """The SPNEGO hook of ``--principal P --keytab F`` (``None`` when neither is given);
    ``ValueError`` when only one is, or the keytab is missing."""
    if not principal and not keytab:
        return None
    if not keytab:
        raise ValueError("--principal needs --keytab (the keytab to log in from)")
    if not principal:
        raise ValueError("--keytab needs --principal (who to log in as, e.g. alice@EXAMPLE.COM)")
    return spnego_hook(KeytabLogin(principal, keytab, krb5_conf=krb5_conf))
