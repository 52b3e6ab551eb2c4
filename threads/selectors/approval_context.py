"""What bears on an approval request (docs/repairs.md, "Approvals"): the side effects related to the
action asked about, the last messages before the request and the thread's active constraints.

One definition for the API's approval answer, the dashboard's approvals queue and the thread
timeline's approval card, and for the decision service's refusal to approve beside a side
effect whose outcome nobody knows yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, Q, Subquery

from threads.domain.claims import event_text
from threads.models import ApprovalRequest, Event, EventKind, SideEffect, SideEffectStatus
from threads.selectors.threads import active_constraints

RECENT_MESSAGES = 3
MESSAGE_CHARS = 400
# A related side effect in one of these may already have done what the request asks again.
OPEN_STATUSES = (SideEffectStatus.UNKNOWN.value, SideEffectStatus.RUNNING.value)


@dataclass(frozen=True)
class ApprovalKind:
    """An integration's own kind of approval request, by its `action` (a graph
    checkpointer's interrupt), whose arguments name the call it asks about in
    `tool_name`, `tool_arguments` and `tool_call_id` beside ids of the integration's own.
    Registered by the integration's AppConfig.ready().

    - `label`: its title when its arguments name no call;
    - `shown_otherwise`: the argument a card shows when they name no call;
    - `details`: the argument keys a card shows folded away under the call.
    """

    label: str
    shown_otherwise: str
    details: tuple[str, ...]


approval_kinds: dict[str, ApprovalKind] = {}


def approval_subject(approval: ApprovalRequest) -> dict[str, Any]:
    """The action an approval asks about: its tool, arguments and idempotency key. A request
    of an integration's kind (ApprovalKind: an interrupt) names its pending call in
    `tool_name`, `tool_arguments` and `tool_call_id` of its arguments; other requests carry
    `tool_name` and `arguments` themselves."""
    arguments = approval.arguments if isinstance(approval.arguments, Mapping) else {}
    tool_name = approval.tool_name or str(arguments.get("tool_name") or "")
    tool_arguments = arguments.get("tool_arguments")
    if not isinstance(tool_arguments, Mapping):
        tool_arguments = arguments
    key = tool_arguments.get("idempotency_key") or arguments.get("idempotency_key") or ""
    call_id = arguments.get("tool_call_id")
    return {
        "tool_call_id": call_id if isinstance(call_id, str) else "",
        "tool_name": tool_name,
        "tool_arguments": dict(tool_arguments),
        "idempotency_key": key if isinstance(key, str) else str(key),
    }


def approval_title(approval: ApprovalRequest) -> str:
    """An approval's title as people read it: its action, or for an integration's kind (an
    interrupt) the call it asks about (`refund(amount=89.9, order_id=5521)`), at most
    160 characters."""
    kind = approval_kinds.get(approval.action)
    if kind is None:
        return approval.action
    subject = approval_subject(approval)
    if not subject["tool_name"]:
        return kind.label
    # By name: the database may keep a JSON object's keys in its own order.
    shown = ", ".join(f"{k}={v}" for k, v in sorted(subject["tool_arguments"].items()))
    title = f"{subject['tool_name']}({shown})"
    return title if len(title) <= 160 else title[:159] + "…"


def approval_related_side_effects(
    approvals: Iterable[ApprovalRequest],
) -> dict[int, list[dict[str, Any]]]:
    """Per approval id: the side effects related to its action, by call, each with `status`
    and `match` (`idempotency_key` when it carries the key the request's arguments name, in
    any thread of the workspace; `tool` when it is a call of the same tool in the thread),
    but the call the request itself asks about (its `tool_call_id`). One query whatever the
    number of approvals."""
    approvals = list(approvals)
    subjects = {a.pk: approval_subject(a) for a in approvals}
    condition = Q(pk__in=[])
    for a in approvals:
        subject = subjects[a.pk]
        if subject["idempotency_key"]:
            condition |= Q(
                thread__workspace_id=a.thread.workspace_id,
                idempotency_key=subject["idempotency_key"],
            )
        if subject["tool_name"]:
            condition |= Q(thread_id=a.thread_id, tool_name=subject["tool_name"])
    out: dict[int, list[dict[str, Any]]] = {a.pk: [] for a in approvals}
    if not approvals:
        return out
    effects = list(
        SideEffect.objects.filter(condition)
        .select_related("thread")
        .order_by("thread_id", "call_seq")
    )
    for a in approvals:
        subject = subjects[a.pk]
        for effect in effects:
            if (
                subject["tool_call_id"]
                and effect.thread_id == a.thread_id
                and effect.tool_call_id == subject["tool_call_id"]
            ):
                # The call the request asks about (an interrupt's pending call, stored
                # `running` before it runs): what is being decided, not something beside it.
                continue
            if (
                subject["idempotency_key"]
                and effect.idempotency_key == subject["idempotency_key"]
                and effect.thread.workspace_id == a.thread.workspace_id
            ):
                match = "idempotency_key"
            elif subject["tool_name"] and (
                effect.thread_id == a.thread_id and effect.tool_name == subject["tool_name"]
            ):
                match = "tool"
            else:
                continue
            out[a.pk].append(
                {
                    "id": effect.pk,
                    "thread": str(effect.thread_id),
                    "thread_external_id": effect.thread.external_id,
                    "call_seq": effect.call_seq,
                    "tool_name": effect.tool_name,
                    "tool_call_id": effect.tool_call_id,
                    "idempotency_key": effect.idempotency_key,
                    "status": effect.status,
                    "match": match,
                }
            )
        # The key's own call first: it is the one a second run would repeat.
        out[a.pk].sort(key=lambda row: (row["match"] != "idempotency_key", row["call_seq"]))
    return out


def approval_open_side_effects(approval: ApprovalRequest) -> list[dict[str, Any]]:
    """The related side effects whose outcome is `unknown` or still `running`: approving
    beside one of them may do the action twice."""
    related = approval_related_side_effects([approval])[approval.pk]
    return [row for row in related if row["status"] in OPEN_STATUSES]


def approval_recent_messages(
    approvals: Iterable[ApprovalRequest], *, limit: int = RECENT_MESSAGES
) -> dict[int, list[dict[str, Any]]]:
    """Per approval id: the last `limit` messages before its request, oldest first, each
    `seq`, `role` and `text` (cut to MESSAGE_CHARS). Two queries whatever the number of
    approvals: the seq of each request's `limit`-th message back, then the messages of each
    range."""
    approvals = list(approvals)
    out: dict[int, list[dict[str, Any]]] = {a.pk: [] for a in approvals}
    if not approvals:
        return out
    messages = Event.objects.filter(kind=EventKind.MESSAGE)
    floors = dict(
        ApprovalRequest.objects.filter(pk__in=[a.pk for a in approvals])
        .annotate(
            floor=Subquery(
                messages.filter(
                    thread_id=OuterRef("thread_id"), seq__lt=OuterRef("request_event__seq")
                )
                .order_by("-seq")
                .values("seq")[limit - 1 : limit]
            )
        )
        .values_list("pk", "floor")
    )
    ranges = {a.pk: (a.thread_id, floors.get(a.pk) or 0, a.request_event.seq) for a in approvals}
    condition = Q(pk__in=[])
    for thread_id, low, high in ranges.values():
        condition |= Q(thread_id=thread_id, seq__gte=low, seq__lt=high)
    rows = list(
        messages.filter(condition)
        .order_by("thread_id", "seq")
        .values_list("thread_id", "seq", "data")
    )
    for pk, (thread_id, low, high) in ranges.items():
        for row_thread, seq, data in rows:
            if row_thread != thread_id or not low <= seq < high:
                continue
            text = event_text({"kind": "message", **(data or {})})
            if len(text) > MESSAGE_CHARS:
                text = text[: MESSAGE_CHARS - 1] + "…"
            out[pk].append({"seq": seq, "role": (data or {}).get("role", ""), "text": text})
    return out


def approval_contexts(approvals: Iterable[ApprovalRequest]) -> dict[int, dict[str, Any]]:
    """Per approval id: `related_side_effects`, `recent_messages` and `active_constraints`
    (the head summary's active constraints and constraint annotations after it)."""
    approvals = list(approvals)
    related = approval_related_side_effects(approvals)
    messages = approval_recent_messages(approvals)
    constraints = active_constraints(thread_ids={a.thread_id for a in approvals})
    return {
        a.pk: {
            "related_side_effects": related[a.pk],
            "recent_messages": messages[a.pk],
            "active_constraints": constraints.get(a.thread_id, []),
        }
        for a in approvals
    }
