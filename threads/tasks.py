"""Celery tasks: thin. Ids in, one service call, out.

Every task is idempotent (its service re-reads state and may do nothing), `acks_late` with
`reject_on_worker_lost`, so a worker that dies mid-task hands the message to another one.
Services enqueue them by name through threads.services.enqueue, after commit; a task that has
a TaskRun records it through `tracked`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from threads.database.unavailable import (
    RETRY_AFTER,
    database_unavailable,
    database_unavailable_reset,
)
from threads.models import SummaryVersion, Thread
from threads.selectors import thread_integrity, threads_due_full_verify
from threads.services.chain_heads import chain_heads_publish, publication_summary
from threads.services.fold_recovery import recover_prepared
from threads.services.fold_requests import thread_pinned
from threads.services.folding import fold_run
from threads.services.integrity import integrity_check
from threads.services.metrics import context_log_prune
from threads.services.retention import retention_apply
from threads.services.retention_preview import retention_preview
from threads.services.side_effects import side_effect_status_check
from threads.services.subject_erasure import subject_erase
from threads.services.tasks import task_run_progress, task_run_tracked

logger = logging.getLogger(__name__)

# A task whose database refuses writes (locked, read-only) retries this many times, waiting
# RETRY_AFTER seconds doubled each time up to a minute: about ten minutes in all.
DATABASE_RETRIES = 12
DATABASE_RETRY_CAP = 60

# The integrity sweep: how often beat starts it, its soft time limit (seconds), and the share
# of that limit its walks from genesis may take.
SWEEP_INTERVAL = cast(timedelta, settings.CELERY_BEAT_SCHEDULE["integrity-sweep"]["schedule"])
SWEEP_SOFT_TIME_LIMIT = 540
FULL_VERIFY_SHARE = 0.5


def tracked(body: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A bound task whose TaskRun (id = the Celery task id) follows it: started, success with
    the answer, or failure with the error. The body receives the task id first.

    A database that refuses writes is no failure of the task: it is retried later with the same
    id (so a fold finishes the candidate it prepared), and its run stays started meanwhile."""

    @functools.wraps(body)
    def run(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        task_id = self.request.id
        try:
            return task_run_tracked(task_id, lambda: body(task_id, *args, **kwargs))
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            database_unavailable_reset(exc)
            retries = int(self.request.retries or 0)
            logger.warning("task %s: the database refuses writes (%s); retrying", task_id, exc)
            raise self.retry(
                exc=exc,
                countdown=min(RETRY_AFTER * 2**retries, DATABASE_RETRY_CAP),
                max_retries=DATABASE_RETRIES,
            ) from exc

    return run


def tracked_task(
    name: str, *, soft_time_limit: int, time_limit: int
) -> Callable[[Callable[..., dict[str, Any]]], Any]:
    """A bound Celery task, `acks_late` with `reject_on_worker_lost` (see the module's
    docstring), whose TaskRun follows it (`tracked`)."""

    def task(body: Callable[..., dict[str, Any]]) -> Any:
        return shared_task(
            name=name,
            bind=True,
            acks_late=True,
            reject_on_worker_lost=True,
            soft_time_limit=soft_time_limit,
            time_limit=time_limit,
        )(tracked(body))

    return task


@tracked_task("ctxadmin.verify_thread", soft_time_limit=900, time_limit=960)
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


@tracked_task("ctxadmin.subject_erasure", soft_time_limit=3600, time_limit=3660)
def subject_erasure_task(
    task_id: str | None, workspace_id: int, actor_id: int, value: str, reason: str, dry_run: bool
) -> dict[str, Any]:
    """Erase a value from every event of a workspace that mentions it (docs/repairs.md,
    "Erasure by subject"). Run again after a crash it finds only what is left."""
    return subject_erase(
        workspace_id=workspace_id,
        actor_id=actor_id,
        value=value,
        reason=reason,
        dry_run=dry_run,
        progress=lambda done, total: task_run_progress(task_id, done=done, total=total),
    )


@tracked_task("ctxadmin.retention_preview", soft_time_limit=1500, time_limit=1800)
def retention_preview_task(task_id: str | None, workspace_id: int) -> dict[str, Any]:
    """A dry run of a workspace's retention policy, for the Forget page: reads only."""
    return retention_preview(workspace_id=workspace_id)


@shared_task(
    name="ctxadmin.integrity_sweep",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=SWEEP_SOFT_TIME_LIMIT,
    time_limit=600,
)
def integrity_sweep_task() -> dict[str, Any]:
    """Chain check of every thread (beat, every SWEEP_INTERVAL).

    Most checks are incremental: they resume where the last one stopped (verified_until), so
    a sweep cut short by its time limit loses nothing. An incremental check never re-reads an
    event it verified once, so each sweep also walks a bounded share of the threads from
    genesis, the longest unverified first (threads_due_full_verify): over
    CTXADMIN_FULL_VERIFY_PERIOD every thread gets one, and an in-place edit of a verified
    event is caught. Those walks go first and stop at FULL_VERIFY_SHARE of the time limit;
    the threads left over are checked incrementally and stay due for the next sweep.
    """
    checked, broken = 0, []
    full_ids = threads_due_full_verify(
        now=timezone.now(), period=settings.CTXADMIN_FULL_VERIFY_PERIOD, interval=SWEEP_INTERVAL
    )
    full_until = time.monotonic() + FULL_VERIFY_SHARE * SWEEP_SOFT_TIME_LIMIT
    chosen = set(full_ids)
    rest = Thread.objects.order_by("pk").values_list("pk", flat=True)
    thread_ids = [*full_ids, *(pk for pk in rest if pk not in chosen)]
    try:
        for thread_id in thread_ids:
            full = thread_id in chosen and time.monotonic() < full_until
            try:
                thread = Thread.objects.select_related("workspace").get(pk=thread_id)
                verdict = integrity_check(thread=thread, full=full)
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


@shared_task(
    name="ctxadmin.publish_chain_heads",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=540,
    time_limit=600,
)
def publish_chain_heads_task() -> dict[str, Any]:
    """Beat, every CTXADMIN_HEADS_PERIOD: append a signed head for each thread whose head
    moved (threads.services.chain_heads). Idempotent: a head already published is skipped."""
    return publication_summary(chain_heads_publish())


def _fold_answer(version: SummaryVersion | None, *, pinned: bool = False) -> dict[str, Any]:
    if version is None:
        return {
            "folded": False,
            "reason": "the thread is pinned" if pinned else "nothing new to fold",
        }
    return {
        "folded": version.phase == "committed",
        "version": version.version,
        "phase": version.phase,
        "covered_until": version.covered_until,
    }


@tracked_task("ctxadmin.fold_thread", soft_time_limit=300, time_limit=360)
def fold_thread_task(
    task_id: str | None, thread_id: str, trigger: dict[str, Any]
) -> dict[str, Any]:
    """Fold a thread: prepare → verify → commit by CAS (threads.services.folding.fold_run).

    Redelivered after a worker died, it finishes the candidate it had prepared (same task id)
    or folds afresh; the head's compare-and-swap makes a second commit impossible.
    """
    try:
        version = fold_run(thread_id=thread_id, trigger=trigger, task_id=task_id)
    except Thread.DoesNotExist:
        # Deleted since the fold was asked for (retention, or a database restored without
        # it): nothing to fold, and no error to retry.
        logger.info("fold of thread %s: the thread no longer exists", thread_id)
        return {"folded": False, "reason": "the thread no longer exists"}
    return _fold_answer(version, pinned=version is None and thread_pinned(thread_id))


@shared_task(
    name="ctxadmin.recover_prepared",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
)
def recover_prepared_task() -> dict[str, Any]:
    """Beat, every minute: decide prepared versions whose worker died (docs/pipeline.md,
    "Recovery")."""
    decided = recover_prepared(older_than=settings.CTXADMIN_PREPARED_TIMEOUT)
    return {
        "decided": [
            {"thread": str(v.thread_id), "version": v.version, "phase": v.phase} for v in decided
        ]
    }


@tracked_task("ctxadmin.side_effect_status_check", soft_time_limit=30, time_limit=60)
def side_effect_status_check_task(task_id: str | None, side_effect_id: int) -> dict[str, Any]:
    """Ask a tool's own system whether a side effect happened; record a conclusive answer.

    Idempotent: a redelivered task finds the side effect resolved and leaves it alone.
    """
    return side_effect_status_check(side_effect_id=side_effect_id)


@shared_task(
    name="ctxadmin.prune_context_log",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=240,
    time_limit=300,
)
def prune_context_log_task() -> dict[str, Any]:
    """Beat, hourly: drop context request samples past CTXADMIN_CONTEXT_LOG_DAYS."""
    return {"deleted": context_log_prune()}


@shared_task(
    name="ctxadmin.apply_retention",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=1500,
    time_limit=1800,
)
def apply_retention_task() -> list[dict[str, Any]]:
    """Beat, hourly: apply every workspace's retention policy (docs/operations.md,
    "Retention"). Batches commit one by one, so a run cut short by its time limit keeps what
    it deleted and the next one goes on."""
    outcomes = retention_apply(batch_size=settings.CTXADMIN_RETENTION_BATCH)
    return [outcome.summary() for outcome in outcomes]
