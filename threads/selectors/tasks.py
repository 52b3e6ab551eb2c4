"""Task runs: the progress a long operation reports."""

from __future__ import annotations

from typing import Any

from threads.domain.errors import NotFound
from threads.domain.external_ids import text_storable
from threads.models import (
    TaskRun,
    Thread,
)


def task_run_get_in(*, workspace_ids: Any, id: str) -> TaskRun:
    """A task run of the given workspaces (an agent's one, or a person's)."""
    if not text_storable(id):
        raise NotFound("task not found")
    found = TaskRun.objects.filter(workspace_id__in=workspace_ids, pk=id).first()
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
