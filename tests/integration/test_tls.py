"""TLS is one setting away: server TLS, and mutual TLS that refuses clients without a cert."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from support.arbiter import ADMIN, CLUSTER

from arbiter.config import ConfigError, load_config
from arbiter.server import RunningArbiter
from protos.yarnarbiter.v1 import arbiter_pb2 as pb
from protos.yarnarbiter.v1 import arbiter_pb2_grpc as rpc


def _serve(tmp_path: Path, pki: dict[str, Path], mutual: bool) -> RunningArbiter:
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
        "ARBITER_GRPC_TLS_ENABLED": "true",
        "ARBITER_GRPC_TLS_CERT": str(pki["server.crt"]),
        "ARBITER_GRPC_TLS_KEY": str(pki["server.key"]),
    }
    if mutual:
        env["ARBITER_GRPC_TLS_CLIENT_CA"] = str(pki["ca"])
    return RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN).start()


def _register(port: int, creds: grpc.ChannelCredentials) -> pb.RegisterAppResponse:
    channel = grpc.secure_channel(f"localhost:{port}", creds)
    return rpc.AppMasterStub(channel).RegisterApp(
        pb.RegisterAppRequest(app_name="tls", max_gpu_demand=1), timeout=5
    )


def test_tls(tmp_path: Path, pki: dict[str, Path]) -> None:
    a = _serve(tmp_path, pki, mutual=False)
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes())
        assert _register(a.port, creds).app_id
        # A plaintext client cannot talk to a TLS server.
        plain = rpc.AppMasterStub(grpc.insecure_channel(f"localhost:{a.port}"))
        with pytest.raises(grpc.RpcError):
            plain.RegisterApp(pb.RegisterAppRequest(max_gpu_demand=1), timeout=3)
    finally:
        a.stop(0)


def test_mutual_tls_requires_a_client_certificate(tmp_path: Path, pki: dict[str, Path]) -> None:
    a = _serve(tmp_path, pki, mutual=True)
    try:
        with_cert = grpc.ssl_channel_credentials(
            root_certificates=pki["ca"].read_bytes(),
            private_key=pki["client.key"].read_bytes(),
            certificate_chain=pki["client.crt"].read_bytes(),
        )
        assert _register(a.port, with_cert).app_id
        without = grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes())
        with pytest.raises(grpc.RpcError) as err:
            _register(a.port, without)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        a.stop(0)


def test_tls_misconfiguration_is_caught_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs arbiter\.grpc\.tls\.cert"):
        load_config(environ={"ARBITER_GRPC_TLS_ENABLED": "true"})
    env = {
        "ARBITER_GRPC_PORT": "0",
        "ARBITER_JOURNAL_PATH": str(tmp_path / "j.db"),
        "ARBITER_GRPC_TLS_ENABLED": "true",
        "ARBITER_GRPC_TLS_CERT": str(tmp_path / "missing.crt"),
        "ARBITER_GRPC_TLS_KEY": str(tmp_path / "missing.key"),
    }
    with pytest.raises(FileNotFoundError, match=r"arbiter\.grpc\.tls"):
        RunningArbiter(CLUSTER, load_config(environ=env), admin_token=ADMIN)
