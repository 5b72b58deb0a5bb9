"""A full mesh of TCP connections between a job's local rank processes, carrying tensors
(NumPy arrays) point to point by tag (the transport the enforcer's motifs run on; spec §6.5,
plain sockets instead of gloo).

Rank i listens on ``ports[i]``, connects to every lower rank and accepts every higher one. Each
peer connection has one receiver thread that files every frame in a mailbox keyed by
(source, tag), so a send never waits for the peer to post its receive (no send/receive
deadlock). Control frames (``ctl``) go to a callback instead of the mailbox.

Frame: 4-byte header length, JSON header (tag, dtype, shape, or ctl), 8-byte payload length,
payload bytes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

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
    ) -> None:
        self.rank, self.n = rank, len(ports)
        self.on_ctl = on_ctl
        self._socks: dict[int, socket.socket] = {}
        self._send_locks: dict[int, threading.Lock] = {}
        self._box: dict[tuple[int, str], list[np.ndarray]] = {}
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
                with self._cv:
                    self._box.setdefault((peer, header["tag"]), []).append(arr.copy())
                    self._cv.notify_all()
        except (ConnectionError, OSError, ValueError):
            return

    def _frame(self, dst: int, header: dict[str, Any], payload: bytes) -> None:
        h = json.dumps(header).encode()
        data = struct.pack("!I", len(h)) + h + struct.pack("!Q", len(payload)) + payload
        with self._send_locks[dst]:
            self._socks[dst].sendall(data)

    def send(self, dst: int, tag: str, arr: np.ndarray) -> None:
        a = np.ascontiguousarray(arr)
        self._frame(dst, {"tag": tag, "dtype": a.dtype.str, "shape": list(a.shape)}, a.tobytes())

    def send_ctl(self, dst: int, message: dict[str, Any]) -> None:
        self._frame(dst, {"ctl": message}, b"")

    def recv(self, src: int, tag: str, timeout: float | None = None) -> np.ndarray:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                items = self._box.get((src, tag))
                if items:
                    arr = items.pop(0)
                    if not items:
                        del self._box[(src, tag)]
                    return arr
                if self._closed:
                    raise MeshClosed(f"mesh closed waiting for {tag} from {src}")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"rank {self.rank}: no {tag!r} from rank {src}")
                self._cv.wait(left)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        for s in self._socks.values():
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
