"""A task that no worker takes: the progress region says so and stops polling, instead of
polling forever (a web process started without a Celery worker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from threads.models import TaskRun, Thread

pytestmark = pytest.mark.django_db

MESSAGE = "No worker has picked this task up yet — is a Celery worker running?"


def _fold_run(operator: Client, story: Thread, *, state: str, age: timedelta) -> TaskRun:
    operator.post(f"/threads/{story.pk}/fold/")
    run = TaskRun.objects.get(kind="fold")
    TaskRun.objects.filter(pk=run.pk).update(state=state, created_at=timezone.now() - age)
    return run


def test_a_pending_task_past_the_threshold_says_no_worker_and_stops_polling(
    operator: Client, story: Thread, settings: object
) -> None:
    settings.CTXADMIN_TASK_PICKUP_WARNING = 30  # type: ignore[attr-defined]
    run = _fold_run(operator, story, state="PENDING", age=timedelta(seconds=31))
    body = operator.get(f"/tasks/{run.id}/progress/").content.decode()
    assert MESSAGE in body
    assert 'hx-trigger="every' not in body
    assert "Check again" in body


@pytest.mark.parametrize(
    ("state", "age"),
    [("PENDING", timedelta(seconds=5)), ("STARTED", timedelta(minutes=10))],
    ids=["pending-young", "started-old"],
)
def test_a_young_or_taken_task_keeps_polling(
    operator: Client, story: Thread, state: str, age: timedelta
) -> None:
    run = _fold_run(operator, story, state=state, age=age)
    body = operator.get(f"/tasks/{run.id}/progress/").content.decode()
    assert MESSAGE not in body
    assert 'hx-trigger="every 1s"' in body
