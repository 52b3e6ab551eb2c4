"""A real ctxadmin server for tests that talk to it over HTTP (the Python client, the LangGraph
checkpointer): pytest-django's live_server (a threaded HTTP server in this process) over a
transactional database, and a workspace API key for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

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
