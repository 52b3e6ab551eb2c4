"""A loopback HTTP server that answers from a script, for the request driver's tests: each
request takes the next action (the last one repeats), so it can fail N times, then answer."""

from __future__ import annotations

import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def answer_json(status: int, value: Any, **headers: str) -> Answer:
    return Answer(
        status, json.dumps(value).encode(), {"Content-Type": "application/json", **headers}
    )


def error(status: int, code: str, **headers: str) -> Answer:
    body = {"error": {"code": code, "message": f"{code} happened", "fields": {"x": "y"}}}
    return answer_json(status, body, **headers)


@dataclass(frozen=True)
class Reset:
    """Close the connection at once, with a TCP reset, and answer nothing."""


@dataclass(frozen=True)
class Stall:
    """Answer `then` only after `seconds` (longer than the client waits)."""

    seconds: float
    then: Answer


Action = Answer | Reset | Stall


class Loopback:
    """The server; `requests` is every (method, path) it was sent, in order."""

    def __init__(self, *actions: Action) -> None:
        self.actions = list(actions)
        self.requests: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass  # the connection reset on purpose, or a client that stopped waiting

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                action = owner.next_action(self.command, self.path)
                if isinstance(action, Reset):
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                    return
                if isinstance(action, Stall):
                    owner.stopping.wait(action.seconds)
                    action = action.then
                try:
                    self.send_response(action.status)
                    for name, value in action.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(action.body)))
                    self.end_headers()
                    self.wfile.write(action.body)
                except OSError:
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def next_action(self, method: str, path: str) -> Action:
        with self._lock:
            self.requests.append((method, path))
            return self.actions.pop(0) if len(self.actions) > 1 else self.actions[0]

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
