"""The cross-thread queues: side effects and approval requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from threads.domain.errors import NotFound
from threads.domain.ledger import DUPLICATE_OF
from threads.models import (
    TOOL_CALL_INDEXED,
    ApprovalRequest,
    ApprovalStatus,
    Event,
    EventKind,
    SideEffect,
    Thread,
)
from threads.selectors.audit import filter_by_thread


def side_effects_in(
    *,
    workspace_ids: Any,
    status: str = "",
    thread: str = "",
    idempotency_key: str = "",
    recent_first: bool = False,
) -> QuerySet[SideEffect]:
    """Side effects of the given workspaces (an agent's one, or a person's), by thread and
    call, or most recently updated first. `thread` narrows to one thread by UUID or
    external_id, `idempotency_key` to that key's record."""
    effects = SideEffect.objects.filter(thread__workspace_id__in=workspace_ids)
    if status:
        effects = effects.filter(status=status)
    if idempotency_key:
        effects = effects.filter(idempotency_key=idempotency_key)
    if thread:
        effects = filter_by_thread(effects, thread)
    order = ("-updated_at", "pk") if recent_first else ("thread__external_id", "call_seq", "pk")
    return effects.select_related(
        "thread",
        "thread__workspace",
        "thread__parent_thread",
        "thread__parent_checkpoint",
        "call_event",
    ).order_by(*order)


def side_effect_get_in(*, workspace_ids: Any, id: int) -> SideEffect:
    found = side_effects_in(workspace_ids=workspace_ids).filter(pk=id).first()
    if found is None:
        raise NotFound("side effect not found")
    return found


def side_effect_rows(effects: QuerySet[SideEffect] | list[SideEffect]) -> list[dict[str, Any]]:
    """Side effects as plain rows with the resolutions the log holds for each, and the second
    results stored for its call (`second_results`: each `seq` and `status`; flagged
    `duplicate_of`, they never move the record): two queries whatever the number of side
    effects. The one definition of a side effect's row: the API answers it, the dashboard's
    queue and the rollback preview show it."""
    effects = list(effects)
    resolutions: dict[tuple[Any, int], list[dict[str, Any]]] = {}
    seconds: dict[tuple[Any, int], list[dict[str, Any]]] = {}
    if effects:
        rows = (
            Event.objects.filter(
                Q(kind=EventKind.SIDE_EFFECT_RESOLUTION)
                | Q(kind=EventKind.TOOL_RESULT, data__has_key=DUPLICATE_OF),
                TOOL_CALL_INDEXED,
                thread_id__in={e.thread_id for e in effects},
                tool_call_id__in={e.tool_call_id for e in effects},
            )
            # The keys, not the whole data: a second result's may be large.
            .values_list(
                "thread_id",
                "seq",
                "created_at",
                "kind",
                "data__call_seq",
                "data__status",
                "data__evidence",
                "data__actor",
            )
            .order_by()
        )
        # In seq order, sorted here: asked for it, SQLite without table statistics walks an
        # index of seqs instead of probing the ids (docs/scale.md, "What one database holds").
        for thread_id, seq, created_at, kind, call_seq, status, evidence, actor in sorted(
            rows, key=lambda row: row[1]
        ):
            if kind == EventKind.TOOL_RESULT:
                seconds.setdefault((thread_id, call_seq), []).append({"seq": seq, "status": status})
                continue
            resolutions.setdefault((thread_id, call_seq), []).append(
                {
                    "seq": seq,
                    "status": status,
                    "evidence": evidence or "",
                    "actor": actor or "",
                    "created_at": created_at,
                }
            )
    return [
        {
            "id": e.pk,
            "thread": str(e.thread_id),
            "thread_external_id": e.thread.external_id,
            "tool_call_id": e.tool_call_id,
            "tool_name": e.tool_name,
            "idempotency_key": e.idempotency_key,
            "status": e.status,
            "call_seq": e.call_seq,
            "result_seq": e.result_seq,
            "request_id": e.request_id,
            "updated_at": e.updated_at,
            "resolutions": resolutions.get((e.thread_id, e.call_seq), []),
            "second_results": seconds.get((e.thread_id, e.call_seq), []),
        }
        for e in effects
    ]


