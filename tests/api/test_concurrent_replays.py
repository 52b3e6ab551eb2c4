"""PostgreSQL write path: agents retrying the same batch at the same moment (real connections)
get one write and replays, never a 500 from the unique constraint; a failing pipelined insert
raises Django's IntegrityError."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories
from threads.models import Event
from threads.services.event_rows import insert_events_and_head

pytestmark = pytest.mark.postgres

WRITERS = 4


@pytest.mark.django_db(transaction=True)
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


@pytest.mark.django_db
def test_a_failing_pipelined_insert_raises_django_integrity_error(thread: Any) -> None:
    # The PostgreSQL write path sends rows and head in one pipeline: a failure must still
    # surface as Django's IntegrityError and roll everything back.
    if connection.vendor != "postgresql":
        pytest.skip("the pipelined write path is PostgreSQL's (DATABASE_URL=postgres://...)")
    factories.append(thread, factories.user("first"))
    clash = Event(
        thread=thread,
        seq=1,
        kind="message",
        created_at=timezone.now(),
        metadata={},
        data={"role": "user", "content": "again"},
        hash="0" * 64,
    )
    thread.refresh_from_db()
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_events_and_head(thread, [clash], timezone.now())
    assert Event.objects.filter(thread=thread).count() == 1
    thread.refresh_from_db()
    assert thread.last_seq == 1
