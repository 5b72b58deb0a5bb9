"""Example training job for a leased YARN container (``python -m arbiter.examples.train_job``).

What runs *inside* the containers the lease AM starts (``yarn-arbiter submit --command``): data-
parallel mini-batch SGD of a logistic regression with numpy on a fixed synthetic problem, until
``--samples`` training samples have been processed.

* **GPUs are virtual devices** (this machine has none): the job reads the leased device indices
  from ``CUDA_VISIBLE_DEVICES`` and runs one replica per device, so a step processes
  ``batch x devices`` samples (linear data-parallel speed-up, Themis Eq. 1's assumption). The
  gradient of each replica's mini-batch is real numpy work; a step is paced to
  ``--step-seconds`` of (simulated) device time so that a job lasts long enough to see leases
  move.
* **Checkpoints**: after every step the weights and the samples done go to ``--checkpoint``
  (written to a temporary file and renamed, so a container killed mid-write leaves the last
  good one). A container started for a new lease resumes from it: a revocation costs at most
  one step.
* **Several containers, one job.** A lease that spans machines gets one container per machine,
  each running this command: they are workers of one job sharing the checkpoint as a parameter
  server on shared storage. Each step reads the latest weights, adds its devices' gradient and
  writes back under an exclusive lock (``fcntl`` on ``<checkpoint>.lock``), so the samples of
  every worker count once and the job ends when their sum is reached.
* **Exit 0** when the samples are done (the lease AM then finishes the app and gives its leases
  back); a progress line per step on stdout (the container's log).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["checkpoint_loss", "main", "train"]


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4096, 32))
    w = rng.normal(size=32)
    y = (x @ w + rng.normal(scale=2.0, size=4096) > 0).astype(float)
    return x, y


def _load(path: Path) -> tuple[np.ndarray, int]:
    if path.exists():
        with np.load(path) as ck:
            return ck["w"], int(ck["done"])
    return np.zeros(32), 0


def _save(path: Path, w: np.ndarray, done: int, loss: float) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, w=w, done=done, loss=loss)
    os.replace(tmp, path)


def checkpoint_loss(path: Path) -> float:
    """The training loss a checkpoint recorded (``inf`` when there is none yet)."""
    try:
        with np.load(path) as ck:
            return float(ck["loss"])
    except (OSError, KeyError, ValueError):
        return float("inf")


@contextlib.contextmanager
def _locked(checkpoint: Path):
    with open(checkpoint.with_name(checkpoint.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def train(
    checkpoint: Path,
    *,
    samples: int,
    devices: int,
    batch: int = 128,
    step_seconds: float = 0.5,
    lr: float = 0.1,
    seed: int = 0,
    out=sys.stdout,
) -> float:
    """Train until ``samples`` are done (resuming from ``checkpoint``); returns the final
    training loss."""
    x, y = _problem(seed)
    rng = np.random.default_rng([seed, os.getpid()])
    loss = float("nan")
    while True:
        t0 = time.monotonic()
        with _locked(checkpoint):  # one worker's step at a time on the shared weights
            w, done = _load(checkpoint)
            if done >= samples:
                break
            grad = np.zeros_like(w)
            for _ in range(devices):  # one replica per device, gradients averaged (all-reduce)
                idx = rng.integers(0, len(x), size=batch)
                p = 1.0 / (1.0 + np.exp(-(x[idx] @ w)))
                grad += x[idx].T @ (p - y[idx]) / batch
            w = w - lr * grad / devices
            done += batch * devices
            p = np.clip(1.0 / (1.0 + np.exp(-(x @ w))), 1e-9, 1 - 1e-9)
            loss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
            _save(checkpoint, w, done, loss)
        print(f"{min(done, samples)}/{samples} samples on {devices} device(s), "
              f"loss {loss:.4f}", file=out, flush=True)  # fmt: skip
        time.sleep(max(0.0, step_seconds - (time.monotonic() - t0)))
    return loss


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m arbiter.examples.train_job",
        description="Data-parallel SGD on the devices in CUDA_VISIBLE_DEVICES, resumable from "
        "a checkpoint; exits 0 when --samples are done.",
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="checkpoint file (.npz)")
    p.add_argument("--samples", type=int, default=20_000, help="samples to train on")
    p.add_argument("--batch", type=int, default=128, help="mini-batch per device")
    p.add_argument("--step-seconds", type=float, default=0.5, help="device time per step")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        print("train_job: no device in CUDA_VISIBLE_DEVICES (run it under a GPU lease)",
              file=sys.stderr)  # fmt: skip
        return 2
    args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    train(args.checkpoint, samples=args.samples, devices=len(visible), batch=args.batch,
          step_seconds=args.step_seconds, lr=args.lr, seed=args.seed)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
