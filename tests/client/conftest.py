"""A real ctxadmin server for the client's tests: pytest-django's live_server (a threaded HTTP
server in this process) over a transactional database, and a workspace API key for it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.live_server import Server, server

__all__ = ["Server", "server"]


class CountingTransport(httpx.HTTPTransport):
    """The real network transport, counting requests per (method, path)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return super().handle_request(request)


@pytest.fixture
def counting() -> Iterator[CountingTransport]:
    transport = CountingTransport()
    yield transport
    transport.close()


def no_sleep(seconds: float) -> None:
    """Retries in tests wait for nothing."""
