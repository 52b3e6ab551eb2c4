"""Deciding approval requests (docs/repairs.md, "Side effects and approvals").

An agent posts an `approval_request`; a reviewer approves or rejects it with a reason; the
decision is an `approval_decision` event the agent reads back. A request is decided exactly
once, also when two reviewers press the button at the same moment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from threads.access import require_role
from threads.domain.errors import Conflict, InvalidEvent
from threads.models import ApprovalRequest, ApprovalStatus, Event, EventKind, Role, Thread
from threads.selectors.approval_context import approval_open_side_effects
from threads.services.audit import MAX_REASON, audit_record, reason_clean, required_text_clean
from threads.services.events import announce_after_commit, server_event_append
from threads.services.redaction import (
    REDACTION_ACTION,
    redaction_approval_require,
    redaction_approved_locked,
)
from threads.services.run_status import agent_owed_locked
from threads.services.threads import thread_lock

DECISIONS = {"approve": ApprovalStatus.APPROVED, "reject": ApprovalStatus.REJECTED}


class AlreadyDecided(Conflict):
    code = "already_decided"


class ApprovalExpired(Conflict):
    code = "approval_expired"


class RelatedSideEffectUnknown(Conflict):
    """Approving beside a related side effect whose outcome is `unknown` or `running`,
    without the reviewer acknowledging it (docs/repairs.md, "Approvals")."""

    code = "related_side_effect_unknown"


def approval_decide(
    *,
    approval: ApprovalRequest,
    actor: AbstractBaseUser,
    decision: str,
    reason: str,
    acknowledge_unknown: bool = False,
    acknowledge_reason: str = "",
) -> Event:
    """Approve or reject a pending request (reviewer or higher) and append the decision event.

    Approving while a related side effect (same idempotency key, or same tool in the thread;
    selectors.approval_open_side_effects) is `unknown` or `running` raises
    RelatedSideEffectUnknown (409) naming them, unless the reviewer acknowledges them
    (`acknowledge_unknown` with an `acknowledge_reason`); the audit entry then names the
    side effects acknowledged. Rejecting is never refused.

    The thread then owes its agent a pickup of the decision (threads.services.run_status).

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
    if acknowledge_unknown:
        acknowledge_reason = required_text_clean(
            acknowledge_reason,
            field="acknowledge_reason",
            limit=MAX_REASON,
            missing="acknowledging a related side effect needs a reason",
            hint=f"must be at most {MAX_REASON} characters",
        )
    thread = approval.thread
    require_role(actor, thread.workspace, Role.REVIEWER)
    if approval.action == REDACTION_ACTION:
        # A redaction asked for where a second admin must approve it (docs/event-log.md,
        # "Redaction").
        redaction_approval_require(approval=approval, actor=actor, decision=decision)
    acknowledged: list[dict[str, Any]] = []
    with transaction.atomic(durable=True):
        locked = thread_lock(thread)
        now = timezone.now()
        if decision == "approve":
            open_effects = approval_open_side_effects(approval)
            if open_effects and not acknowledge_unknown:
                named = ", ".join(
                    f"{e['tool_name']} #{e['call_seq']} ({e['status']})" for e in open_effects
                )
                raise RelatedSideEffectUnknown(
                    f"a related side effect's outcome is not known: {named}; resolve it, or "
                    "approve with acknowledge_unknown and an acknowledge_reason",
                    fields={"related_side_effects": open_effects},
                )
            acknowledged = open_effects
        if approval.expires_at is not None and approval.expires_at <= now:
            current = ApprovalRequest.objects.get(pk=approval.pk)
            if current.status == ApprovalStatus.PENDING:
                raise ApprovalExpired(
                    f"approval {approval.pk} expired at {approval.expires_at.isoformat()}",
                    fields={"expires_at": approval.expires_at.isoformat()},
                )
        # The agent owes a pickup of the decision (run status waiting_for_agent), from the
        # decision's own time: its card says whether the agent has read it since.
        now = agent_owed_locked(locked, now=now)
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
        if approval.action == REDACTION_ACTION and decision == "approve":
            redaction_approved_locked(thread=locked, approval=approval, actor=actor)
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
                **(
                    {
                        "acknowledged_side_effects": acknowledged,
                        "acknowledge_reason": acknowledge_reason,
                    }
                    if acknowledged
                    else {}
                ),
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
    """Close pending requests that nobody can act on any more (an integration's interrupt whose
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
