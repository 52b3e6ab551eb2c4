"""The one seam through which services enqueue Celery tasks: by their stable names, after commit.

Services never import `threads.tasks` (tasks import services). A task is looked up in the
Celery app's registry by name rather than sent with `app.send_task`, because `send_task`
ignores `task_always_eager`: through the registry, eager runs (CTXADMIN_TASKS_EAGER) execute
in-process and a real worker receives the same message it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from celery import current_app
from celery.app.task import Task

from threads.models import TaskRun, Thread, Workspace
from threads.services.tasks import task_run_start

FOLD_THREAD = "ctxadmin.fold_thread"
VERIFY_THREAD = "ctxadmin.verify_thread"
SIDE_EFFECT_STATUS_CHECK = "ctxadmin.side_effect_status_check"
SUBJECT_ERASURE = "ctxadmin.subject_erasure"
RETENTION_PREVIEW = "ctxadmin.retention_preview"


_discovery = threading.Lock()


def _task(name: str) -> Task:
    app = current_app
    if name not in app.tasks:
        # The web process has not imported the task modules yet: autodiscovery registers them.
        # One thread at a time: in a threaded web worker, a thread that came second found the
        # registry still without the task while the first was importing it (NotRegistered).
        with _discovery:
            if name not in app.tasks:
                app.loader.import_default_modules()
    return app.tasks[name]


def task_send(name: str, args: Sequence[Any], *, task_id: str) -> None:
    """Send the task registered as `name` now (callers do so from an on_commit callback)."""
    _task(name).apply_async(tuple(args), task_id=task_id)


def task_run_enqueue(
    *,
    workspace: Workspace,
    kind: str,
    task_name: str,
    args: Sequence[Any],
    thread: Thread | None = None,
) -> TaskRun:
    """Start a task run of `kind` (for `thread`) and send task `task_name` with `args` once
    the caller's transaction commits; the run's id is the Celery task id."""
    args = tuple(args)
    return task_run_start(
        workspace=workspace,
        thread=thread,
        kind=kind,
        send=lambda task_id: task_send(task_name, args, task_id=task_id),
    )
