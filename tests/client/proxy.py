"""A loopback HTTP/1.1 proxy that loses answers after the server has committed them.

Each request from the client is forwarded to the upstream server on a connection of its own
(`Connection: close`), and the whole answer is read back first, so by the time the proxy decides
anything, the server has done the work and committed. Then, for a seeded random fraction of
answers, the proxy closes the client's connection instead of forwarding: half the time before a
single byte, half the time after part of the answer. The client sees a dropped answer
(httpx.RemoteProtocolError or ReadError) and must retry without duplicating anything.
"""

from __future__ import annotations

import random
import socket
import threading
from dataclasses import dataclass, field

MAX_HEADER = 64 * 1024


def _read_until(sock: socket.socket, buffer: bytearray, marker: bytes) -> int:
    """Read into `buffer` until it holds `marker`; its end offset, or -1 at EOF."""
    while True:
        at = buffer.find(marker)
        if at >= 0:
            return at + len(marker)
        if len(buffer) > MAX_HEADER:
            raise ValueError("header too large")
        chunk = sock.recv(65536)
        if not chunk:
            return -1
        buffer.extend(chunk)


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _with_connection_close(head: bytes) -> bytes:
    lines = [
        line
        for line in head.rstrip(b"\r\n").split(b"\r\n")
        if not line.lower().startswith(b"connection:")
    ]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


@dataclass
class DroppingProxy:
    upstream_host: str
    upstream_port: int
    drop_rate: float
    seed: int
    forwarded: int = 0
    dropped: int = 0
    dropped_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)  # so that close() need not wait for one more client
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._stopped = False
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stopped = True
        self._accepting.join(timeout=5)
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buffer = bytearray()
        with conn:
            while True:
                end = _read_until(conn, buffer, b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(buffer[:end])
                del buffer[:end]
                length = _content_length(head)
                while len(buffer) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer.extend(chunk)
                body = bytes(buffer[:length])
                del buffer[:length]
                answer = self._forward(_with_connection_close(head) + body)
                with self._lock:
                    drop = self._rng.random() < self.drop_rate
                    cut = self._rng.random() < 0.5
                    if drop:
                        self.dropped += 1
                        self.dropped_paths.append(head.split(b" ", 2)[1].decode())
                    else:
                        self.forwarded += 1
                if drop:
                    if cut:
                        # Part of the answer: the status line and some headers, then nothing.
                        conn.sendall(answer[: max(1, len(answer) // 2)])
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                conn.sendall(answer)
                if b"\r\nconnection: close" in answer.split(b"\r\n\r\n", 1)[0].lower():
                    return

    def _forward(self, request: bytes) -> bytes:
        with socket.create_connection((self.upstream_host, self.upstream_port), timeout=60) as up:
            up.sendall(request)
            chunks = []
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        return b"".join(chunks)