def approval_expired(approval: ApprovalRequest, now: datetime | None = None) -> bool:
    """Whether a request can no longer be decided: still pending, and its `expires_at` has
    passed (by the server's clock). A decided request keeps its decision, expiry or not."""
    return (
        approval.status == ApprovalStatus.PENDING
        and approval.expires_at is not None
        and approval.expires_at <= (now or timezone.now())
    )


def filter_expired(
    approvals: QuerySet[ApprovalRequest], expired: bool, now: datetime | None = None
) -> QuerySet[ApprovalRequest]:
    """Only the expired requests (see approval_expired), or only the others."""
    condition = Q(status=ApprovalStatus.PENDING, expires_at__lte=now or timezone.now())
    return approvals.filter(condition) if expired else approvals.exclude(condition)


def approvals_in(
    *, workspace_ids: Any, status: str = "", thread: str = "", expired: bool | None = None
) -> QuerySet[ApprovalRequest]:
    """Approval requests of the given workspaces (an agent's one, or a person's), oldest
    first. `thread` narrows to one thread by UUID or external_id; `expired` to the requests
    that expired unanswered (True) or to the others (False)."""
    approvals = ApprovalRequest.objects.filter(thread__workspace_id__in=workspace_ids)
    if status:
        approvals = approvals.filter(status=status)
    if expired is not None:
        approvals = filter_expired(approvals, expired)
    if thread:
        approvals = filter_by_thread(approvals, thread)
    return approvals.select_related(
        "thread",
        "thread__workspace",
        "thread__parent_thread",
        "thread__parent_checkpoint",
        "request_event",
        "decision_event",
        "decided_by",
    ).order_by("created_at", "pk")


def fork_copied_from(thread: Any, seq: int) -> str:
    """The external_id of the thread a fork copied this event from (a seq at or below the
    fork's checkpoint: the same real-world call or request as the parent's), else ""."""
    parent, checkpoint = thread.parent_thread, thread.parent_checkpoint
    if parent is None or checkpoint is None or seq > checkpoint.cursor:
        return ""
    return str(parent.external_id)


def approval_get_in(*, workspace_ids: Any, id: int) -> ApprovalRequest:
    found = approvals_in(workspace_ids=workspace_ids).filter(pk=id).first()
    if found is None:
        raise NotFound("approval not found")
    return found


def approvals_of_thread(
    *, thread: Thread, status: str = "", expired: bool | None = None
) -> QuerySet[ApprovalRequest]:
    approvals = ApprovalRequest.objects.filter(thread=thread)
    if status:
        approvals = approvals.filter(status=status)
    if expired is not None:
        approvals = filter_expired(approvals, expired)
    return approvals.select_related(
        "thread", "request_event", "decision_event", "decided_by"
    ).order_by("request_event__seq")


def approval_rows(
    approvals: QuerySet[ApprovalRequest] | list[ApprovalRequest],
) -> list[dict[str, Any]]:
    """Approval requests as plain rows; `decision` is what the agent polls for, `expired`
    says no decision can come any more (the status stays `pending`). The one
    definition of an approval's row: the API answers it, the rollback preview shows it."""
    decisions = {ApprovalStatus.APPROVED: "approve", ApprovalStatus.REJECTED: "reject"}
    now = timezone.now()
    return [
        {
            "id": a.pk,
            "thread": str(a.thread_id),
            "thread_external_id": a.thread.external_id,
            "approval_seq": a.request_event.seq,
            "action": a.action,
            "tool_name": a.tool_name,
            "arguments": a.arguments,
            "status": a.status,
            "decision": decisions.get(ApprovalStatus(a.status)),
            "reason": a.reason,
            "decided_by": a.decided_by.get_username()
            if a.decided_by
            else (a.decision_event.data.get("actor") if a.decision_event else None),
            "decided_at": a.decided_at,
            "decision_seq": a.decision_event.seq if a.decision_event else None,
            "expires_at": a.expires_at,
            "expired": approval_expired(a, now),
            "created_at": a.created_at,
        }
        for a in approvals
    ]
