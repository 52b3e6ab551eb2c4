"""Task runs: what `GET /api/v1/tasks/{id}/` and the dashboard's progress bars read.

A run is created with the request's transaction and its Celery task is sent only after commit,
so a worker never looks for a run (or a thread) that is not there yet (services enqueue through
threads.services.enqueue). `task_run_tracked` is the one place a run's state moves while its
task works: started, progress, success or failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.database.unavailable import database_unavailable
from threads.models import TaskRun, TaskState, Thread, Workspace


def task_run_start(
    *, workspace: Workspace, kind: str, send: Callable[[str], Any], thread: Thread | None = None
) -> TaskRun:
    """Record a run and call `send(run.id)` after commit; services use
    threads.services.enqueue.task_run_enqueue, which sends a task by its name."""
    run = TaskRun.objects.create(
        id=str(uuid.uuid4()), workspace=workspace, thread=thread, kind=kind
    )
    transaction.on_commit(lambda: send(run.id))
    return run


def task_run_tracked(task_id: str | None, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` as task run `task_id`: started, then success with its answer (failure when
    the answer carries an "error"), or failure with the exception, which is re-raised. A
    database that refuses writes is re-raised without a verdict: the task retries later
    (threads.tasks)."""
    task_run_started(task_id)
    try:
        answer = work()
    except Exception as exc:
        if not database_unavailable(exc):
            task_run_finish(task_id, result={"error": f"{type(exc).__name__}: {exc}"}, ok=False)
        raise
    task_run_finish(task_id, result=answer, ok="error" not in answer)
    return answer


def task_run_progress(task_id: str | None, *, done: int, total: int) -> None:
    if task_id:
        TaskRun.objects.filter(pk=task_id).update(
            state=TaskState.PROGRESS, done=done, total=total, updated_at=timezone.now()
        )


def task_run_started(task_id: str | None) -> None:
    if task_id:
        TaskRun.objects.filter(pk=task_id).update(
            state=TaskState.STARTED, updated_at=timezone.now()
        )


def task_run_finish(task_id: str | None, *, result: Any, ok: bool = True) -> None:
    if task_id:
        TaskRun.objects.filter(pk=task_id).update(
            state=TaskState.SUCCESS if ok else TaskState.FAILURE,
            result=result,
            updated_at=timezone.now(),
        )
