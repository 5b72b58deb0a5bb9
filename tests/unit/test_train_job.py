"""The example training job the demo runs in leased containers: resumable, and workers of one
job (one container per leased machine) share its checkpoint without double counting."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest

from arbiter.examples.train_job import main, train


def test_training_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    ck = tmp_path / "ck.npz"
    loss = train(ck, samples=1024, devices=2, step_seconds=0, out=io.StringIO())
    with np.load(ck) as saved:
        assert int(saved["done"]) == 1024 and np.isfinite(loss)
        w = saved["w"].copy()
    out = io.StringIO()
    train(ck, samples=1024, devices=2, step_seconds=0, out=out)  # done already: no step
    assert out.getvalue() == ""
    with np.load(ck) as saved:
        assert np.array_equal(saved["w"], w)


def test_workers_share_one_job(tmp_path: Path) -> None:
    ck = tmp_path / "ck.npz"
    outs = [io.StringIO() for _ in range(3)]
    workers = [threading.Thread(target=train, args=(ck,),
                                kwargs={"samples": 3000, "devices": d, "step_seconds": 0.01,
                                        "out": o})
               for d, o in zip((1, 2, 4), outs, strict=True)]  # fmt: skip
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    steps = [len(o.getvalue().splitlines()) for o in outs]
    with np.load(ck) as saved:
        done = int(saved["done"])
    # every step of every worker counted once, and no worker stepped past the goal
    assert done == 128 * sum(s * d for s, d in zip(steps, (1, 2, 4), strict=True))
    assert 3000 <= done < 3000 + 128 * 4


def test_without_a_device_it_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert main(["--checkpoint", str(tmp_path / "ck.npz")]) == 2
