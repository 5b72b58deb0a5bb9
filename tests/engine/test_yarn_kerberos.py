"""Kerberos end to end on a real, secured local YARN: Hadoop 3.5.0's RM and NodeManagers in
secure mode on a MiniKdc realm (``LocalHadoopSpec(kerberos=True)``), SPNEGO on the RM's REST
API, and the bridge, ``yarn-arbiter serve`` and ``yarn-arbiter submit`` logging in from a
keytab (:mod:`yarn_bridge.kerberos`).

What is asserted is what the RM and the KDC say: a 401 with ``WWW-Authenticate: Negotiate``
without credentials, the cluster and its apps with them, the user YARN records for an app
submitted with alice's keytab, and the Kerberos library's own reason when a keytab or the KDC
is wrong.
"""

from __future__ import annotations

import getpass
import os
import struct
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support import wait_for
from support.yarn import KNOBS, Arbiter

from yarn_bridge.kerberos import KeytabLogin, kerberos_hook
from yarn_bridge.keytab import keytab_principals, keytab_subset
from yarn_bridge.local_hadoop import ClusterState, LocalHadoop, PortPool
from yarn_bridge.local_hadoop.kdc import krb5_conf
from yarn_bridge.rm import RMAuthError, RMClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

USER = "alice"


@dataclass
class Secured:
    local: LocalHadoop
    state: ClusterState

    @property
    def rm_url(self) -> str:
        return self.state.rm_url

    def login_args(self, keytab: str | None = None, krb5: str | None = None) -> list[str]:
        return ["--principal", self.state.principal, "--keytab", keytab or self.state.keytab,
                "--krb5-conf", krb5 or self.state.krb5_conf]  # fmt: skip

    def rm(self) -> RMClient:
        hook = kerberos_hook(self.state.principal, self.state.keytab, self.state.krb5_conf)
        return RMClient(self.rm_url, auth=hook)

    def env(self) -> dict[str, str]:
        return {**os.environ, "JAVA_HOME": self.state.java_home,
                "HADOOP_CONF_DIR": self.state.client_conf}  # fmt: skip


