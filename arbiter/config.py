"""Configuration: Hadoop-style property names in schemas, validated at start.

A :class:`Schema` is the properties under one key prefix: :data:`SCHEMA` is the arbiter's
(``arbiter.*``); other packages declare theirs (the YARN bridge's ``yarn.arbiter.bridge.*``,
the replanner's ``qoop.hive.*``) and a program loads the ones it reads,
``load_config(path, schemas=(SCHEMA, BRIDGE_SCHEMA))``; this module knows none of them.

Sources, later ones winning: the defaults, a file (Hadoop ``*-site.xml`` with
``<property><name>/<value>``, or ``key = value`` lines), environment variables named after the
key (``arbiter.themis.fairness-knob`` -> ``ARBITER_THEMIS_FAIRNESS_KNOB``), then a property's
older variable names (:attr:`Property.legacy_env`, e.g. ``YARN_ARBITER_RM_URL``); a key the
file marks ``<final>true</final>`` keeps the file's value. The XML file is read as Hadoop reads
its own (:mod:`arbiter.hadoop_xml`): ``${other.key}`` and ``${env.NAME}`` are expanded, and the
``*.seconds`` keys take duration units (``500ms``, ``5m``, ``2h``), the ``*-bytes`` keys size
units (``64k``, ``4m``). A program's
flags go last (:meth:`Config.with_value`, the flag as the source). Every value is parsed and
range-checked at load; an error names the key, the source and the accepted range. A file key
under a loaded schema's prefix that the schema lacks is an error, and so is one under no loaded
prefix at all (a typo must not silently fall back to a default).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from arbiter.hadoop_xml import expand, parse_duration, parse_size, read_site_xml
from arbiter.rounds import DEFAULT_BATCH_WINDOW, DEFAULT_FAIRNESS_KNOB, DEFAULT_LEASE_SECONDS

__all__ = [
    "SCHEMA",
    "Config",
    "ConfigError",
    "Property",
    "Schema",
    "env_name",
    "load_config",
    "parse_bool",
    "parse_knobs",
]


log = logging.getLogger("yarn_arbiter.config")


class ConfigError(ValueError):
    """A configuration value is malformed; the message names the key and its source."""


@dataclass(frozen=True)
class Property:
    """One key: its default, how its text parses, the range it must be in (``expected`` says
    it in words) and what it means; ``legacy_env``: older environment variable names, read
    after the one named after the key (so they win over it)."""

    key: str
    default: Any
    parse: Callable[[str], Any]
    check: Callable[[Any], bool]
    expected: str
    help: str
    legacy_env: tuple[str, ...] = ()


class Schema(Mapping[str, Property]):
    """The properties under one key prefix (key -> :class:`Property`), and ``check``: a test
    across keys, given every loaded value, raising :class:`ConfigError`."""

    def __init__(
        self,
        prefix: str,
        properties: Iterable[Property],
        check: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        self.prefix = prefix
        self.check = check
        self._props = {p.key: p for p in properties}
        outside = [k for k in self._props if not k.startswith(prefix)]
        if outside:
            raise ValueError(f"keys {outside} are not under the schema's prefix {prefix!r}")

    def __getitem__(self, key: str) -> Property:
        return self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._props)

    def __len__(self) -> int:
        return len(self._props)

    def __repr__(self) -> str:
        return f"Schema({self.prefix!r}, {len(self)} keys)"


def parse_bool(text: str) -> bool:
    """``true``/``yes``/``1``/``on`` or ``false``/``no``/``0``/``off`` (any case, spaces
    around allowed); ValueError otherwise. The one boolean syntax of keys and flags."""
    low = text.strip().lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise ValueError(text)


def _known_policy(name: str) -> bool:
    from arbiter.policies import POLICIES  # lazily: the policies import the auction

    return name in POLICIES


def parse_knobs(text: str) -> dict[str, Any]:
    """``"k=v,k2=v2"`` -> ``{"k": v, ...}`` with ints, floats and booleans parsed (a policy's
    knobs, ``arbiter.policy.knobs``); raises ValueError on a malformed item."""
    out: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, raw = item.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"knob {item!r} is not name=value")
        value: Any = raw
        for conv in (int, float):
            try:
                value = conv(raw)
                break
            except ValueError:
                pass
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        out[key] = value
    return out


def _knobs_ok(text: str) -> bool:
    try:
        parse_knobs(text)
    except ValueError:
        return False
    return True


def _finite(v: float) -> bool:
    return math.isfinite(v)


def _host_port(v: str) -> bool:
    host, _, port = v.strip().rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) <= 65535


def _check_tls(values: Mapping[str, Any]) -> None:
    if values["arbiter.grpc.tls.enabled"] and not (
        values["arbiter.grpc.tls.cert"] and values["arbiter.grpc.tls.key"]
    ):
        raise ConfigError(
            "arbiter.grpc.tls.enabled = true needs arbiter.grpc.tls.cert and arbiter.grpc.tls.key"
        )


SCHEMA = Schema(
    "arbiter.",
    (
        Property(
            "arbiter.policy",
            "themis",
            str,
            _known_policy,
            "a policy name (yarn-arbiter simulate --help lists them)",
            "scheduling policy: themis (auctions with Agents) or any seed policy",
        ),
        Property(
            "arbiter.policy.knobs",
            "",
            str,
            _knobs_ok,
            "name=value pairs separated by commas",
            "the policy's knobs, e.g. queues=3,promote_knob=8 for tiresias",
        ),
        Property(
            "arbiter.policy.interval.seconds",
            30.0,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "how often a non-auction policy decides (also on arrivals and freed GPUs)",
        ),
        Property(
            "arbiter.lease.seconds",
            DEFAULT_LEASE_SECONDS,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "how long a GPU lease lasts before it is auctioned again "
            "(Themis uses 10 min); takes units: 600, 10m",
        ),
        Property(
            "arbiter.themis.fairness-knob",
            DEFAULT_FAIRNESS_KNOB,
            float,
            lambda v: 0.0 <= v <= 1.0,
            "a number in [0, 1]",
            "fairness knob f: each round the (1 - f) share of apps furthest from their fair "
            "finish time (largest rho) may bid; 0 = all bid",
        ),
        Property(
            "arbiter.offer.batch-window.seconds",
            DEFAULT_BATCH_WINDOW,
            float,
            lambda v: _finite(v) and v >= 0,
            "a number >= 0",
            "GPUs freed within this window are offered together",
        ),
        Property(
            "arbiter.heartbeat.timeout.seconds",
            30.0,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "an Agent silent this long loses its leases",
        ),
        Property(
            "arbiter.revocation.grace.seconds",
            30.0,
            float,
            lambda v: _finite(v) and v >= 0,
            "a number >= 0",
            "time to checkpoint before revoked GPUs move",
        ),
        Property(
            "arbiter.auction.rounding",
            "lease-time",
            str,
            lambda v: v in ("lease-time", "count"),
            "lease-time or count",
            "how an app's fractional share of its won GPUs is granted: "
            "lease-time keeps every GPU for part of the lease, "
            "count keeps part of the GPUs for the whole lease",
        ),
        Property(
            "arbiter.auction.payment-gap",
            1e-4,
            float,
            lambda v: 0.0 <= v <= 0.1,
            "a number in [0, 0.1]",
            "optimality gap accepted in the solves that set each winner's hidden payment",
        ),
        Property(
            "arbiter.auction.time-budget.seconds",
            1.5,
            float,
            lambda v: _finite(v) and v >= 0,
            "a number >= 0",
            "solving time of one round; past it the best allocation found is used "
            "(0 = solve every round exactly)",
        ),
        Property(
            "arbiter.auction.worker-process",
            True,
            parse_bool,
            lambda v: isinstance(v, bool),
            "true or false",
            "solve auctions in a niced worker process, off the RPC threads",
        ),
        Property(
            "arbiter.bid.deadline.seconds",
            5.0,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "how long Agents have to answer an offer",
        ),
        Property(
            "arbiter.bid.max-rows",
            32,
            int,
            lambda v: 1 <= v <= 4096,
            "an integer in [1, 4096]",
            "largest bid table accepted",
        ),
        Property(
            "arbiter.grpc.port",
            50051,
            int,
            lambda v: 0 <= v <= 65535,
            "a port in [0, 65535]",
            "gRPC listen port (0: any free port)",
        ),
        Property(
            "arbiter.grpc.bind-host",
            "127.0.0.1",
            str,
            lambda v: bool(v.strip()),
            "a host name or address",
            "address gRPC listens on (0.0.0.0 or :: to serve other hosts; then registrations "
            "need a credential, see arbiter.admission.anonymous)",
        ),
        Property(
            "arbiter.admission.anonymous",
            "loopback",
            str,
            lambda v: v in ("loopback", "never", "always"),
            "loopback, never or always",
            "who may register apps and queries without a credential: loopback = anyone only "
            "while gRPC listens on a loopback address, never, always",
        ),
        Property(
            "arbiter.admission.submit-token-file",
            "",
            str,
            lambda v: True,
            "a file path",
            "file holding the credential submitters register apps (and queries) with, sent as "
            "x-submit-token (generated beside the journal if empty)",
        ),
        Property(
            "arbiter.admission.max-apps",
            1000,
            int,
            lambda v: v >= 1,
            "an integer >= 1",
            "registered ML apps at most (RegisterApp is refused beyond)",
        ),
        Property(
            "arbiter.admission.max-apps-per-user",
            100,
            int,
            lambda v: v >= 1,
            "an integer >= 1",
            "registered ML apps per user at most",
        ),
        Property(
            "arbiter.admission.max-jobs",
            256,
            int,
            lambda v: 0 <= v <= 100_000,
            "an integer in [0, 100000]",
            "jobs one RegisterApp may declare",
        ),
        Property(
            "arbiter.admission.max-register-bytes",
            64 * 1024,
            int,
            lambda v: 256 <= v <= 64 * 1024 * 1024,
            "bytes in [256, 64 MiB]",
            "largest RegisterApp or RegisterQuery request (what is journaled or kept)",
        ),
        Property(
            "arbiter.admission.max-anonymous",
            100,
            int,
            lambda v: v >= 0,
            "an integer >= 0",
            "apps, and queries, registered without a credential at most (each; the rest of the "
            "totals stays for those with one)",
        ),
        Property(
            "arbiter.admission.app-idle-expiry.seconds",
            3600.0,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "an app that registered and never opened a session, holding no lease, is removed "
            "after this long",
        ),
        Property(
            "arbiter.admission.max-queries",
            1000,
            int,
            lambda v: v >= 1,
            "an integer >= 1",
            "registered queries at most",
        ),
        Property(
            "arbiter.admission.max-queries-per-user",
            64,
            int,
            lambda v: v >= 1,
            "an integer >= 1",
            "registered queries per user at most",
        ),
        Property(
            "arbiter.query.idle-expiry.seconds",
            600.0,
            float,
            lambda v: _finite(v) and v > 0,
            "a number > 0",
            "a query with no open share stream for this long is unregistered (|J| shrinks)",
        ),
        Property(
            "arbiter.metrics.port",
            -1,
            int,
            lambda v: -1 <= v <= 65535,
            "a port in [0, 65535], or -1",
            "HTTP port of /metrics (Prometheus) and /healthz (-1: off, 0: any free port)",
        ),
        Property(
            "arbiter.metrics.bind-host",
            "127.0.0.1",
            str,
            lambda v: bool(v.strip()),
            "a host name or address",
            "address /metrics listens on (0.0.0.0 to expose it)",
        ),
        Property(
            "arbiter.grpc.max-message-bytes",
            4 * 1024 * 1024,
            int,
            lambda v: 1024 <= v <= 256 * 1024 * 1024,
            "bytes in [1 KiB, 256 MiB]",
            "largest gRPC message accepted",
        ),
        Property(
            "arbiter.grpc.tls.enabled",
            False,
            parse_bool,
            lambda v: True,
            "true or false",
            "serve TLS (needs cert and key)",
        ),
        Property(
            "arbiter.grpc.tls.cert",
            "",
            str,
            lambda v: True,
            "a PEM file path",
            "server certificate chain",
        ),
        Property(
            "arbiter.grpc.tls.key",
            "",
            str,
            lambda v: True,
            "a PEM file path",
            "server private key",
        ),
        Property(
            "arbiter.grpc.tls.client-ca",
            "",
            str,
            lambda v: True,
            "a PEM file path",
            "CA for client certificates: set it to require mutual TLS",
        ),
        Property(
            "arbiter.admin.token-file",
            "",
            str,
            lambda v: True,
            "a file path",
            "file holding the admin credential (generated if empty)",
        ),
        Property(
            "arbiter.query.service-token-file",
            "",
            str,
            lambda v: True,
            "a file path",
            "file holding the credential query services (HiveServer2's hooks) register "
            "queries with (generated if empty)",
        ),
        Property(
            "arbiter.journal.path",
            "arbiter-journal.db",
            str,
            lambda v: bool(v),
            "a file path",
            "SQLite journal (WAL) of apps, tokens, leases, bids",
        ),
        Property(
            "arbiter.ha.zk-address",
            "",
            str,
            lambda v: all(_host_port(h) for h in v.split(",")) if v.strip() else True,
            "host:port[,host:port...] of a ZooKeeper ensemble, or empty",
            "active/standby arbiters (arbiter.ha): elect the active on this ZooKeeper and keep "
            "the journal in it instead of arbiter.journal.path (empty: one arbiter, SQLite)",
        ),
        Property(
            "arbiter.ha.id",
            "",
            str,
            lambda v: "@" not in v and "/" not in v and "," not in v,
            "a name without @ / or ,",
            "this arbiter's name in the HA pair (a1, a2, ...; needed with arbiter.ha.zk-address)",
        ),
        Property(
            "arbiter.ha.zk-root",
            "/yarn-arbiter/default",
            str,
            lambda v: v.startswith("/") and len(v) > 1 and not v.endswith("/"),
            "an absolute znode path, not ending in /",
            "znode under which the pair keeps its election, leader epoch and journal",
        ),
        Property(
            "arbiter.ha.session-timeout.seconds",
            6.0,
            float,
            lambda v: _finite(v) and 1.0 <= v <= 60.0,
            "seconds in [1, 60]",
            "ZooKeeper session timeout: a dead active is replaced about this long after it dies",
        ),
        Property(
            "arbiter.ha.advertise-address",
            "",
            str,
            lambda v: not v.strip() or _host_port(v),
            "host:port, or empty",
            "where clients reach this arbiter, told to them by the standby "
            "(empty: arbiter.grpc.bind-host:arbiter.grpc.port)",
        ),
    ),
    check=_check_tls,
)


def env_name(key: str) -> str:
    """The environment variable overriding ``key``."""
    return key.upper().replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class Config:
    """Validated values by key, where each came from (``default``, a file path, ``$VAR``, a
    flag, ...), and the schemas they were loaded with."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    schemas: tuple[Schema, ...] = (SCHEMA,)

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise KeyError(f"unknown configuration key {key!r}")
        return self.values[key]

    def property(self, key: str) -> Property:
        """The :class:`Property` of ``key`` in the loaded schemas."""
        for schema in self.schemas:
            if key in schema:
                return schema[key]
        raise KeyError(f"unknown configuration key {key!r}")

    def with_value(self, key: str, text: str, source: str = "runtime") -> Config:
        """A copy with ``key`` set from ``text`` (validated like any other source)."""
        values, sources = dict(self.values), dict(self.sources)
        values[key] = _parse(_find(key, self.schemas, source), text, source)
        sources[key] = source
        _check_all(self.schemas, values)
        return Config(MappingProxyType(values), MappingProxyType(sources), self.schemas)


