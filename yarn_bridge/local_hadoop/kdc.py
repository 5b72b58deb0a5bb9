"""A Kerberos realm for the local Hadoop: Hadoop's own ``MiniKdc`` (``hadoop-minikdc``, Apache
Kerby inside) run as one more daemon of the work dir, on 127.0.0.1.

Spec: Hadoop's *SecureMode* ("Kerberos principals for Hadoop Daemons", "Mapping from Kerberos
principals to OS user accounts") and *HttpAuthentication* (SPNEGO on the web UIs and REST APIs);
``../shared/spec/yarn-hive-integration.md`` §1.1 (a Kerberos cluster authenticates REST calls
with SPNEGO).

What ``yarn-arbiter hadoop up --kerberos`` gets from here (:class:`LocalHadoop` starts it):

* **The KDC** is ``org.apache.hadoop.minikdc.MiniKdc``'s own ``main`` (``WORKDIR PROPERTIES
  KEYTAB PRINCIPAL...``): it serves realm :data:`REALM` over TCP on a port we choose, creates the
  principals with random keys and writes them all into one keytab, then prints "Standalone
  MiniKdc Running". Its jars (about 4 MB) are fetched from Maven Central once, into their own
  cache beside the Hadoop jars (``java/minikdc/pom.xml``).
* **The principals**: :data:`RM_PRINCIPAL`, :data:`NM_PRINCIPAL` (the daemons' RPC identities),
  ``HTTP/localhost`` and ``HTTP/127.0.0.1`` (SPNEGO on the web servers: a client names the service
  ``HTTP@<host of the URL>``, and whether its Kerberos library turns 127.0.0.1 into localhost
  depends on its ``rdns`` setting, so both exist) and one user principal (``alice@EXAMPLE.COM``
  in the tests): the identity a client of the cluster logs in as.
* **Two keytabs**, split from MiniKdc's one (:func:`keytab_subset`, pure): ``service.keytab``
  (the daemons' and HTTP principals, read by the RM and NMs) and ``<user>.keytab`` (only the
  user's keys: what a client is handed; it cannot impersonate a daemon with it).
* **krb5.conf** of our own (:func:`krb5_conf`, pure), read by the daemons' JVMs
  (``-Djava.security.krb5.conf``) and by MIT Kerberos in Python clients (``KRB5_CONFIG``):
  MiniKdc's file names ``localhost`` as the KDC; ours names 127.0.0.1 and its port, forces TCP,
  and turns off DNS lookups and reverse-DNS canonicalisation so nothing leaves the loopback.

Decisions: MiniKdc's ``main`` rather than a Java class of ours (nothing to compile; the
launcher is Hadoop's documented standalone mode); the keytab split in Python rather than
``ktutil`` (no dependency on ``krb5-user``'s binaries; the keytab format is six fields).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from yarn_bridge.keytab import keytab_subset
from yarn_bridge.local_hadoop.common import HADOOP_VERSION, REPO
from yarn_bridge.local_hadoop.jars import fetch_jars, jar_cache_dir

__all__ = [
    "HTTP_PRINCIPALS",
    "KDC_CLASS",
    "MINIKDC_POM",
    "NM_PRINCIPAL",
    "REALM",
    "RM_PRINCIPAL",
    "KdcFiles",
    "ensure_minikdc_jars",
    "kdc_args",
    "kdc_files",
    "krb5_conf",
    "split_keytabs",
]

REALM: Final = "EXAMPLE.COM"  # MiniKdc's default (org.name=EXAMPLE, org.domain=COM)
KDC_CLASS: Final = "org.apache.hadoop.minikdc.MiniKdc"
MINIKDC_POM: Final = REPO / "java" / "minikdc" / "pom.xml"
RM_PRINCIPAL: Final = f"rm/localhost@{REALM}"
NM_PRINCIPAL: Final = f"nm/localhost@{REALM}"
HTTP_PRINCIPALS: Final = (f"HTTP/localhost@{REALM}", f"HTTP/127.0.0.1@{REALM}")
READY_LINE: Final = "Standalone MiniKdc Running"


def ensure_minikdc_jars(*, progress: Callable[[str], None] = print) -> Path:
    """MiniKdc's jars, fetched once into ``<jar cache>/../minikdc-V`` (:func:`fetch_jars`)."""
    cache = jar_cache_dir().parent / f"minikdc-{HADOOP_VERSION}"
    return fetch_jars(MINIKDC_POM, cache, f"Hadoop {HADOOP_VERSION} MiniKdc", progress=progress)


