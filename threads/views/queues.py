"""Work queues across the person's workspaces: side effects whose outcome is unknown, and
approvals waiting for a reviewer."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from threads import selectors
from threads.domain.errors import DomainError, InvalidEvent
from threads.models import ApprovalStatus, Role, SideEffectStatus
from threads.selectors.approval_context import OPEN_STATUSES, approval_kinds
from threads.services.approvals import approval_decide
from threads.services.side_effects import side_effect_check_request, side_effect_resolve
from threads.views.common import (
    HtmxHttpRequest,
    can,
    done,
    found,
    page_of,
    problem,
    progress_started,
    query_without,
    region,
    require,
    with_notice_cleared,
)

RESOLUTIONS = ("succeeded", "failed", "cancelled")
# Both queues' "any" (the filter's empty choice, or the word itself): no status filter.
ANY = "any"


def _effect_rows(request: HtmxHttpRequest, effects: list[Any]) -> list[dict[str, Any]]:
    rows = selectors.side_effect_rows(effects)
    for row, effect in zip(rows, effects, strict=True):
        row["workspace"] = effect.thread.workspace.name
        row["thread_id"] = effect.thread_id
        row["can_resolve"] = can(request, effect.thread.workspace_id, Role.OPERATOR) and (
            effect.status in (SideEffectStatus.UNKNOWN, SideEffectStatus.RUNNING)
        )
        row["arguments"] = effect.call_event.data.get("arguments", {})
        row["copied_from"] = selectors.fork_copied_from(effect.thread, effect.call_seq)
    return rows


@login_required
@require_GET
def side_effect_list(request: HtmxHttpRequest) -> HttpResponse:
    status = request.GET.get("status", SideEffectStatus.UNKNOWN)
    if status == ANY:
        status = ""
    if status and status not in SideEffectStatus.values:
        return _unknown_status(request, status, SideEffectStatus.values, "side-effect-list")
    thread = request.GET.get("thread", "").strip()
    effects = selectors.side_effects_in(
        workspace_ids=selectors.member_workspace_ids(request.user),
        status=status,
        thread=thread,
        recent_first=True,
    )
    page = page_of(effects, request, 50)
    context = {
        "page": page,
        "rows": _effect_rows(request, list(page.object_list)),
        "status": status,
        "thread_filter": thread,
        "statuses": SideEffectStatus.values,
        "resolutions": RESOLUTIONS,
        "page_query": query_without(request, "page"),
    }
    return region(request, "threads/side_effect_list.html", context, "effects")


@login_required
@require_POST
def side_effect_resolve_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    workspace_ids = selectors.member_workspace_ids(request.user)
    effect = found(selectors.side_effect_get_in, workspace_ids=workspace_ids, id=pk)
    require(request, effect.thread.workspace_id, Role.OPERATOR)
    back = reverse("side-effect-list")
    try:
        side_effect_resolve(
            side_effect=effect,
            actor=request.user,
            status=request.POST.get("status", ""),
            evidence=request.POST.get("evidence", ""),
        )
    except DomainError as exc:
        return problem(request, exc, back, _effect_refreshed(request, exc, workspace_ids, pk))
    effect = selectors.side_effect_get_in(workspace_ids=workspace_ids, id=pk)
    context = {"effect": _effect_rows(request, [effect])[0], "resolutions": RESOLUTIONS}
    answer = done(request, back, "threads/side_effect_list.html", context, "effect_row")
    return with_notice_cleared(request, answer)


def _effect_refreshed(
    request: HtmxHttpRequest, exc: DomainError, workspace_ids: Any, pk: int
) -> str:
    """A conflict (resolved meanwhile, by someone else): the card as it stands now."""
    if exc.status != 409:
        return ""
    effect = selectors.side_effect_get_in(workspace_ids=workspace_ids, id=pk)
    context = {
        "effect": _effect_rows(request, [effect])[0],
        "resolutions": RESOLUTIONS,
        "oob": True,
    }
    return render_to_string("threads/side_effect_list.html#effect_row", context, request)


@login_required
@require_POST
def side_effect_check_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    effect = found(
        selectors.side_effect_get_in,
        workspace_ids=selectors.member_workspace_ids(request.user),
        id=pk,
    )
    require(request, effect.thread.workspace_id, Role.OPERATOR)
    back = reverse("side-effect-list")
    try:
        run = side_effect_check_request(side_effect=effect, actor=request.user)
    except DomainError as exc:
        return problem(request, exc, back)
    return progress_started(request, run, back)


# The queue's status filter: "pending" is what still waits for a reviewer; "expired" is
# pending past its expires_at, which nobody can decide any more (docs/repairs.md, "Approvals").
EXPIRED = "expired"
QUEUE_FILTERS: dict[str, dict[str, Any]] = {
    ApprovalStatus.PENDING: {"status": ApprovalStatus.PENDING, "expired": False},
    ApprovalStatus.APPROVED: {"status": ApprovalStatus.APPROVED},
    ApprovalStatus.REJECTED: {"status": ApprovalStatus.REJECTED},
    EXPIRED: {"expired": True},
}


def _unknown_status(
    request: HtmxHttpRequest, status: str, known: list[str], page: str
) -> HttpResponse:
    """A queue filtered by a status it does not have: 400, naming the ones it has (as the API
    answers), rather than an empty queue that reads as "nothing to do"."""
    exc = InvalidEvent(
        f"no status {status!r}: use one of {', '.join(known)}", fields={"status": "unknown"}
    )
    return problem(request, exc, reverse(page))


def approval_presented(approval: Any) -> dict[str, Any]:
    """How a card reads an approval: the action asked about first. An integration's kind of
    request (ApprovalKind: an interrupt) is titled by its pending call (tool name and
    arguments), shows that call's arguments, and its own ids folded away (`interrupt`)."""
    arguments = approval.arguments if isinstance(approval.arguments, dict) else {}
    kind = approval_kinds.get(approval.action)
    if kind is None:
        return {
            "title": approval.action,
            "arguments": approval.arguments,
            "interrupt": None,
            "kind_label": "",
        }
    subject = selectors.approval_subject(approval)
    shown_arguments: Any = (
        subject["tool_arguments"]
        if subject["tool_name"]
        else arguments.get(kind.shown_otherwise, {})
    )
    details = {k: arguments[k] for k in kind.details if k in arguments}
    return {
        "title": selectors.approval_title(approval),
        "arguments": shown_arguments,
        "interrupt": details,
        "kind_label": kind.label,
    }


