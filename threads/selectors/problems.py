"""A thread's open problems, each with the link that acts on it: the thread page's banner and
the timeline's badges read them here (docs/dashboard.md, "Problems and what to do").

The flags are the thread list's own (threads.selectors.threads._thread_flags): the banner and
the Problems column never disagree on whether a thread has a problem.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince

from threads.domain.ledger import DUPLICATE_OF
from threads.domain.problems import (
    AGENT_STALLED,
    APPROVAL_PENDING,
    CHAIN_BROKEN,
    FOLD_FAILED,
    FOLD_REJECTED,
    OVER_BUDGET,
    PINNED,
    SECOND_RESULT,
    SIDE_EFFECT_RUNNING,
    SIDE_EFFECT_UNKNOWN,
    Problem,
    in_severity_order,
    problem,
)
from threads.domain.run_status import STALLED
from threads.models import (
    TOOL_CALL_INDEXED,
    ApprovalRequest,
    ApprovalStatus,
    Event,
    EventKind,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
)
from threads.selectors.approval_context import approval_title
from threads.selectors.threads import thread_with_flags_and_budget

OPEN_EFFECT_STATUSES = (SideEffectStatus.UNKNOWN, SideEffectStatus.RUNNING)


def side_effect_target(effect: SideEffect, thread: Thread) -> str:
    """The side-effect queue's card for this record, where its resolve form is."""
    query = urlencode({"thread": thread.external_id, "status": effect.status})
    return f"{reverse('side-effect-list')}?{query}#effect-{effect.pk}"


def approval_target(approval: ApprovalRequest, thread: Thread) -> str:
    """The approvals queue's card for this request, where a reviewer decides it."""
    query = urlencode({"thread": thread.external_id})
    return f"{reverse('approval-list')}?{query}#approval-{approval.pk}"


def listed_problems(*, thread: Any) -> list[Problem]:
    """The problems a row of the thread list shows, from its flags alone (threads_in's
    annotations; no query): the kinds of the list's Problems column, each linked to the queue
    or page that acts on it for this thread. The thread page's banner (thread_problems) names
    each record; both agree on whether the thread has a problem of a flagged kind."""
    found: list[Problem] = []
    external = urlencode({"thread": thread.external_id})
    ref = f"thread:{thread.pk}"
    if not thread.chain_ok:
        found.append(
            problem(
                kind=CHAIN_BROKEN,
                text=f"The chain is broken at event #{thread.first_bad_seq}.",
                action="Verify on the integrity page",
                target=reverse("integrity"),
                ref=f"event:{thread.first_bad_seq}",
            )
        )
    if getattr(thread, "has_unknown", False):
        found.append(
            problem(
                kind=SIDE_EFFECT_UNKNOWN,
                text=f"{thread.unknown_side_effects} side effect(s) unknown.",
                action="Resolve",
                target=f"{reverse('side-effect-list')}?{external}&status=unknown",
                ref=ref,
            )
        )
    if getattr(thread, "run_status", None) == STALLED:
        found.append(_agent_stalled(thread))
    if getattr(thread, "has_pending", False):
        found.append(
            problem(
                kind=APPROVAL_PENDING,
                text="Approval pending.",
                action="Review",
                target=f"{reverse('approval-list')}?{external}",
                ref=ref,
            )
        )
    if getattr(thread, "has_rejected", False):
        found.append(
            problem(
                kind=FOLD_REJECTED,
                text="A candidate failed verification.",
                action="See why, or fold again",
                target=reverse("summary-list", args=[thread.pk]),
                ref=ref,
            )
        )
    if getattr(thread, "budget_use", None) is not None and thread.history_tokens > (
        thread.high_tokens
    ):
        found.append(
            problem(
                kind=OVER_BUDGET,
                text="History is above the high watermark.",
                action="Fold now from the summaries tab",
                target=reverse("summary-list", args=[thread.pk]),
                ref=ref,
            )
        )
    if thread.pinned_at is not None:
        found.append(
            problem(
                kind=PINNED,
                text=f"Pinned by {thread.pinned_by}: {thread.pin_reason}.",
                action="See the pin",
                target="#thread-repair",
                ref=ref,
            )
        )
    return in_severity_order(found)


def _agent_stalled(flagged: Any) -> Problem:
    """The agent has not picked up a decision, resolution or rollback for longer than its
    workspace allows: the header's run-status chip says what, and when it last read."""
    waited = timesince(flagged.agent_owed_since)
    last = (
        f"its last read was {timesince(flagged.agent_read_at)} ago"
        if flagged.agent_read_at is not None
        else "it has never read its context, approvals or its saved graph state"
    )
    return problem(
        kind=AGENT_STALLED,
        text=f"The agent has not picked up what was decided for {waited}: {last}.",
        action="Look at the agent and its last read",
        target=f"{reverse('thread-timeline', args=[flagged.pk])}#run-status",
        ref=f"thread:{flagged.pk}",
    )