@dataclass(frozen=True)
class KdcFiles:
    """Where one work dir's realm lives (all under ``DIR/kdc``)."""

    root: Path
    user: str

    @property
    def properties(self) -> Path:
        return self.root / "minikdc.properties"

    @property
    def all_keytab(self) -> Path:
        """MiniKdc's own keytab with every principal (split, then removed)."""
        return self.root / "all.keytab"

    @property
    def service_keytab(self) -> Path:
        return self.root / "service.keytab"

    @property
    def user_keytab(self) -> Path:
        return self.root / f"{self.user}.keytab"

    @property
    def krb5_conf(self) -> Path:
        return self.root / "krb5.conf"

    @property
    def user_principal(self) -> str:
        return f"{self.user}@{REALM}"

    @property
    def service_principals(self) -> tuple[str, ...]:
        return (RM_PRINCIPAL, NM_PRINCIPAL, *HTTP_PRINCIPALS)


def kdc_files(workdir: Path, user: str) -> KdcFiles:
    if not user or any(c in user for c in "/@ \t\n"):
        raise ValueError(f"Kerberos user {user!r}: a plain name without '/', '@' or spaces")
    return KdcFiles(workdir / "kdc", user)


def kdc_args(files: KdcFiles, port: int) -> list[str]:
    """Write MiniKdc's properties file; its ``main``'s arguments (module docstring).

    >>> import tempfile
    >>> f = kdc_files(Path(tempfile.mkdtemp()), "alice")
    >>> kdc_args(f, 88)[3:]
    ['rm/localhost', 'nm/localhost', 'HTTP/localhost', 'HTTP/127.0.0.1', 'alice']
    >>> "kdc.port=88" in f.properties.read_text()
    True
    """
    files.root.mkdir(parents=True, exist_ok=True)
    files.properties.write_text(
        f"kdc.bind.address=127.0.0.1\nkdc.port={port}\ntransport=TCP\n"
        "org.name=EXAMPLE\norg.domain=COM\n"
    )
    short = [p.rsplit("@", 1)[0] for p in (*files.service_principals, files.user_principal)]
    return [str(files.root), str(files.properties), str(files.all_keytab), *short]


def krb5_conf(realm: str, port: int) -> str:
    """A ``krb5.conf`` for MIT Kerberos and Java alike: one KDC on 127.0.0.1 over TCP, no DNS.

    >>> text = krb5_conf("EXAMPLE.COM", 6088)
    >>> "kdc = 127.0.0.1:6088" in text and "rdns = false" in text
    True
    """
    return f"""\
# written by yarn_bridge.local_hadoop.kdc for the local Hadoop's MiniKdc
[libdefaults]
    default_realm = {realm}
    # MiniKdc listens on TCP only
    udp_preference_limit = 1
    dns_lookup_kdc = false
    dns_lookup_realm = false
    # HTTP@127.0.0.1 stays HTTP/127.0.0.1 (no reverse lookup to localhost)
    rdns = false
    dns_canonicalize_hostname = false
    ticket_lifetime = 24h
    renew_lifetime = 7d
    forwardable = true

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {realm}
    127.0.0.1 = {realm}
"""


def split_keytabs(files: KdcFiles, port: int) -> None:
    """After MiniKdc created its keytab: write the service and user keytabs (mode 0600) and our
    ``krb5.conf``, and remove MiniKdc's all-in-one keytab."""
    data = files.all_keytab.read_bytes()
    for path, principals in ((files.service_keytab, files.service_principals),
                             (files.user_keytab, (files.user_principal,))):  # fmt: skip
        path.write_bytes(keytab_subset(data, principals))
        path.chmod(0o600)
    files.krb5_conf.write_text(krb5_conf(REALM, port))
    files.all_keytab.unlink()