def _approval_cards(request: HtmxHttpRequest, approvals: list[Any]) -> list[dict[str, Any]]:
    contexts = selectors.approval_contexts(approvals)
    now = timezone.now()
    cards = []
    for a in approvals:
        expired = selectors.approval_expired(a, now)
        context = contexts[a.pk]
        related = context["related_side_effects"]
        cards.append(
            {
                "approval": a,
                **approval_presented(a),
                "expired": expired,
                "shown_status": EXPIRED if expired else a.status,
                "constraints": context["active_constraints"],
                "related": related,
                "open_related": [r for r in related if r["status"] in OPEN_STATUSES],
                "recent_messages": context["recent_messages"],
                # After a decision: has the agent read it yet (run status)?
                "picked_up": selectors.approval_picked_up(a, a.thread),
                "copied_from": selectors.fork_copied_from(a.thread, a.request_event.seq),
                "can_decide": a.status == ApprovalStatus.PENDING
                and not expired
                and can(request, a.thread.workspace_id, Role.REVIEWER),
            }
        )
    return cards


@login_required
@require_GET
def approval_list(request: HtmxHttpRequest) -> HttpResponse:
    status = request.GET.get("status", ApprovalStatus.PENDING)
    if status == ANY:
        status = ""
    if status and status not in QUEUE_FILTERS:
        return _unknown_status(request, status, list(QUEUE_FILTERS), "approval-list")
    thread = request.GET.get("thread", "").strip()
    approvals = selectors.approvals_in(
        workspace_ids=selectors.member_workspace_ids(request.user),
        thread=thread,
        **QUEUE_FILTERS.get(status, {}),
    )
    page = page_of(approvals, request, 25)
    context = {
        "page": page,
        "cards": _approval_cards(request, list(page.object_list)),
        "status": status,
        "thread_filter": thread,
        "statuses": list(QUEUE_FILTERS),
        "page_query": query_without(request, "page"),
    }
    return region(request, "threads/approval_list.html", context, "approvals")


@login_required
@require_POST
def approval_decide_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    workspace_ids = selectors.member_workspace_ids(request.user)
    approval = found(selectors.approval_get_in, workspace_ids=workspace_ids, id=pk)
    require(request, approval.thread.workspace_id, Role.REVIEWER)
    back = reverse("approval-list")
    try:
        approval_decide(
            approval=approval,
            actor=request.user,
            decision=request.POST.get("decision", ""),
            reason=request.POST.get("reason", ""),
            acknowledge_unknown=request.POST.get("acknowledge_unknown") == "on",
            acknowledge_reason=request.POST.get("acknowledge_reason", ""),
        )
    except DomainError as exc:
        refreshed = ""
        # Decided meanwhile, expired, or beside a related side effect not acknowledged: the
        # card as it stands now (it shows that side effect and the box to acknowledge it).
        if exc.status == 409:
            approval = selectors.approval_get_in(workspace_ids=workspace_ids, id=pk)
            context = {"card": _approval_cards(request, [approval])[0], "oob": True}
            refreshed = render_to_string(
                "threads/approval_list.html#approval_card", context, request
            )
        return problem(request, exc, back, refreshed)
    approval = selectors.approval_get_in(workspace_ids=workspace_ids, id=pk)
    context = {"card": _approval_cards(request, [approval])[0]}
    answer = done(request, back, "threads/approval_list.html", context, "approval_card")
    return with_notice_cleared(request, answer)
