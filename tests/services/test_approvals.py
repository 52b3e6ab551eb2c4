"""Approval decisions: exactly once, by a reviewer, as an event the agent reads back."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from tests import factories as f
from threads.domain.errors import Conflict, InvalidEvent, PermissionDenied
from threads.models import ApprovalRequest, AuditEntry, Event, Thread
from threads.services.approvals import approval_decide
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db


def request_approval(thread: Thread, **extra: Any) -> ApprovalRequest:
    f.append(
        thread,
        f.user("refund again?"),
        {
            "kind": "approval_request",
            "action": "retry refund",
            "tool_name": "refund",
            "arguments": {"amount": 25},
            **extra,
        },
    )
    return ApprovalRequest.objects.get(thread=thread)


@pytest.fixture
def reviewer(workspace: Any) -> Any:
    return f.make_person(workspace, "rex", "reviewer")


def test_decision_is_an_event(thread: Thread, reviewer: Any) -> None:
    approval = request_approval(thread)
    event = approval_decide(
        approval=approval, actor=reviewer, decision="approve", reason="ledger shows no refund"
    )
    assert event.kind == "approval_decision" and event.seq == 3
    assert event.data == {
        "approval_seq": 2,
        "decision": "approve",
        "reason": "ledger shows no refund",
        "actor": "rex",
    }
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decision_event == event
    assert approval.decided_by == reviewer and approval.decided_at is not None
    assert integrity_check(thread=thread, full=True).ok
    entry = AuditEntry.objects.get(action="approval.decide")
    assert entry.after is not None and entry.after["decision"] == "approve"
    assert entry.before == {"status": "pending"}


def test_a_decision_triggers_a_structural_fold(
    thread: Thread, reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from ctxadmin.celery import app as celery_app

    approval = request_approval(thread)
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            approval_decide(approval=approval, actor=reviewer, decision="reject", reason="no")
    finally:
        celery_app.conf.task_always_eager = before
    thread.refresh_from_db()
    assert thread.covered_until == 3 and thread.head_version >= 1


def test_deciding_twice_is_a_conflict(thread: Thread, reviewer: Any) -> None:
    approval = request_approval(thread)
    approval_decide(approval=approval, actor=reviewer, decision="reject", reason="no")
    stale = ApprovalRequest.objects.get(pk=approval.pk)
    with pytest.raises(Conflict) as conflict:
        approval_decide(approval=stale, actor=reviewer, decision="approve", reason="yes")
    assert conflict.value.code == "already_decided"
    assert Event.objects.filter(kind="approval_decision").count() == 1
    stale.refresh_from_db()
    assert stale.status == "rejected"


def test_operators_cannot_decide(thread: Thread, workspace: Any) -> None:
    approval = request_approval(thread)
    operator = f.make_person(workspace, "otto", "operator")
    with pytest.raises(PermissionDenied):
        approval_decide(approval=approval, actor=operator, decision="approve", reason="x")
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_reason_and_decision_are_validated(thread: Thread, reviewer: Any) -> None:
    approval = request_approval(thread)
    with pytest.raises(InvalidEvent):
        approval_decide(approval=approval, actor=reviewer, decision="approve", reason=" ")
    with pytest.raises(InvalidEvent):
        approval_decide(approval=approval, actor=reviewer, decision="maybe", reason="x")


def test_an_expired_request_cannot_be_decided(thread: Thread, reviewer: Any) -> None:
    past = (timezone.now() - timedelta(minutes=1)).isoformat()
    approval = request_approval(thread, expires_at=past)
    with pytest.raises(Conflict) as conflict:
        approval_decide(approval=approval, actor=reviewer, decision="approve", reason="x")
    assert conflict.value.code == "approval_expired"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_decisions_write_exactly_one_event(workspace: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks and concurrent transactions need PostgreSQL")
    thread = f.make_thread(workspace, external_id="race")
    approval = request_approval(thread)
    people = [f.make_person(workspace, f"rev{n}", "reviewer") for n in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def decide(person: Any, decision: str) -> None:
        try:
            barrier.wait()
            approval_decide(
                approval=ApprovalRequest.objects.get(pk=approval.pk),
                actor=person,
                decision=decision,
                reason="race",
            )
            outcomes.append("ok")
        except Conflict as exc:
            outcomes.append(exc.code)
        finally:
            close_old_connections()
            connection.close()

    workers = [
        threading.Thread(target=decide, args=(people[0], "approve")),
        threading.Thread(target=decide, args=(people[1], "reject")),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(outcomes) == ["already_decided", "ok"]
    assert Event.objects.filter(thread=thread, kind="approval_decision").count() == 1
    approval.refresh_from_db()
    assert approval.decision_event is not None
    assert (
        approval.status
        == {"approve": "approved", "reject": "rejected"}[approval.decision_event.data["decision"]]
    )
