"""Locating the shared traces: env override, checkout-relative default, a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbiter import datasets
from arbiter.datasets import DataNotFound, data_root


def test_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pollux").mkdir()
    monkeypatch.setenv("YARN_ARBITER_DATA", str(tmp_path))
    assert data_root() == tmp_path


def test_missing_data_names_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YARN_ARBITER_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr(datasets, "_REPO", tmp_path / "repo")
    monkeypatch.setattr(datasets, "Path", _NoWork)
    with pytest.raises(DataNotFound, match="YARN_ARBITER_DATA"):
        data_root()


class _NoWork(type(Path())):  # a Path whose /work/shared/data never exists
    def is_dir(self) -> bool:
        return False if str(self).startswith("/work/shared") else super().is_dir()


def test_default_finds_the_shared_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YARN_ARBITER_DATA", raising=False)
    root = data_root()
    assert (root / "pollux" / "profiles" / "bert" / "placements.csv").is_file()
