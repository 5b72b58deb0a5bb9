"""HiveServer2 JDBC URLs, as beeline takes them, turned into pyhive connections.

The form (Hive's ``jdbc.Utils.parseURL``)::

    jdbc:hive2://HOST[:PORT][/DB][;sess_var_list][?hive_conf_list][#hive_var_list]

each list being ``key=value`` pairs separated by ``;``. Examples::

    >>> u = parse_jdbc_url("jdbc:hive2://127.0.0.1:10000/tpch;auth=noSasl?spark.sql.shuffle.partitions=2")
    >>> (u.host, u.port, u.database, u.session, u.hiveconf)
    ('127.0.0.1', 10000, 'tpch', {'auth': 'noSasl'}, {'spark.sql.shuffle.partitions': '2'})
    >>> u.pyhive_kwargs(user="ana")["auth"]
    'NOSASL'

Session variables understood (the rest are kept in :attr:`JdbcUrl.session` and ignored):
``auth`` (``noSasl`` -> pyhive ``NOSASL``; anything else -> SASL PLAIN), ``user``,
``password`` (with SASL, pyhive's ``LDAP`` mode: PLAIN with that password, which is what beeline
sends), ``principal`` (Kerberos: the service name is the part before ``/``),
``transportMode=http`` with ``ssl`` (pyhive's http/https transport, ``httpPath`` must be
``cliservice``). Refused with a message: embedded mode (no host), several hosts or
``serviceDiscoveryMode`` (ZooKeeper discovery), ``ssl=true`` over the binary transport (pyhive
cannot), a port that is not a number.

``?hive_conf_list`` becomes :attr:`JdbcUrl.hiveconf` (the caller applies it with ``SET`` like
``--hiveconf``); ``#hive_var_list`` becomes :attr:`JdbcUrl.hivevar` (client-side ``${var}``
substitution, like ``--hivevar``).
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_BINARY_PORT", "DEFAULT_HTTP_PORT", "JdbcUrl", "JdbcUrlError", "parse_jdbc_url"]

PREFIX = "jdbc:hive2://"
DEFAULT_BINARY_PORT = 10000
DEFAULT_HTTP_PORT = 10001
_TRUE = {"true", "1", "yes"}


class JdbcUrlError(ValueError):
    """A JDBC URL this client cannot use (the message says why and shows the expected form)."""


FORM = "jdbc:hive2://HOST:PORT/DB[;auth=noSasl;...][?hiveconf=v;...][#hivevar=v;...]"


def _pairs(text: str, what: str, url: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise JdbcUrlError(f"bad {what} entry {item!r} in {url!r} (expected key=value)")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class JdbcUrl:
    """A parsed ``jdbc:hive2://`` URL (module docstring)."""

    host: str
    port: int
    database: str = "default"
    session: dict[str, str] = field(default_factory=dict)
    hiveconf: dict[str, str] = field(default_factory=dict)
    hivevar: dict[str, str] = field(default_factory=dict)

    @property
    def hostport(self) -> str:
        return f"{self.host}:{self.port}"

    def _session(self, key: str) -> str | None:
        """A session variable, matched case-insensitively (beeline is lenient too)."""
        for k, v in self.session.items():
            if k.lower() == key.lower():
                return v
        return None

    @property
    def auth(self) -> str:
        """pyhive's auth mode: NOSASL, KERBEROS, or NONE (SASL PLAIN; LDAP with a password)."""
        if self._session("principal"):
            return "KERBEROS"
        auth = (self._session("auth") or "").lower()
        return "NOSASL" if auth == "nosasl" else "NONE"

    def pyhive_kwargs(self, user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``pyhive.hive.connect``; ``user``/``password`` (-n/-p) win
        over the URL's ``user``/``password`` session variables."""
        user = user or self._session("user") or getpass.getuser()
        password = password if password is not None else self._session("password")
        kw: dict[str, Any] = {"username": user, "database": self.database}
        mode = (self._session("transportMode") or "binary").lower()
        ssl = (self._session("ssl") or "").lower() in _TRUE
        auth = self.auth
        if mode == "http":
            path = (self._session("httpPath") or "cliservice").strip("/")
            if path != "cliservice":
                raise JdbcUrlError(f"httpPath={path!r} is not supported (only cliservice)")
            kw.update(host=self.host, port=self.port, scheme="https" if ssl else "http")
            kw["auth"] = "NOSASL" if auth == "NOSASL" else "BASIC"
            if password:
                kw["password"] = password
            return kw
        if mode != "binary":
            raise JdbcUrlError(f"transportMode={mode!r} is not supported (binary or http)")
        if ssl:
            raise JdbcUrlError(
                "ssl=true over the binary transport is not supported by this client (pyhive); "
                "use transportMode=http;ssl=true, or a plain connection"
            )
        kw.update(host=self.host, port=self.port)
        if auth == "KERBEROS":
            principal = self._session("principal") or ""
            kw.update(auth="KERBEROS", kerberos_service_name=re.split(r"[/@]", principal)[0])
        elif auth == "NOSASL":
            kw["auth"] = "NOSASL"  # the server ignores any password
        elif password:
            kw.update(auth="LDAP", password=password)  # SASL PLAIN with the password
        else:
            kw["auth"] = "NONE"
        return kw

    def connect(self, user: str | None = None, password: str | None = None) -> Any:
        """A new pyhive connection (does not apply :attr:`hiveconf`)."""
        from pyhive import hive

        return hive.connect(**self.pyhive_kwargs(user, password))

    def __str__(self) -> str:
        text = f"{PREFIX}{self.host}:{self.port}/{self.database}"
        if self.session:
            text += "".join(f";{k}={v}" for k, v in self.session.items())
        if self.hiveconf:
            text += "?" + ";".join(f"{k}={v}" for k, v in self.hiveconf.items())
        if self.hivevar:
            text += "#" + ";".join(f"{k}={v}" for k, v in self.hivevar.items())
        return text


def parse_jdbc_url(url: str) -> JdbcUrl:
    """Parse a beeline-style HiveServer2 URL (module docstring); :class:`JdbcUrlError` if bad.

    >>> parse_jdbc_url("jdbc:hive2://db.example.com").hostport
    'db.example.com:10000'
    >>> parse_jdbc_url("jdbc:hive2://h:1/d;auth=noSasl#day=2024-01-01").hivevar
    {'day': '2024-01-01'}
    """
    text = url.strip()
    if not text.lower().startswith(PREFIX):
        raise JdbcUrlError(f"not a HiveServer2 JDBC URL: {url!r} (expected {FORM})")
    rest = text[len(PREFIX) :]
    rest, _, hivevars = rest.partition("#")
    rest, _, hiveconfs = rest.partition("?")
    m = re.match(r"(?P<authority>[^/;]*)(?:/(?P<db>[^;]*))?(?P<session>(?:;.*)?)$", rest)
    if m is None:  # pragma: no cover - the pattern matches any string without '?' and '#'
        raise JdbcUrlError(f"cannot parse {url!r} (expected {FORM})")
    authority = m["authority"].strip()
    session = _pairs(m["session"] or "", "session variable", url)
    if not authority:
        raise JdbcUrlError(
            f"{url!r} has no host: embedded mode is not supported; give the HiveServer2 "
            f"host and port ({FORM})"
        )
    if "," in authority or any(k.lower() == "servicediscoverymode" for k in session):
        raise JdbcUrlError(
            f"{url!r}: several hosts / ZooKeeper service discovery are not supported; "
            "give one HiveServer2 host:port"
        )
    if "@" in authority:
        raise JdbcUrlError(f"{url!r}: put the user in -n USER or ;user=USER, not in the host")
    if authority.startswith("["):  # IPv6 literal: [::1]:10000
        host, _, after = authority[1:].partition("]")
        if after and not after.startswith(":"):
            raise JdbcUrlError(f"bad host {authority!r} in {url!r} (expected {FORM})")
        port_text = after[1:]
    else:
        host, _, port_text = authority.partition(":")
    if not host:
        raise JdbcUrlError(f"{url!r} has no host before ':' (expected {FORM})")
    http = any(k.lower() == "transportmode" and v.lower() == "http" for k, v in session.items())
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise JdbcUrlError(f"bad port {port_text!r} in {url!r} (expected 1-65535)")
        port = int(port_text)
    else:
        port = DEFAULT_HTTP_PORT if http else DEFAULT_BINARY_PORT
    database = (m["db"] or "").strip() or "default"
    if not re.fullmatch(r"[A-Za-z0-9_]+", database):
        raise JdbcUrlError(f"bad database name {database!r} in {url!r}")
    return JdbcUrl(
        host=host,
        port=port,
        database=database,
        session=session,
        hiveconf=_pairs(hiveconfs, "hiveconf", url),
        hivevar=_pairs(hivevars, "hivevar", url),
    )