def _find(key: str, schemas: Sequence[Schema], source: str) -> Property:
    """``key``'s property, or the error a key outside the schemas is."""
    for schema in schemas:
        if key.startswith(schema.prefix):
            if key in schema:
                return schema[key]
            break
    else:
        prefixes = " or ".join(repr(s.prefix) for s in schemas)
        raise ConfigError(
            f"{source}: unknown configuration key {key!r} (known keys start with {prefixes})"
        )
    raise ConfigError(f"{source}: unknown configuration key {key!r}")


_UNIT = re.compile(r"[a-zA-Z]\s*$")


def _with_units(key: str, text: str) -> str:
    """``text`` with a Hadoop duration or size unit resolved, for the keys that take one
    (``*.seconds`` / ``*-seconds``: ``500ms``, ``5m``, ``2h``; ``*-bytes``: ``64k``, ``4m``)."""
    t = text.strip()
    if not _UNIT.search(t) or t.lower() in ("inf", "infinity", "nan"):
        return t
    if key.endswith("seconds"):
        x = parse_duration(t)
        return str(int(x)) if x == int(x) else repr(x)
    if key.endswith("-bytes"):
        return str(parse_size(t))
    return t


def _parse(prop: Property, text: str, source: str) -> Any:
    try:
        value = prop.parse(_with_units(prop.key, text))
    except ValueError:
        raise ConfigError(
            f"{source}: {prop.key} = {text!r} is not {prop.expected} ({prop.help})"
        ) from None
    if not prop.check(value):
        raise ConfigError(f"{source}: {prop.key} = {text!r} is not {prop.expected} ({prop.help})")
    return value


