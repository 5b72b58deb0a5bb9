"""A full mesh of TCP connections between a job's local rank processes, carrying tensors
(NumPy arrays) point to point by tag (the transport the enforcer's motifs run on; spec §6.5,
plain sockets instead of gloo).

Rank i listens on ``ports[i]``, connects to every lower rank and accepts every higher one. Each
peer connection has one receiver thread that files every frame in a mailbox keyed by
(source, tag), so a send never waits for the peer to post its receive (no send/receive
deadlock). Control frames (``ctl``) go to a callback instead of the mailbox.

Frame: 4-byte header length, JSON header (tag, dtype, shape, the channel, or ctl), 8-byte
payload length, payload bytes.

With ``rates`` (channel -> bytes/s), a tensor sent on a channel is paced by that channel's
egress bucket before it leaves and by the receiver's ingress bucket before :meth:`Mesh.recv`
hands it over (:mod:`syndicate.dataplane.pacing`, spec §6.5); control frames and tensors sent
without a channel are not paced.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from syndicate.dataplane.pacing import Pacer, check_rates

__all__ = ["Mesh", "MeshClosed"]


class MeshClosed(RuntimeError):
    """The mesh was closed while waiting."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


class Mesh:
    def __init__(
        self,
        rank: int,
        ports: Sequence[int],
        *,
        on_ctl: Callable[[int, dict[str, Any]], None] | None = None,
        connect_timeout: float = 30.0,
        rates: Mapping[str, float] | None = None,
    ) -> None:
        self.rank, self.n = rank, len(ports)
        self.on_ctl = on_ctl
        self.rates = check_rates(rates)
        self._egress = {ch: Pacer(r) for ch, r in self.rates.items()}
        self._ingress = {ch: Pacer(r) for ch, r in self.rates.items()}
        self._socks: dict[int, socket.socket] = {}
        self._send_locks: dict[int, threading.Lock] = {}
        # (source, tag) -> [(when it may be handed over, tensor)] in arrival order
        self._box: dict[tuple[int, str], list[tuple[float, np.ndarray]]] = {}
        self._cv = threading.Condition()
        self._closed = False
        listener = socket.create_server(("127.0.0.1", ports[rank]), backlog=len(ports))
        try:
            for peer in range(rank):
                deadline = time.monotonic() + connect_timeout
                while True:
                    try:
                        s = socket.create_connection(("127.0.0.1", ports[peer]), timeout=5)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
                s.sendall(struct.pack("!I", rank))
                self._add(peer, s)
            listener.settimeout(connect_timeout)
            for _ in range(rank + 1, self.n):
                s, _ = listener.accept()
                peer = struct.unpack("!I", _recv_exact(s, 4))[0]
                self._add(peer, s)
        finally:
            listener.close()
        for peer, s in self._socks.items():
            threading.Thread(
                target=self._reader, args=(peer, s), daemon=True, name=f"mesh-{rank}<-{peer}"
            ).start()

    def _add(self, peer: int, s: socket.socket) -> None:
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socks[peer] = s
        self._send_locks[peer] = threading.Lock()

    def _reader(self, peer: int, s: socket.socket) -> None:
        try:
            while True:
                (hlen,) = struct.unpack("!I", _recv_exact(s, 4))
                header = json.loads(_recv_exact(s, hlen))
                (plen,) = struct.unpack("!Q", _recv_exact(s, 8))
                payload = _recv_exact(s, plen) if plen else b""
                if "ctl" in header:
                    if self.on_ctl is not None:
                        self.on_ctl(peer, header["ctl"])
                    continue
                arr = np.frombuffer(payload, dtype=header["dtype"]).reshape(header["shape"])
                # The payload crossed the sender's egress slot just now, so its ingress slot
                # began n/rate ago: it costs nothing more unless this rank's ingress is busy
                # with other senders' payloads (incast), when it queues behind them.
                pacer = self._ingress.get(header.get("ch", ""))
                ready = 0.0
                if pacer is not None:
                    ready = pacer.reserve(plen, time.monotonic() - plen / pacer.rate)
                with self._cv:
                    self._box.setdefault((peer, header["tag"]), []).append((ready, arr.copy()))
                    self._cv.notify_all()
        except (ConnectionError, OSError, ValueError):
            return

    def _frame(self, dst: int, header: dict[str, Any], payload: bytes) -> None:
        h = json.dumps(header).encode()
        data = struct.pack("!I", len(h)) + h + struct.pack("!Q", len(payload)) + payload
        with self._send_locks[dst]:
            self._socks[dst].sendall(data)

    def send(self, dst: int, tag: str, arr: np.ndarray, channel: str | None = None) -> None:
        """Send ``arr`` to rank ``dst`` under ``tag``; on a paced ``channel`` this waits until
        the channel's egress slot for it has passed (module docstring)."""
        a = np.ascontiguousarray(arr)
        header: dict[str, Any] = {"tag": tag, "dtype": a.dtype.str, "shape": list(a.shape)}
        if channel is not None:
            header["ch"] = channel
            pacer = self._egress.get(channel)
            if pacer is not None:
                end = pacer.reserve(a.nbytes, time.monotonic())
                time.sleep(max(0.0, end - time.monotonic()))
        self._frame(dst, header, a.tobytes())

    def send_ctl(self, dst: int, message: dict[str, Any]) -> None:
        self._frame(dst, {"ctl": message}, b"")

    def recv(self, src: int, tag: str, timeout: float | None = None) -> np.ndarray:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                now = time.monotonic()
                items = self._box.get((src, tag))
                if items and items[0][0] <= now:
                    _, arr = items.pop(0)
                    if not items:
                        del self._box[(src, tag)]
                    return arr
                if self._closed:
                    raise MeshClosed(f"mesh closed waiting for {tag} from {src}")
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    raise TimeoutError(f"rank {self.rank}: no {tag!r} from rank {src}")
                if items:  # arrived, still crossing its ingress slot
                    left = items[0][0] - now if left is None else min(left, items[0][0] - now)
                self._cv.wait(left)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        for s in self._socks.values():
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
