"""Helpers for the agent API tests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from threads.models import Event, Thread


def post_json(client: APIClient, url: str, body: Any) -> Any:
    """POST a body as raw JSON text (bypasses the test client's own encoding)."""
    return client.post(url, data=json.dumps(body), content_type="application/json")


def log_state(thread: Thread) -> tuple[int, int, str, list[tuple[int, str]]]:
    """Everything a failed request must leave untouched: last_seq, the row count, the chain
    head and every (seq, hash)."""
    thread.refresh_from_db()
    rows = list(Event.objects.filter(thread=thread).order_by("seq").values_list("seq", "hash"))
    return thread.last_seq, len(rows), thread.chain_head, rows


@pytest.fixture
def events_url(thread: Thread) -> str:
    return f"/api/v1/threads/{thread.id}/events/"
