"""Context request rows are kept CTXADMIN_CONTEXT_LOG_DAYS days (docs/operations.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

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
