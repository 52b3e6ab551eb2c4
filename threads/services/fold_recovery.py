"""Recovery of the fold pipeline (threads.services.folding): the `prepared` candidates whose
worker died are decided, the in-flight markers whose fold never came are requested again, and
the runs their worker never ended are ended.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from threads.models import SummaryPhase, SummaryVersion, TaskRun, Thread
from threads.services.fold_requests import (
    OPEN_STATES,
    ThreadPinned,
    _fold_request_done,
    _now,
    fold_request,
)
from threads.services.folding import Outcome, _audit_discarded, summary_decide
from threads.services.metrics import PREPARED_RECOVERED, metric_add
from threads.services.tasks import task_run_finish

ORPHANED = "its worker died before recording the end"
RECOVERY_TRIGGER = {"kind": "manual", "reason": "recovery: a requested fold never finished"}


# --- recovery -----------------------------------------------------------------------------------


def recover_prepared(*, older_than: timedelta) -> list[SummaryVersion]:
    """Decide every `prepared` candidate older than `older_than` (its worker died).

    Re-verified and committed by CAS when the head is still the one it was built on and every
    check passes; discarded when the head moved; rejected when a check fails. A live worker
    that comes back later finds the row decided and stops (summary_commit claims the row).
    """
    cutoff = _now() - older_than
    decided: list[SummaryVersion] = []
    stale = SummaryVersion.objects.filter(
        phase=SummaryPhase.PREPARED, created_at__lt=cutoff
    ).order_by("thread_id", "version")
    for version in stale:
        head_version = Thread.objects.values_list("head_version", flat=True).get(
            pk=version.thread_id
        )
        if head_version != version.base_version:
            outcome = _discard(version, reason=f"the head moved to v{head_version}")
        else:
            outcome = summary_decide(version=version, actor_label="recovery")
        if outcome == Outcome.ALREADY_DECIDED:
            continue
        decided.append(version)
        metric_add([(PREPARED_RECOVERED, "", 1)], thread_id=version.thread_id)
        if version.task_id:
            task_run_finish(
                version.task_id,
                ok=outcome != Outcome.REJECTED,
                result={
                    "recovered": True,
                    "version": version.version,
                    "outcome": outcome,
                },
            )
            _fold_request_done(version.thread_id, version.task_id)
    # In-flight markers whose worker died before preparing anything, or whose message the
    # broker lost: the fold they stand for is still due, so it is requested again (which ends
    # the dead run as superseded); a marker whose run ended after all is only cleared.
    expired = _now() - settings.CTXADMIN_PREPARED_TIMEOUT
    markers = Thread.objects.filter(fold_requested_at__lt=expired).exclude(fold_task_id="")
    for thread in markers.select_related("workspace"):
        open_run = TaskRun.objects.filter(pk=thread.fold_task_id, state__in=OPEN_STATES)
        if thread.pinned_at is None and open_run.exists():
            try:
                fold_request(thread=thread, trigger=RECOVERY_TRIGGER)
                continue
            except ThreadPinned:
                pass  # pinned since it was read: the fold is not due until the release
        if open_run.exists():
            task_run_finish(
                thread.fold_task_id,
                ok=True,
                result={"folded": False, "reason": "the thread is pinned"},
            )
        _fold_request_done(thread.pk, thread.fold_task_id)
    _end_orphaned_runs(older_than=expired)
    return decided


def _end_orphaned_runs(*, older_than: Any) -> None:
    """End fold runs still open long after their thread stopped pointing at them: their
    worker died after the fold (which clears the marker) and before the run's end was
    recorded, or a newer request took over. Each ends with what it left behind; should its
    message still be delivered, the task records its own end over this one."""
    live = Thread.objects.exclude(fold_task_id="").values("fold_task_id")
    orphans = TaskRun.objects.filter(
        kind="fold", state__in=OPEN_STATES, created_at__lt=older_than
    ).exclude(pk__in=live)
    for run in orphans:
        version = SummaryVersion.objects.filter(task_id=run.pk).order_by("-version").first()
        task_run_finish(
            run.pk,
            ok=True,
            result={
                "folded": version is not None and version.phase == SummaryPhase.COMMITTED,
                "version": version.version if version is not None else None,
                "phase": version.phase if version is not None else None,
                "recovered": True,
                "reason": ORPHANED,
            },
        )


def _discard(version: SummaryVersion, *, reason: str) -> str:
    with transaction.atomic(durable=True):
        changed = SummaryVersion.objects.filter(pk=version.pk, phase=SummaryPhase.PREPARED).update(
            phase=SummaryPhase.DISCARDED, decided_at=_now()
        )
        if not changed:
            return Outcome.ALREADY_DECIDED
        thread = Thread.objects.select_related("workspace").get(pk=version.thread_id)
        _audit_discarded(thread, version, after={"reason": reason}, label="recovery")
    version.phase = SummaryPhase.DISCARDED
    return Outcome.DISCARDED