def _cli(*args: str, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess:  # fmt: skip
    return subprocess.run([sys.executable, "-m", "yarn_arbiter.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """``yarn-arbiter hadoop up --kerberos`` (the command an operator runs), 2 NodeManagers."""
    workdir = tmp_path_factory.mktemp("yarn-krb")
    local = LocalHadoop(workdir)
    try:
        out = _cli("hadoop", "up", "--workdir", str(workdir), "--kerberos", "--kerberos-user",
                   USER, timeout=300)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        state = local.state()
        assert state is not None and out.stdout.strip().splitlines()[-1] == state.rm_url
        assert (f"export KRB5_CONFIG={state.krb5_conf}; clients log in with --principal "
                f"{USER}@EXAMPLE.COM --keytab {state.keytab}") in out.stderr  # fmt: skip
        assert {d.name for d in state.daemons} == {"kdc", "rm1", "nm1", "nm2"}
        yield Secured(local, state)
    finally:
        local.down()


def _other_keys(keytab: bytes) -> bytes:
    """The same entries with every key's bytes inverted (a keytab from an older realm)."""
    out, pos = bytearray(keytab), 2
    while pos + 4 <= len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        body, end = pos + 4, pos + 4 + abs(size)
        if size > 0:
            (n,) = struct.unpack_from(">H", out, body)
            off = body + 2
            for _ in range(n + 1):  # realm and components
                off += 2 + struct.unpack_from(">H", out, off)[0]
            off += 4 + 4 + 1 + 2  # name type, timestamp, vno8, key type
            (length,) = struct.unpack_from(">H", out, off)
            key = slice(off + 2, off + 2 + length)
            out[key] = bytes(b ^ 0xFF for b in out[key])
        pos = end
    return bytes(out)


def test_the_rest_api_wants_spnego(secured: Secured) -> None:
    r = httpx.get(f"{secured.rm_url}/ws/v1/cluster/info", timeout=10)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Negotiate")
    # simple auth's user.name is no way in on a Kerberized RM
    r = httpx.get(f"{secured.rm_url}/ws/v1/cluster/apps", params={"user.name": USER}, timeout=10)
    assert r.status_code == 401
    with RMClient(secured.rm_url) as rm, pytest.raises(RMAuthError) as err:
        rm.nodes()
    assert err.value.status == 401
    assert "requires Kerberos (SPNEGO)" in str(err.value) and "--keytab" in str(err.value)


def test_a_keytab_login_reads_the_cluster_and_its_apps(secured: Secured) -> None:
    st = secured.state
    hook = kerberos_hook(st.principal, st.keytab, st.krb5_conf)
    assert hook is not None
    tokens: list[str] = []

    def counting(method: str, url: str) -> Mapping[str, str]:
        tokens.append(url)
        return hook(method, url)

    with RMClient(secured.rm_url, auth=counting) as rm:
        info = rm.cluster_info()
        assert info.state == "STARTED" and info.ha_state == "ACTIVE"
        nodes = rm.nodes()
        assert len(nodes) == 2 and {n.state for n in nodes} == {"RUNNING"}
        assert isinstance(rm.apps(), list)
        # one SPNEGO exchange; then the RM's signed hadoop.auth cookie carries the login
        assert len(tokens) == 1
        # a cookie the RM does not accept (expired, forged) costs one new exchange, no error
        rm._http.cookies.clear()
        rm._http.cookies.set("hadoop.auth", '"u=alice&p=alice@EXAMPLE.COM&t=kerberos&e=1&s=x"',
                             domain="127.0.0.1")  # fmt: skip
        assert len(rm.nodes()) == 2 and len(tokens) == 2
    out = _cli("app", "--rm-url", secured.rm_url, *secured.login_args(), "list", "--all")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].split()[:3] == ["application", "name", "user"]


def test_submit_runs_the_lease_am_as_the_keytab_user(secured: Secured, am_jar: Path,
                                                     tmp_path: Path) -> None:  # fmt: skip
    # The arbiter's bridge polls the Kerberized RM with the same login.
    arb = Arbiter(tmp_path / "arbiter", secured.rm_url, *secured.login_args(), **KNOBS)
    try:
        state = wait_for("the arbiter's cluster from the Kerberized RM", arb.state, timeout=90)
        assert len(state.gpus) == 8  # 2 NodeManagers x 4 yarn.io/gpu, read through SPNEGO
        out = _cli("submit", "--rm-url", secured.rm_url, "--arbiter", f"127.0.0.1:{arb.port}",
                   "--gpus", "1", "--name", "krb-job", "--queue", "gpu",
                   "--command", "echo trained on $(hostname)", "--am-jar", str(am_jar),
                   "--work-gpu-seconds", "5", "--wait", "--wait-poll-seconds", "0.5",
                   *secured.login_args(), env=secured.env(), timeout=240)  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        yarn_id = out.stdout.strip()
        arb.submitted.append(yarn_id)
        with secured.rm() as rm:
            app = rm.app(yarn_id)
        assert (app.state, app.final_status) == ("FINISHED", "SUCCEEDED")
        assert app.user == USER  # the keytab's principal, alice@EXAMPLE.COM -> alice
        assert getpass.getuser() != USER  # not the OS account the containers run as
        assert f"{yarn_id} FINISHED (SUCCEEDED)" in out.stderr
    finally:
        arb.stop()


def test_a_wrong_keytab_or_a_dead_kdc_is_a_clear_error(secured: Secured, tmp_path: Path) -> None:
    data = Path(secured.state.keytab).read_bytes()
    assert keytab_principals(data) == [f"{USER}@EXAMPLE.COM"]
    service = Path(secured.state.krb5_conf).parent / "service.keytab"
    # (1) a keytab without alice's keys (the daemons')
    out = _cli("app", "--rm-url", secured.rm_url, *secured.login_args(str(service)), "list")
    assert out.returncode == 1
    assert f"{service} has no key for alice@EXAMPLE.COM (it holds " in out.stderr
    assert "rm/localhost@EXAMPLE.COM" in out.stderr
    # (2) alice's entries with other keys: the KDC refuses the pre-authentication
    wrong = tmp_path / "stale.keytab"
    wrong.write_bytes(_other_keys(data))
    assert keytab_subset(wrong.read_bytes(), [f"{USER}@EXAMPLE.COM"])  # still a valid keytab
    out = _cli("app", "--rm-url", secured.rm_url, *secured.login_args(str(wrong)), "list")
    assert out.returncode == 1
    assert "Kerberos login of alice@EXAMPLE.COM" in out.stderr
    assert any(s in out.stderr for s in ("Preauthentication failed", "Decrypt integrity",
                                         "Password incorrect")), out.stderr  # fmt: skip
    # (3) no KDC where krb5.conf points: a closed port on the loopback
    pool = PortPool()
    port = pool.take()
    pool.release()
    dead = tmp_path / "krb5-dead.conf"
    dead.write_text(krb5_conf("EXAMPLE.COM", port))
    out = _cli("app", "--rm-url", secured.rm_url, *secured.login_args(krb5=str(dead)), "list")
    assert out.returncode == 1
    assert "Cannot contact any KDC for realm 'EXAMPLE.COM'" in out.stderr
    # (4) no keytab at all: refused before any request
    with pytest.raises(ValueError, match="no such file"):
        KeytabLogin(secured.state.principal, tmp_path / "missing.keytab")