def thread_problems(*, thread: Thread, flags: Thread | None = None) -> list[Problem]:
    """The thread's open problems, most severe first (threads.domain.problems.PROBLEM_KINDS).
    At most six queries, none of which grows with the thread's length; one fewer when the
    caller hands in the thread as thread_with_flags_and_budget read it (`flags`)."""
    # Annotated: has_pending, has_rejected, budget_use, history_tokens, high_tokens, run_status.
    flagged: Any = flags if flags is not None else thread_with_flags_and_budget(thread)
    found: list[Problem] = []
    summaries = reverse("summary-list", args=[thread.pk])
    timeline = reverse("thread-timeline", args=[thread.pk])
    if not flagged.chain_ok:
        found.append(
            problem(
                kind=CHAIN_BROKEN,
                text=f"The chain is broken at event #{flagged.first_bad_seq}: the log was "
                "changed after it was written.",
                action="Verify on the integrity page",
                target=reverse("integrity"),
                ref=f"event:{flagged.first_bad_seq}",
            )
        )
    effects = SideEffect.objects.filter(thread=thread, status__in=OPEN_EFFECT_STATUSES).order_by(
        "call_seq"
    )
    for effect in effects:
        unknown = effect.status == SideEffectStatus.UNKNOWN
        found.append(
            problem(
                kind=SIDE_EFFECT_UNKNOWN if unknown else SIDE_EFFECT_RUNNING,
                text=f"Side effect {effect.tool_name} (key {effect.idempotency_key}, call "
                f"#{effect.call_seq}) is {effect.status}: "
                + (
                    "nobody knows whether it happened."
                    if unknown
                    else "no result has come for it yet."
                ),
                action="Resolve",
                target=side_effect_target(effect, thread),
                ref=f"side_effect:{effect.pk}",
            )
        )
    seconds = list(
        Event.objects.filter(
            TOOL_CALL_INDEXED,
            thread=thread,
            kind=EventKind.TOOL_RESULT,
            data__has_key=DUPLICATE_OF,
        )
        .values_list("seq", "data__call_seq")
        .order_by("seq")
    )
    records = {
        e.call_seq: e
        for e in SideEffect.objects.filter(
            thread=thread, call_seq__in={call_seq for _, call_seq in seconds}
        )
    }
    for seq, call_seq in seconds:
        record = records.get(call_seq)
        found.append(
            problem(
                kind=SECOND_RESULT,
                text=f"Event #{seq} is a second result for call #{call_seq}, which already had "
                "one: did the tool run twice?",
                action="Look at the side effect" if record else "Look at the result",
                target=side_effect_target(record, thread) if record else f"{timeline}?seq={seq}",
                ref=f"event:{seq}",
            )
        )
    if flagged.run_status == STALLED:
        found.append(_agent_stalled(flagged))
    if flagged.has_pending:
        approvals = ApprovalRequest.objects.filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
            thread=thread,
            status=ApprovalStatus.PENDING,
        ).order_by("pk")
        for approval in approvals.only("pk", "action", "tool_name", "arguments"):
            found.append(
                problem(
                    kind=APPROVAL_PENDING,
                    text=f"Approval pending: {approval_title(approval)}.",
                    action="Review",
                    target=approval_target(approval, thread),
                    ref=f"approval:{approval.pk}",
                )
            )
    if (
        flagged.fold_task_id
        and TaskRun.objects.filter(pk=flagged.fold_task_id, state=TaskState.FAILURE).exists()
    ):
        found.append(
            problem(
                kind=FOLD_FAILED,
                text="The last fold failed before it could be verified.",
                action="Fold again from the summaries tab",
                target=summaries,
                ref=f"task:{flagged.fold_task_id}",
            )
        )
    if flagged.has_rejected:
        rejected = (
            SummaryVersion.objects.filter(
                thread=thread, phase=SummaryPhase.REJECTED, version__gt=flagged.head_version
            )
            .order_by("-version")
            .values_list("version", flat=True)
            .first()
        )
        found.append(
            problem(
                kind=FOLD_REJECTED,
                text=f"Candidate v{rejected} failed verification; the head stays "
                + (f"v{flagged.head_version}." if flagged.head_version else "no summary."),
                action="See why, or fold again",
                target=reverse("summary-detail", args=[thread.pk, rejected])
                if rejected
                else summaries,
                ref=f"summary:{rejected}",
            )
        )
    if flagged.budget_use is not None and flagged.history_tokens > flagged.high_tokens:
        found.append(
            problem(
                kind=OVER_BUDGET,
                text=f"History is {flagged.budget_use:.0%} of the budget, above the high "
                "watermark.",
                action="Fold now from the summaries tab",
                target=summaries,
                ref=f"thread:{thread.pk}",
            )
        )
    if flagged.pinned_at is not None:
        found.append(
            problem(
                kind=PINNED,
                text=f"Pinned by {flagged.pinned_by}: {flagged.pin_reason}. No fold runs "
                "until the pin is released.",
                action="See the pin",
                target="#thread-repair",
                ref=f"thread:{thread.pk}",
            )
        )
    return in_severity_order(found)
