"""Folding and a pinned thread (docs/repairs.md, "Rollback"), and the task status a resolution
leaves in the summary after a re-fold (docs/pipeline.md, "Fold with a summariser backend")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from ctxadmin.celery import app as celery_app
from tests import factories as f
from threads.models import SideEffect, SummaryPhase, SummaryVersion, TaskRun, TaskState, Thread
from threads.services import fold_preparation, fold_recovery, fold_requests, folding
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}


def refund_that_timed_out(thread: Thread) -> SideEffect:
    f.append(
        thread,
        f.user("refund order 7"),
        f.call("r1", "refund", {"amount": 120}, side_effect_key="refund-7"),
        f.result("r1", status="timeout"),
        f.assistant("The refund timed out; I cannot tell whether it went through."),
    )
    return SideEffect.objects.get(thread=thread, tool_call_id="r1")


def head_content(thread: Thread) -> dict[str, Any]:
    thread.refresh_from_db()
    return SummaryVersion.objects.get(thread=thread, version=thread.head_version).content


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_after_a_resolution_and_a_refold_the_task_is_no_longer_unknown_or_running(
    thread: Thread, workspace: Any, no_fold_triggers: None, outcome: str
) -> None:
    effect = refund_that_timed_out(thread)
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert head_content(thread)["task"]["status"] == "unknown"
    side_effect_resolve(
        side_effect=effect,
        actor=f.make_person(workspace, "otto", "operator"),
        status=outcome,
        evidence="the payment provider's dashboard",
    )
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.phase == SummaryPhase.COMMITTED
    content = head_content(thread)
    assert content["task"]["status"] == "waiting_for_user"
    [entry] = [t for t in content["tool_state"] if t["tool_call_id"] == "r1"]
    assert entry["status"] == outcome


def pin(thread: Thread) -> None:
    """Pinned from elsewhere while a fold was under way (a rollback's pin, docs/api.md,
    "Rollback — `POST /api/v1/threads/{id}/rollback/`")."""
    Thread.objects.filter(pk=thread.pk).update(
        pinned_at=timezone.now(), pinned_by="ada", pin_reason="hold"
    )


def test_a_candidate_prepared_before_a_pin_is_never_committed(
    thread: Thread, no_fold_triggers: None
) -> None:
    refund_that_timed_out(thread)
    candidate = fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL)
    assert candidate is not None
    pin(thread)
    assert folding.summary_decide(version=candidate) == folding.Outcome.DISCARDED
    thread.refresh_from_db()
    assert thread.head_version == 0 and thread.covered_until == 0
    candidate.refresh_from_db()
    assert candidate.phase == SummaryPhase.DISCARDED


def test_a_pinned_thread_prepares_nothing(thread: Thread, no_fold_triggers: None) -> None:
    refund_that_timed_out(thread)
    pin(thread)
    assert fold_preparation.fold_prepare(thread_id=thread.pk, trigger=MANUAL) is None
    assert not SummaryVersion.objects.filter(thread=thread).exists()
    with pytest.raises(fold_requests.ThreadPinned):
        fold_requests.fold_request(thread=thread, trigger=MANUAL)
    assert not TaskRun.objects.filter(thread=thread, kind="fold").exists()


def test_recovery_ends_a_pinned_thread_s_dead_fold_instead_of_asking_again(
    thread: Thread, no_fold_triggers: None, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    refund_that_timed_out(thread)
    with django_capture_on_commit_callbacks(execute=False):
        run = fold_requests.fold_request(thread=thread, trigger=MANUAL)  # its message is lost
    pin(thread)
    stale = timezone.now() - settings.CTXADMIN_PREPARED_TIMEOUT - timedelta(seconds=5)
    Thread.objects.filter(pk=thread.pk).update(fold_requested_at=stale)
    TaskRun.objects.filter(pk=run.pk).update(created_at=stale)
    fold_recovery.recover_prepared(older_than=settings.CTXADMIN_PREPARED_TIMEOUT)
    thread.refresh_from_db()
    assert thread.fold_task_id == "" and thread.head_version == 0
    runs = TaskRun.objects.filter(thread=thread, kind="fold")
    assert runs.count() == 1  # no new fold was asked for
    finished = runs.get()
    assert finished.state == TaskState.SUCCESS
    assert finished.result == {"folded": False, "reason": "the thread is pinned"}


def test_a_fold_queued_before_the_pin_ends_without_a_version(
    thread: Thread, no_fold_triggers: None, django_capture_on_commit_callbacks: Any
) -> None:
    refund_that_timed_out(thread)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        run = fold_requests.fold_request(thread=thread, trigger=MANUAL)
    pin(thread)
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        for send in queued:
            send()  # the broker delivers it now, after the pin
    finally:
        celery_app.conf.task_always_eager = before
    run.refresh_from_db()
    assert run.state == TaskState.SUCCESS
    assert run.result == {"folded": False, "reason": "the thread is pinned"}
    assert not SummaryVersion.objects.filter(thread=thread).exists()
    thread.refresh_from_db()
    assert thread.fold_task_id == ""