def _check_all(schemas: Sequence[Schema], values: Mapping[str, Any]) -> None:
    for schema in schemas:
        if schema.check is not None:
            schema.check(values)


def _read_file(path: Path, environ: Mapping[str, str], finals: set[str]) -> dict[str, str]:
    """The file's keys and values, ``${...}`` expanded; its ``<final>`` keys go in ``finals``."""
    text = path.read_text()
    if text.lstrip().startswith("<"):
        try:
            site = read_site_xml(path)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        raw = {k: p.value for k, p in site.items()}
        finals.update(k for k, p in site.items() if p.final)
        try:
            return {k: expand(v, raw, environ) for k, v in raw.items()}
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    out = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConfigError(f"{path}:{lineno}: expected 'key = value', got {line!r}")
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def load_config(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    schemas: Sequence[Schema] = (SCHEMA,),
) -> Config:
    """The keys of ``schemas``: defaults, then ``path`` (if given), then environment variables
    (named after the key, then a property's older names); all validated."""
    environ = os.environ if environ is None else environ
    schemas = tuple(schemas)
    prefixes = [s.prefix for s in schemas]
    for a in prefixes:
        if any(b != a and b.startswith(a) for b in prefixes) or prefixes.count(a) > 1:
            raise ValueError(f"schema prefixes overlap: {prefixes}")
    values = {k: p.default for s in schemas for k, p in s.items()}
    sources = dict.fromkeys(values, "default")
    finals: set[str] = set()
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"configuration file {path} does not exist")
        for key, text in _read_file(path, environ, finals).items():
            values[key] = _parse(_find(key, schemas, str(path)), text, str(path))
            sources[key] = str(path)
    for schema in schemas:
        for key, prop in schema.items():
            for name in (env_name(key), *prop.legacy_env):
                if name in environ and key in finals:
                    log.warning("%s: %s is final; $%s does not override it", path, key, name)
                elif name in environ:
                    values[key] = _parse(prop, environ[name], f"${name}")
                    sources[key] = f"${name}"
    _check_all(schemas, values)
    return Config(MappingProxyType(values), MappingProxyType(sources), schemas)
