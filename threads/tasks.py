"""Celery tasks: thin. Ids in, one service call, out.

Every task is idempotent (its service re-reads state and may do nothing), `acks_late` with
`reject_on_worker_lost`, so a worker that dies mid-task hands the message to another one.
Services enqueue them by name through threads.services.enqueue, after commit; a task that has
a TaskRun records it through `tracked`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from threads.models import SummaryVersion, Thread
from threads.selectors import thread_integrity
from threads.services.folding import fold_run, recover_prepared
from threads.services.imports import import_run
from threads.services.integrity import integrity_check
from threads.services.side_effects import side_effect_status_check
from threads.services.tasks import task_run_progress, task_run_tracked

logger = logging.getLogger(__name__)


def tracked(body: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A bound task whose TaskRun (id = the Celery task id) follows it: started, success with
    the answer, or failure with the error. The body receives the task id first."""

    @functools.wraps(body)
    def run(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        task_id = self.request.id
        return task_run_tracked(task_id, lambda: body(task_id, *args, **kwargs))

    return run


@shared_task(
    name="ctxadmin.verify_thread",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=900,
    time_limit=960,
)
@tracked
def verify_thread_task(task_id: str | None, thread_id: str) -> dict[str, Any]:
    """Recompute a thread's whole chain from genesis (the dashboard's and API's verify)."""
    thread = Thread.objects.select_related("workspace").get(pk=thread_id)
    integrity_check(
        thread=thread,
        full=True,
        progress=lambda done, total: task_run_progress(task_id, done=done, total=total),
    )
    thread.refresh_from_db()
    return thread_integrity(thread=thread)


@shared_task(
    name="ctxadmin.integrity_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=540,
    time_limit=600,
)
def integrity_sweep_task() -> dict[str, Any]:
    """Incremental chain check of every thread (beat, every 10 minutes).

    Each thread's check resumes where the last one stopped (verified_until), so a sweep cut
    short by its time limit loses nothing: the next sweep carries on.
    """
    checked, broken = 0, []
    thread_ids = list(Thread.objects.order_by("pk").values_list("pk", flat=True))
    try:
        for thread_id in thread_ids:
            try:
                thread = Thread.objects.select_related("workspace").get(pk=thread_id)
                verdict = integrity_check(thread=thread, full=False)
            except SoftTimeLimitExceeded:
                raise
            except Exception:
                # One unreadable thread must not stop the sweep of the others.
                logger.exception("integrity check of thread %s failed", thread_id)
                continue
            checked += 1
            if not verdict.ok:
                broken.append({"thread": str(thread_id), "first_bad_seq": verdict.first_bad_seq})
    except SoftTimeLimitExceeded:
        logger.warning("integrity sweep stopped by its time limit after %d threads", checked)
    return {"checked": checked, "broken": broken}


def _fold_answer(version: SummaryVersion | None) -> dict[str, Any]:
    if version is None:
        return {"folded": False, "reason": "nothing new to fold"}
    return {
        "folded": version.phase == "committed",
        "version": version.version,
        "phase": version.phase,
        "covered_until": version.covered_until,
    }


@shared_task(
    name="ctxadmin.fold_thread",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=300,
    time_limit=360,
)
@tracked
def fold_thread_task(
    task_id: str | None, thread_id: str, trigger: dict[str, Any]
) -> dict[str, Any]:
    """Fold a thread: prepare → verify → commit by CAS (threads.services.folding.fold_run).

    Redelivered after a worker died, it finishes the candidate it had prepared (same task id)
    or folds afresh; the head's compare-and-swap makes a second commit impossible.
    """
    return _fold_answer(fold_run(thread_id=thread_id, trigger=trigger, task_id=task_id))


@shared_task(
    name="ctxadmin.recover_prepared",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
)
def recover_prepared_task() -> dict[str, Any]:
    """Beat, every minute: decide prepared versions whose worker died (docs/design.md §5.6)."""
    decided = recover_prepared(older_than=settings.CTXADMIN_PREPARED_TIMEOUT)
    return {
        "decided": [
            {"thread": str(v.thread_id), "version": v.version, "phase": v.phase} for v in decided
        ]
    }


@shared_task(
    name="ctxadmin.side_effect_status_check",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=30,
    time_limit=60,
)
@tracked
def side_effect_status_check_task(task_id: str | None, side_effect_id: int) -> dict[str, Any]:
    """Ask a tool's own system whether a side effect happened; record a conclusive answer.

    Idempotent: a redelivered task finds the side effect resolved and leaves it alone.
    """
    return side_effect_status_check(side_effect_id=side_effect_id)


@shared_task(
    name="ctxadmin.import_trace",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    # Below the Redis broker's default visibility timeout (an hour), past which a running task
    # would be delivered a second time.
    soft_time_limit=1800,
    time_limit=1860,
)
@tracked
def import_trace_task(task_id: str | None, import_id: str) -> dict[str, Any]:
    """Import an uploaded file of conversations (threads.services.imports.import_run); the
    task run's progress counts conversations.

    Redelivered after a worker died, it resumes after the last conversation it recorded; the
    `import-<index>` client_event_ids make nothing be appended twice.
    """
    return import_run(
        import_id=import_id,
        progress=lambda done, total: task_run_progress(task_id, done=done, total=total),
    )
