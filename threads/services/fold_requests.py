"""Requests for a fold (threads.services.folding): at most one in flight per thread, under the
thread's row lock; a request whose worker died is replaced; a pinned thread folds nothing.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from threads.domain.errors import Conflict
from threads.models import TaskRun, TaskState, Thread
from threads.services.audit import audit_record
from threads.services.enqueue import FOLD_THREAD, task_run_enqueue
from threads.services.tasks import task_run_finish

TRIGGER_KINDS = ("capacity", "structural", "risk", "manual", "rollback", "redaction")
OPEN_STATES = (TaskState.PENDING, TaskState.STARTED, TaskState.PROGRESS)
SUPERSEDED = "not finished within CTXADMIN_PREPARED_TIMEOUT; a new fold took over"


class ThreadPinned(Conflict):
    """The thread is pinned (docs/repairs.md, "Rollback"): no fold starts until the pin is
    released."""

    code = "thread_pinned"


def pinned_problem(thread: Thread) -> ThreadPinned:
    when = thread.pinned_at.isoformat() if thread.pinned_at else "?"
    return ThreadPinned(
        f"folds of this thread are paused: pinned by {thread.pinned_by or 'someone'} at "
        f"{when} ({thread.pin_reason}); release the pin to fold again",
        fields={"pinned_by": thread.pinned_by, "pinned_at": when},
    )


def _now() -> Any:
    return timezone.now()


# --- requests: at most one fold in flight per thread -------------------------------------------


def fold_in_flight(thread: Thread, *, now: Any = None) -> bool:
    """A fold was requested recently enough that its worker is presumed alive."""
    return bool(
        thread.fold_task_id
        and thread.fold_requested_at is not None
        and (now or _now()) - thread.fold_requested_at < settings.CTXADMIN_PREPARED_TIMEOUT
    )


def fold_request(*, thread: Thread, trigger: dict[str, Any], actor: Any = None) -> TaskRun:
    """Ask for a fold of `thread`; the Celery task is sent after commit.

    At most one fold is in flight per thread: under the thread's row lock, a queued or running
    fold (thread.fold_task_id) answers for this request too, unless it is older than
    CTXADMIN_PREPARED_TIMEOUT (its worker died, or the broker lost its message), in which case
    it is replaced and its run ends, superseded by the new one. Not durable on
    purpose: services that fold after their own change (a rollback) call it inside their
    transaction, and the task is still sent only once that commits. A pinned thread folds
    nothing: ThreadPinned, and nothing is requested.
    """
    if trigger.get("kind") not in TRIGGER_KINDS:
        raise ValueError(f"unknown trigger kind {trigger.get('kind')!r}")
    now = _now()
    with transaction.atomic():
        # The thread's row alone: FOR UPDATE of the join would lock its workspace's row too,
        # and every other fold request, new thread and audit entry of the workspace would wait
        # for this one (16 agents' first folds queued 14 ms each on it, bench/ingest.py).
        locked = (
            Thread.objects.select_for_update(of=("self",))
            .select_related("workspace")
            .get(pk=thread.pk)
        )
        if locked.pinned_at is not None:
            raise pinned_problem(locked)
        if locked.fold_task_id:
            fresh = fold_in_flight(locked, now=now)
            existing = TaskRun.objects.filter(pk=locked.fold_task_id).first()
            if fresh and existing is not None and existing.state in OPEN_STATES:
                return existing
        else:
            existing = None
        run = task_run_enqueue(
            workspace=locked.workspace,
            thread=locked,
            kind="fold",
            task_name=FOLD_THREAD,
            args=(str(locked.pk), trigger),
        )
        if existing is not None and existing.state in OPEN_STATES:
            # Nobody will finish it: a client waiting on its id learns who took over.
            task_run_finish(
                existing.pk,
                ok=True,
                result={"folded": False, "superseded_by": run.id, "reason": SUPERSEDED},
            )
        Thread.objects.filter(pk=locked.pk).update(fold_task_id=run.id, fold_requested_at=now)
        thread.fold_task_id, thread.fold_requested_at = run.id, now
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="fold_requested",
            target_type="thread",
            target_id=locked.pk,
            thread=locked,
            after={"task_id": run.id, "trigger": trigger},
            actor_label=getattr(actor, "label", "") if actor is not None else "fold trigger",
        )
    return run


def thread_pinned(thread_id: Any) -> bool:
    """The thread is pinned now (docs/repairs.md, "Rollback"): its folds are paused."""
    return Thread.objects.filter(pk=thread_id, pinned_at__isnull=False).exists()


def _fold_request_done(thread_id: Any, task_id: str | None) -> None:
    """Clear the in-flight marker, but only our own: a newer request may have replaced it."""
    if task_id:
        Thread.objects.filter(pk=thread_id, fold_task_id=task_id).update(
            fold_task_id="", fold_requested_at=None
        )
