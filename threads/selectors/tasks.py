"""Task runs: the progress a long operation reports."""

from __future__ import annotations

from typing import Any

from threads.domain.errors import NotFound
from threads.models import (
    TaskRun,
    Thread,
    Workspace,
)
from threads.selectors.threads import member_workspace_ids


def task_run_get_for_member(*, user: Any, id: str) -> TaskRun:
    found = TaskRun.objects.filter(workspace_id__in=member_workspace_ids(user), pk=id).first()
    if found is None:
        raise NotFound("task not found")
    return found


def task_runs_in_flight(*, thread: Thread, kind: str) -> TaskRun | None:
    """The newest run of this kind on the thread, if it has not finished."""
    return (
        TaskRun.objects.filter(
            thread=thread, kind=kind, state__in=("PENDING", "STARTED", "PROGRESS")
        )
        .order_by("-created_at")
        .first()
    )


# --- Agent API reads (helper A) ------------------------------------------------------------------


def task_run_get_for_workspace(*, workspace: Workspace, id: str) -> TaskRun:
    found = TaskRun.objects.filter(workspace=workspace, pk=id).first()
    if found is None:
        raise NotFound("task not found")
    return found


# --- Integrity (helper C) ------------------------------------------------------------------------
