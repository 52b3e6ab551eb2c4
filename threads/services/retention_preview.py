"""The retention dry run of the Forget page (docs/dashboard.md, "The Forget page"), as a task:
reading every thread and checkpoint a run would delete takes as long as the workspace is large
(tens of seconds at ten thousand threads), longer than a page request may, so the page queues
it and shows its progress, then its report, as it does an erasure's."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from threads.access import require_role
from threads.models import Role, TaskRun, Workspace
from threads.services.enqueue import RETENTION_PREVIEW, task_run_enqueue
from threads.services.retention import RETENTION_PREVIEW_KIND, retention_apply

__all__ = ["RETENTION_PREVIEW_KIND", "retention_preview", "retention_preview_start"]


def retention_preview_start(*, workspace: Workspace, actor: Any) -> TaskRun:
    """Queue a dry run of the workspace's retention policy (admins); answers its task run.
    Nothing is deleted or audited: it only reads."""
    require_role(actor, workspace, Role.ADMIN)
    with transaction.atomic():
        return task_run_enqueue(
            workspace=workspace,
            kind=RETENTION_PREVIEW_KIND,
            task_name=RETENTION_PREVIEW,
            args=[workspace.pk],
        )


def retention_preview(*, workspace_id: int) -> dict[str, Any]:
    """What a retention run would delete now in the workspace, as the task's JSON result:
    `policy` False when the workspace has none; else the threads (`thread`, `external_id`,
    `last_seq`, `inactive_since`), the checkpoints (`deleted`, `kept_needed`, per thread
    `deleted` and `kept`) and the bytes a run would free (estimated)."""
    workspace = Workspace.objects.get(pk=workspace_id)
    outcomes = retention_apply(workspace_name=workspace.name, dry_run=True)
    if not outcomes:
        return {"policy": False}
    outcome = outcomes[0]
    return {
        "policy": True,
        "threads": outcome.threads,
        "checkpoints": {
            "deleted": outcome.checkpoints.deleted,
            "kept_needed": outcome.checkpoints.kept_needed,
            "threads": outcome.checkpoints.threads,
        },
        "bytes": outcome.summary()["bytes"],
    }
