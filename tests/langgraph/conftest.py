"""A live ctxadmin server for the LangGraph checkpointer's tests (as tests/client does): pytest-
django's live_server over a transactional database, a workspace key, and savers over it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ctxadmin_client.langgraph import CtxadminSaver

from tests import factories


@dataclass
class Server:
    url: str
    api_key: str
    workspace: Any


@pytest.fixture
def server(live_server: Any, transactional_db: None) -> Server:
    workspace, key = factories.make_workspace("acme")
    return Server(url=live_server.url, api_key=key, workspace=workspace)


@pytest.fixture
def saver(server: Server) -> Iterator[CtxadminSaver]:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    yield saver
    saver.close()
