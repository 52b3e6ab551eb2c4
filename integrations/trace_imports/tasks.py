"""The import task: thin, like the core's (threads.tasks), and tracked by the same TaskRun."""

from __future__ import annotations

from typing import Any

from integrations.trace_imports.services.uploads import IMPORT_TRACE, import_run
from threads.services.tasks import task_run_progress
from threads.tasks import tracked_task


# Below the Redis broker's default visibility timeout (an hour), past which a running task
# would be delivered a second time.
@tracked_task(IMPORT_TRACE, soft_time_limit=1800, time_limit=1860)
def import_trace_task(task_id: str | None, import_id: str) -> dict[str, Any]:
    """Import an uploaded file of conversations
    (integrations.trace_imports.services.uploads.import_run); the
    task run's progress counts conversations. Routed to the `imports` queue
    (CELERY_TASK_ROUTES), so it never holds a worker that folds.

    Redelivered after a worker died, it resumes after the last conversation it recorded; the
    `import-<index>` client_event_ids make nothing be appended twice.
    """
    return import_run(
        import_id=import_id,
        progress=lambda done, total: task_run_progress(task_id, done=done, total=total),
    )
