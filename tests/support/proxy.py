"""A TCP proxy on loopback that can freeze: every connection stays open and nothing moves
either way (what a client meets when the process behind a connection is frozen, its host died
without closing it, or the network drops everything), over real sockets."""

from __future__ import annotations

import contextlib
import socket
import threading


class FreezableProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream`` until :meth:`freeze`; :meth:`close` ends it."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self._moving = threading.Event()
        self._moving.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def freeze(self) -> None:
        """From now on hold every byte (and read no more), on every connection, old or new."""
        self._moving.clear()

    def close(self) -> None:
        self._closed.set()
        self._moving.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
                self.connections += 1
            for src, dst in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst), name="proxy-pump", daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                self._moving.wait()  # frozen: the bytes wait here, and nothing more is read
                if not data or self._closed.is_set():
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
