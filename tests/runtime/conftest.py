"""Fixtures for the runtime tests: eager tasks, the real worker, and tampering with the log."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from ctxadmin.celery import app as celery_app
from threads.models import TaskRun, TaskState


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Run tasks in-process, as the SQLite run of ./scripts/test does for every test."""
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


@pytest.fixture
def real_worker() -> Iterator[None]:
    """Send tasks through the broker to the worker ./scripts/test starts for the PostgreSQL run
    (it exports CTXADMIN_TEST_WORKER=1 and CELERY_BROKER_URL pointing at its Redis)."""
    if connection.vendor != "postgresql":
        pytest.skip("the worker runs on the PostgreSQL run (DATABASE_URL=postgres://...)")
    if os.environ.get("CTXADMIN_TEST_WORKER") != "1":
        pytest.skip("no Celery worker: ./scripts/test starts one and sets CTXADMIN_TEST_WORKER=1")
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = before


def wait_for_task(task_id: str, *, timeout: float = 90.0) -> TaskRun:
    """Poll a TaskRun row until the task has finished (SUCCESS or FAILURE)."""
    deadline = time.monotonic() + timeout
    while True:
        run = TaskRun.objects.get(pk=task_id)
        if run.state in (TaskState.SUCCESS, TaskState.FAILURE):
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} still {run.state} after {timeout}s")
        time.sleep(0.2)
