"""A live ctxadmin server for the LangGraph checkpointer's tests (as tests/client does): pytest-
django's live_server over a transactional database, a workspace key, and savers over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ctxadmin_client.langgraph import CtxadminSaver

from tests.live_server import Server, server

__all__ = ["Server", "server"]


@pytest.fixture
def saver(server: Server) -> Iterator[CtxadminSaver]:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    yield saver
    saver.close()
