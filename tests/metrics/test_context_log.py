"""Context request rows: kept CTXADMIN_CONTEXT_LOG_DAYS days (docs/operations.md), committed
without waiting for the disk."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import ContextRequestLog, Thread
from threads.tasks import prune_context_log_task

pytestmark = pytest.mark.django_db


def test_the_hourly_prune_drops_rows_past_the_kept_days(thread: Thread, settings: Any) -> None:
    settings.CTXADMIN_CONTEXT_LOG_DAYS = 7
    now = timezone.now()
    for age in (timedelta(days=8), timedelta(days=7, minutes=1), timedelta(days=6), timedelta(0)):
        ContextRequestLog.objects.create(
            workspace_id=thread.workspace_id, thread=thread, at=now - age, latency_ms=1.0
        )
    assert prune_context_log_task() == {"deleted": 2}
    assert ContextRequestLog.objects.count() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("outer", [False, True], ids=["own-transaction", "caller-s-transaction"])
def test_a_context_record_commits_without_waiting_for_the_disk(
    agent: APIClient, thread: Thread, outer: bool
) -> None:
    """PostgreSQL: the record's own transaction commits with `synchronous_commit = off`, and
    that transaction only; a caller's transaction is left as it is (docs/scale.md,
    "What one database holds")."""
    f.append(thread, f.user("where is my parcel?"), f.assistant("on its way"))

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return str(cursor.fetchone()[0])

    postgres = connection.vendor == "postgresql"
    before = setting() if postgres else ""
    with CaptureQueriesContext(connection) as seen:
        with transaction.atomic() if outer else nullcontext():
            response = agent.get(f"/api/v1/threads/{thread.pk}/context/")
    assert response.status_code == 200, response.content
    asked = [q["sql"] for q in seen.captured_queries if "synchronous_commit" in q["sql"]]
    assert asked == (["SET LOCAL synchronous_commit = off"] if postgres and not outer else [])
    assert ContextRequestLog.objects.filter(thread=thread).count() == 1
    if postgres:
        assert setting() == before  # the test cluster's own setting, whatever it is
