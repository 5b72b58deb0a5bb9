"""The wire contract: fresh stubs that import and carry the AppMaster, QueryShare, Admin APIs."""

from __future__ import annotations

import filecmp
from pathlib import Path

from protos.generate import ROOT, generate


def test_checked_in_stubs_are_not_stale(tmp_path: Path) -> None:
    """`make protos` output equals what is committed (edit the .proto, then regenerate)."""
    produced = generate(tmp_path)
    assert produced, "no .proto files found"
    stale = [
        str(rel) for rel in produced if not filecmp.cmp(tmp_path / rel, ROOT / rel, shallow=False)
    ]
    assert not stale, f"stale generated stubs, run `make protos`: {stale}"


def test_services_and_package() -> None:
    from protos.yarnarbiter.v1 import arbiter_pb2, arbiter_pb2_grpc

    assert arbiter_pb2.DESCRIPTOR.package == "yarnarbiter.v1"
    services = set(arbiter_pb2.DESCRIPTOR.services_by_name)
    assert services == {"AppMaster", "QueryShare", "Admin"}
    app_master = arbiter_pb2.DESCRIPTOR.services_by_name["AppMaster"]
    session = app_master.methods_by_name["Session"]
    assert session.client_streaming and session.server_streaming
    share = arbiter_pb2.DESCRIPTOR.services_by_name["QueryShare"].methods_by_name["SubscribeShare"]
    assert share.server_streaming and not share.client_streaming
    assert hasattr(arbiter_pb2_grpc, "AppMasterServicer")
    # The Themis round messages of spec B.7 round-trip.
    bid = arbiter_pb2.Bid(
        round=3, rho_old=float("inf"), rows=[arbiter_pb2.BidRow(gpu_ids=["g"], rho=0.5)]
    )
    again = arbiter_pb2.Bid.FromString(bid.SerializeToString())
    assert again.rows[0].rho == 0.5 and again.rho_old == float("inf")
