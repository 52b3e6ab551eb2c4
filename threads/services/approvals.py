"""Deciding approval requests (docs/design.md §7).

An agent posts an `approval_request`; a reviewer approves or rejects it with a reason; the
decision is an `approval_decision` event the agent reads back. A request is decided exactly
once, also when two reviewers press the button at the same moment.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.errors import Conflict, InvalidEvent
from threads.models import ApprovalRequest, ApprovalStatus, Event, EventKind, Role, Thread
from threads.services.audit import audit_record, reason_clean
from threads.services.events import announce_after_commit, server_event_append
from threads.services.threads import thread_lock

DECISIONS = {"approve": ApprovalStatus.APPROVED, "reject": ApprovalStatus.REJECTED}


class AlreadyDecided(Conflict):
    code = "already_decided"


class ApprovalExpired(Conflict):
    code = "approval_expired"


def approval_decide(
    *, approval: ApprovalRequest, actor: AbstractBaseUser, decision: str, reason: str
) -> Event:
    """Approve or reject a pending request (reviewer or higher) and append the decision event.

    Locks the thread row (select_for_update) before appending. The status moves by a
    conditional `UPDATE ... WHERE status = 'pending'` inside that transaction: of two
    concurrent decisions exactly one updates a row and appends an event; the other raises
    AlreadyDecided (409).
    """
    if decision not in DECISIONS:
        raise InvalidEvent(
            "invalid decision", fields={"decision": f"must be one of {', '.join(DECISIONS)}"}
        )
    reason = reason_clean(reason)
    thread = approval.thread
    require_role(actor, thread.workspace, Role.REVIEWER)
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        now = timezone.now()
        if approval.expires_at is not None and approval.expires_at <= now:
            current = ApprovalRequest.objects.get(pk=approval.pk)
            if current.status == ApprovalStatus.PENDING:
                raise ApprovalExpired(
                    f"approval {approval.pk} expired at {approval.expires_at.isoformat()}",
                    fields={"expires_at": approval.expires_at.isoformat()},
                )
        moved = ApprovalRequest.objects.filter(
            pk=approval.pk, status=ApprovalStatus.PENDING
        ).update(status=DECISIONS[decision], decided_by=actor, decided_at=now, reason=reason)
        if not moved:
            current = ApprovalRequest.objects.get(pk=approval.pk)
            raise AlreadyDecided(
                f"approval {approval.pk} was already decided ({current.status})",
                fields={"status": current.status},
            )
        label = actor.get_username()
        event = _decision_event(locked, approval, decision, reason, label)
        audit_record(
            workspace=locked.workspace,
            actor=actor,
            action="approval.decide",
            target_type="approval",
            target_id=approval.pk,
            thread=locked,
            before={"status": ApprovalStatus.PENDING.value},
            after={
                "status": DECISIONS[decision].value,
                "decision": decision,
                "reason": reason,
                "seq": event.seq,
            },
        )
    approval.status = DECISIONS[decision]
    approval.decided_by = actor  # type: ignore[assignment]
    approval.decided_at = now
    approval.reason = reason
    approval.decision_event = event
    return event


def _decision_event(
    thread: Thread, approval: ApprovalRequest, decision: str, reason: str, actor_label: str
) -> Event:
    """The `approval_decision` event of a request just moved out of pending, linked to it and
    announced after commit. Runs under the thread's lock, in the caller's transaction."""
    request_seq = (
        Event.objects.filter(pk=approval.request_event_id).values_list("seq", flat=True).get()
    )
    event = server_event_append(
        thread=thread,
        kind=EventKind.APPROVAL_DECISION,
        data={
            "approval_seq": request_seq,
            "decision": decision,
            "reason": reason,
            "actor": actor_label,
        },
    )
    ApprovalRequest.objects.filter(pk=approval.pk).update(decision_event=event)
    announce_after_commit(thread.pk, [event])
    return event


def approvals_close_locked(
    *, thread: Thread, approvals: Sequence[ApprovalRequest], reason: str, actor_label: str
) -> list[ApprovalRequest]:
    """Close pending requests that nobody can act on any more (a LangGraph interrupt whose
    checkpoint was deleted): each is rejected as a decision is recorded — the conditional
    `UPDATE ... WHERE status = 'pending'`, an `approval_decision` event (`actor` the label,
    no person) and an audit entry (`approval.close`) — so that queues and metrics stop
    counting it. One already decided is left as it is. Returns the requests closed.

    Runs inside the caller's transaction, which holds the thread's lock (select_for_update).
    """
    reason = reason_clean(reason)
    closed = []
    now = timezone.now()
    for approval in approvals:
        moved = ApprovalRequest.objects.filter(
            pk=approval.pk, status=ApprovalStatus.PENDING
        ).update(status=ApprovalStatus.REJECTED, decided_at=now, reason=reason)
        if not moved:
            continue
        event = _decision_event(thread, approval, "reject", reason, actor_label)
        audit_record(
            workspace=thread.workspace,
            actor=None,
            actor_label=actor_label,
            action="approval.close",
            target_type="approval",
            target_id=approval.pk,
            thread=thread,
            before={"status": ApprovalStatus.PENDING.value},
            after={"status": ApprovalStatus.REJECTED.value, "reason": reason, "seq": event.seq},
        )
        closed.append(approval)
    return closed
