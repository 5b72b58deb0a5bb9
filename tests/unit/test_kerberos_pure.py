"""The pure parts of Kerberos support: keytab reading and splitting (``yarn_bridge.keytab``), the
realm's krb5.conf and MiniKdc's arguments (``local_hadoop.kdc``), the secure-mode site overrides
(``local_hadoop.config``), and how the auth options combine (``yarn_bridge.auth``,
``yarn_bridge.settings``). The end-to-end behaviour is tests/engine/test_yarn_kerberos.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from arbiter.config import ConfigError, load_config
from yarn_bridge.auth import auth_hook
from yarn_bridge.kerberos import KeytabLogin, _holds, _reason, kerberos_hook
from yarn_bridge.keytab import keytab_principals, keytab_subset
from yarn_bridge.local_hadoop import LocalHadoopSpec, RMPorts, site_overrides
from yarn_bridge.local_hadoop.kdc import kdc_args, kdc_files, krb5_conf
from yarn_bridge.settings import BRIDGE_SCHEMA, KRB_KEYTAB, KRB_PRINCIPAL


def _entry(principal: str, enctype: int, key: bytes, *, vno32: bool = True) -> bytes:
    """One keytab record (length prefix included), as MIT and Kerby write them."""
    name, realm = principal.rsplit("@", 1)
    comps = name.split("/")

    def counted(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    body = struct.pack(">H", len(comps)) + counted(realm.encode())
    body += b"".join(counted(c.encode()) for c in comps)
    body += struct.pack(">IIB", 1, 1_700_000_000, 1) + struct.pack(">H", enctype) + counted(key)
    if vno32:
        body += struct.pack(">I", 1)
    return struct.pack(">i", len(body)) + body


def _keytab(*records: bytes) -> bytes:
    return b"\x05\x02" + b"".join(records)


ALICE = "alice@EXAMPLE.COM"
RM = "rm/localhost@EXAMPLE.COM"


def test_keytab_principals_and_subset_keep_every_key_type() -> None:
    hole = struct.pack(">i", -12) + bytes(12)  # a deleted entry
    a17 = _entry(ALICE, 17, b"b" * 16, vno32=False)
    data = _keytab(_entry(RM, 18, b"k" * 32), hole, _entry(ALICE, 18, b"a" * 32), a17,
                   _entry(RM, 17, b"r" * 16))  # fmt: skip
    assert keytab_principals(data) == [RM, ALICE]
    only = keytab_subset(data, [ALICE])
    assert keytab_principals(only) == [ALICE]
    assert only == _keytab(_entry(ALICE, 18, b"a" * 32), _entry(ALICE, 17, b"b" * 16, vno32=False))
    assert keytab_subset(data, [ALICE, RM]) == _keytab(
        _entry(RM, 18, b"k" * 32), _entry(ALICE, 18, b"a" * 32),
        _entry(ALICE, 17, b"b" * 16, vno32=False), _entry(RM, 17, b"r" * 16),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"no keytab entry for bob@EXAMPLE\.COM"):
        keytab_subset(data, [ALICE, "bob@EXAMPLE.COM"])


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\x05\x01" + _entry(ALICE, 18, b"a")[0:], "not a version 0x0502 keytab"),
        (b"\x05", "too short"),
        (_keytab(_entry(ALICE, 18, b"a" * 32)[:-10]), "truncated keytab entry"),
        (_keytab(struct.pack(">i", 4) + struct.pack(">HH", 3, 40)), "malformed keytab entry"),
    ],
)
def test_a_damaged_keytab_is_a_value_error(data: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        keytab_principals(data)


def test_a_login_checks_its_keytab_before_any_request(tmp_path: Path) -> None:
    kt = tmp_path / "alice.keytab"
    kt.write_bytes(_keytab(_entry(ALICE, 18, b"a" * 32)))
    with pytest.raises(ValueError, match="no such file"):
        KeytabLogin(ALICE, tmp_path / "nope.keytab")
    with pytest.raises(ValueError, match=r"has no key for bob@EXAMPLE.COM \(it holds alice@"):
        KeytabLogin("bob@EXAMPLE.COM", kt)
    (tmp_path / "junk").write_bytes(b"not a keytab")
    with pytest.raises(ValueError, match="not a version 0x0502 keytab"):
        KeytabLogin(ALICE, tmp_path / "junk")
    with pytest.raises(ValueError, match=r"krb5\.conf .* no such file"):
        KeytabLogin(ALICE, kt, krb5_conf=tmp_path / "krb5.conf")
    login = KeytabLogin("alice", kt)  # no realm: the keytab's
    assert login.ccache.startswith("MEMORY:") and login.keytab == kt.resolve()
    assert _holds([ALICE], "alice") and not _holds([ALICE], "alice@OTHER.ORG")


def test_principal_and_keytab_go_together_and_exclude_the_other_hooks(tmp_path: Path) -> None:
    kt = tmp_path / "alice.keytab"
    kt.write_bytes(_keytab(_entry(ALICE, 18, b"a" * 32)))
    assert kerberos_hook(None, None) is None
    with pytest.raises(ValueError, match="--principal needs --keytab"):
        kerberos_hook(ALICE, None)
    with pytest.raises(ValueError, match="--keytab needs --principal"):
        kerberos_hook(None, str(kt))
    assert callable(kerberos_hook(ALICE, str(kt)))
    both = "--rm-auth-header-command and --principal/--keytab, not both"
    with pytest.raises(ValueError, match=both):
        auth_hook("echo x", None, principal=ALICE, keytab=str(kt))
    with pytest.raises(ValueError, match="--rm-auth-hook and --principal/--keytab, not both"):
        auth_hook(None, "m:f", keytab=str(kt))


def test_the_bridge_configuration_takes_one_kind_of_auth(tmp_path: Path) -> None:
    env = {"YARN_ARBITER_BRIDGE_RM_AUTH_KERBEROS_PRINCIPAL": ALICE,
           "YARN_ARBITER_BRIDGE_RM_AUTH_KERBEROS_KEYTAB": "/k"}  # fmt: skip
    cfg = load_config(None, env, schemas=(BRIDGE_SCHEMA,))
    assert (cfg[KRB_PRINCIPAL], cfg[KRB_KEYTAB]) == (ALICE, "/k")
    with pytest.raises(ConfigError, match="give one of"):
        load_config(None, {**env, "YARN_ARBITER_BRIDGE_RM_AUTH_HOOK": "m:f"},
                    schemas=(BRIDGE_SCHEMA,))  # fmt: skip


def test_gssapi_messages_lose_their_codes() -> None:
    text = ("Major (851968): Unspecified GSS failure.  Minor code may provide more information, "
            "Minor (2529638936): Preauthentication failed")  # fmt: skip
    assert _reason(Exception(text)) == "Preauthentication failed"
    assert _reason(Exception("plain")) == "plain"


def test_the_realm_files_and_minikdc_arguments(tmp_path: Path) -> None:
    conf = krb5_conf("EXAMPLE.COM", 6088)
    assert "default_realm = EXAMPLE.COM" in conf
    assert "kdc = 127.0.0.1:6088" in conf and "udp_preference_limit = 1" in conf
    assert "dns_canonicalize_hostname = false" in conf
    files = kdc_files(tmp_path, "alice")
    args = kdc_args(files, 6088)
    assert args[:3] == [str(files.root), str(files.properties), str(files.all_keytab)]
    assert args[-1] == "alice" and "rm/localhost" in args and "HTTP/127.0.0.1" in args
    assert files.user_keytab.name == "alice.keytab" and files.user_principal == ALICE
    for bad in ("", "a/b", "a@B", "a b"):
        with pytest.raises(ValueError, match="plain name"):
            kdc_files(tmp_path, bad)


def test_secure_mode_is_only_in_a_kerberos_spec() -> None:
    ports = {"rm1": RMPorts(1, 2, 3, 4, 5)}
    plain = site_overrides(LocalHadoopSpec(Path("/w")), jars=Path("/j"), rm_ports=ports, nm=None,
                           zk_port=None)  # fmt: skip
    assert "hadoop.security.authentication" not in plain["core-site.xml"]
    spec = LocalHadoopSpec(Path("/w"), kerberos=True, kerberos_user="alice")
    secure = site_overrides(spec, jars=Path("/j"), rm_ports=ports, nm=None, zk_port=None)
    core, yarn = secure["core-site.xml"], secure["yarn-site.xml"]
    assert core["hadoop.security.authentication"] == "kerberos"
    assert core["hadoop.http.authentication.type"] == "kerberos"
    assert core["hadoop.http.authentication.kerberos.keytab"] == "/w/kdc/service.keytab"
    assert yarn["yarn.resourcemanager.principal"] == RM
    assert yarn["yarn.nodemanager.principal"] == "nm/localhost@EXAMPLE.COM"
    assert yarn["yarn.nodemanager.container-executor.class"].endswith("DefaultContainerExecutor")
    # the rest of the local configuration is untouched
    assert (
        yarn["yarn.resourcemanager.webapp.address"]
        == plain["yarn-site.xml"]["yarn.resourcemanager.webapp.address"]
    )
