"""A task run's `updated_at` moves with its state (docs/api.md,
"Tasks — `GET /api/v1/tasks/{task_id}/`"): started, each progress report and the finish, so a reader
can tell a run that is working from one that is stuck."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from threads.models import TaskRun
from threads.services.tasks import task_run_finish, task_run_progress, task_run_started

pytestmark = pytest.mark.django_db


def test_updated_at_moves_with_each_report(workspace: Any) -> None:
    run = TaskRun.objects.create(id="t-1", workspace=workspace, kind="fold")
    long_ago = timezone.now() - timedelta(hours=1)
    steps = [
        lambda: task_run_started(run.id),
        lambda: task_run_progress(run.id, done=1, total=2),
        lambda: task_run_finish(run.id, result={"ok": True}),
    ]
    for step in steps:
        TaskRun.objects.filter(pk=run.id).update(updated_at=long_ago)
        step()
        run.refresh_from_db()
        assert run.updated_at > long_ago + timedelta(minutes=59), run.state
    assert run.state == "SUCCESS"
