"""Agents retrying the same batch at the same moment (PostgreSQL, real connections): one write,
every other answer a replay, never a 500 from the unique constraint."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from tests import factories
from threads.models import Event

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 4


def test_racing_retries_write_once(workspace_and_key: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are exercised on the PostgreSQL run (DATABASE_URL=postgres://...)")
    workspace, key = workspace_and_key
    thread = factories.make_thread(workspace, external_id="race")
    body = json.dumps(
        {
            "events": [
                {**factories.user(f"retry {i}"), "client_event_id": f"r-{i}"} for i in range(50)
            ]
        }
    )
    barrier = threading.Barrier(WRITERS)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def post() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        try:
            barrier.wait()
            response = client.post(
                f"/api/v1/threads/{thread.id}/events/", data=body, content_type="application/json"
            )
            statuses.append(response.status_code)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    pool = [threading.Thread(target=post) for _ in range(WRITERS)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(statuses) == [200] * (WRITERS - 1) + [201]
    assert Event.objects.filter(thread=thread).count() == 50
    thread.refresh_from_db()
    assert thread.last_seq == 50
