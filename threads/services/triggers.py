"""Fold triggers (docs/pipeline.md, "Budget and triggers"), evaluated after every append that
commits.

- capacity: history H (rendered summary + events after it) > high × B, with the thread's own
  budget;
- structural: a side-effecting call got its answer (its unit can close), an approval was
  decided, a correction was annotated, an event the head summary covers was retracted (the
  next fold rebuilds the content without it: threads.services.fold_preparation.rebuild_start);
- risk: a side-effecting result timed out, or a tool reported a value for a key that
  contradicts another tool value (in the batch or in the head summary).

The first matching kind in the order risk, structural, capacity names the trigger; the reason
lists everything that matched. `fold_request` keeps at most one fold in flight per thread.

Whether to fold again once a fold is decided is answered here too (`after_fold`): one retry of a
rejected candidate, the rest of a capped backlog, and the triggers raised by events that
arrived while the fold ran. `install` registers both hooks.

A pinned thread (docs/repairs.md, "Rollback") is asked for no fold: its triggers are looked at again
when the pin is released (`fold_if_due`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db.models import Sum

from threads.domain.budget import needs_fold, thread_budget
from threads.domain.tokens import MESSAGE_OVERHEAD_TOKENS
from threads.domain.units import last_closed_boundary, split_units
from threads.models import Event, EventKind, SummaryVersion, Thread
from threads.services import events as event_service
from threads.services import fold_preparation, folding
from threads.services.event_rows import HOOK_CALL_SIDE_EFFECT
from threads.services.fold_preparation import event_dicts_for_fold
from threads.services.fold_requests import ThreadPinned, fold_in_flight, fold_request
from threads.services.folding import FoldResult, Outcome

logger = logging.getLogger(__name__)

PRIORITY = ("risk", "structural", "capacity")


def _data(event: Event | dict[str, Any]) -> dict[str, Any]:
    return event.data if isinstance(event, Event) else event


def _kind(event: Event | dict[str, Any]) -> str:
    return event.kind if isinstance(event, Event) else event["kind"]


def _seq(event: Event | dict[str, Any]) -> int:
    return event.seq if isinstance(event, Event) else event["seq"]


def event_triggers(
    *, thread: Thread, events: Iterable[Event | dict[str, Any]]
) -> list[tuple[str, str]]:
    """Structural and risk reasons raised by newly appended events: [(kind, reason)]."""
    events = list(events)
    reasons: list[tuple[str, str]] = []
    # Whether a result's call has a side effect: the append said so for its new results
    # (HOOK_CALL_SIDE_EFFECT); only other results' calls are read.
    results = [_data(e) for e in events if _kind(e) == EventKind.TOOL_RESULT]
    side_effect_calls = {r["call_seq"] for r in results if r.get(HOOK_CALL_SIDE_EFFECT) is True}
    unknown = [r["call_seq"] for r in results if r.get(HOOK_CALL_SIDE_EFFECT) is None]
    if unknown:
        side_effect_calls.update(
            Event.objects.filter(
                thread=thread,
                seq__in=unknown,
                kind=EventKind.TOOL_CALL,
                data__side_effect=True,
            ).values_list("seq", flat=True)
        )
    tool_values: dict[str, tuple[Any, int]] = {}
    for event in events:
        kind, data, seq = _kind(event), _data(event), _seq(event)
        if kind == EventKind.TOOL_RESULT and data["call_seq"] in side_effect_calls:
            if data["status"] == "timeout":
                reasons.append(
                    (
                        "risk",
                        f"side effect #{data['tool_call_id']} timed out "
                        f"(seq {seq}): outcome unknown",
                    )
                )
            else:
                reasons.append(
                    (
                        "structural",
                        f"side effect #{data['tool_call_id']} {data['status']} (seq {seq})",
                    )
                )
        elif kind == EventKind.SIDE_EFFECT_RESOLUTION:
            reasons.append(
                (
                    "structural",
                    f"side effect #{data['tool_call_id']} resolved {data['status']} (seq {seq})",
                )
            )
        elif kind == EventKind.APPROVAL_DECISION:
            reasons.append(("structural", f"approval decided: {data['decision']} (seq {seq})"))
        elif kind == EventKind.ANNOTATION and data.get("type") == "correction":
            reasons.append(("structural", f"correction annotated (seq {seq})"))
        elif kind == EventKind.RETRACTION and data["retracts"] <= thread.covered_until:
            reasons.append(
                (
                    "structural",
                    f"retraction of a summarised event #{data['retracts']} (seq {seq})",
                )
            )
        if kind == EventKind.TOOL_RESULT:
            for fact in data.get("verified_facts") or []:
                key, value = str(fact.get("key")), fact.get("value")
                earlier = tool_values.get(key)
                if earlier is not None and earlier[0] != value:
                    reasons.append(
                        (
                            "risk",
                            f"conflicting tool results for {key!r} (seq {earlier[1]} and {seq})",
                        )
                    )
                tool_values[key] = (value, seq)
    reasons.extend(_conflicts_with_summary(thread, tool_values))
    return reasons


def _conflicts_with_summary(
    thread: Thread, tool_values: dict[str, tuple[Any, int]]
) -> list[tuple[str, str]]:
    if not tool_values or not thread.head_version:
        return []
    content = (
        SummaryVersion.objects.filter(thread=thread, version=thread.head_version)
        .values_list("content", flat=True)
        .first()
        or {}
    )
    reasons = []
    for fact in content.get("facts") or []:
        key = str(fact.get("key"))
        if (
            fact.get("status") == "active"
            and fact.get("authority") == "tool"
            and key in tool_values
            and tool_values[key][0] != fact.get("value")
        ):
            reasons.append(
                (
                    "risk",
                    f"tool result at seq {tool_values[key][1]} contradicts the "
                    f"summary's tool value for {key!r}",
                )
            )
    return reasons


def head_summary_tokens(thread: Thread) -> int:
    """The tokens of the thread's head summary (0 before its first fold)."""
    if not thread.head_version:
        return 0
    return int(
        SummaryVersion.objects.filter(thread=thread, version=thread.head_version)
        .values_list("tokens", flat=True)
        .first()
        or 0
    )


def history_tokens(*, thread: Thread, enough: float | None = None) -> int:
    """H: tokens of the head summary's rendered text plus stored counts after it.

    With `enough`, stops reading once H surely exceeds it: every event costs at least
    MESSAGE_OVERHEAD_TOKENS, so more events after the summary than `enough` / that minimum
    exceed it without summing anything (retraction and reset markers count 0, but they are
    rare enough that folding a little early on their account does no harm). A thread whose
    folds are not running (no worker, a rejected candidate) then costs a bounded read per
    append, not a scan of its backlog.
    """
    summary = head_summary_tokens(thread)
    backlog = thread.last_seq - thread.covered_until
    if enough is not None and summary + backlog * MESSAGE_OVERHEAD_TOKENS > enough:
        return summary + backlog * MESSAGE_OVERHEAD_TOKENS
    if thread.covered_until == 0:
        return summary + thread.token_total  # nothing folded yet: every event is history
    after = Event.objects.filter(thread=thread, seq__gt=thread.covered_until).aggregate(
        total=Sum("token_count")
    )["total"]
    return summary + int(after or 0)


def capacity_trigger(*, thread: Thread) -> tuple[str, str] | None:
    budget = thread_budget(thread)
    threshold = thread.high_watermark * budget.available
    history = history_tokens(thread=thread, enough=threshold)
    if not needs_fold(history=history, budget=budget, high=thread.high_watermark):
        return None
    summary = head_summary_tokens(thread)
    if summary > fold_preparation.summary_limit(budget, thread.low_watermark):
        # A summary that had to stay above low × available (what it must keep: constraints,
        # tool state, …) would otherwise be folded again at every append, gaining nothing:
        # the events after it fill the room between the watermarks first.
        after = history_tokens(thread=thread) - summary
        if after <= (thread.high_watermark - thread.low_watermark) * budget.available:
            return None
    return (
        "capacity",
        f"history ≥ {history} tokens > {thread.high_watermark:g} × available {budget.available}",
    )


def choose_trigger(reasons: list[tuple[str, str]]) -> dict[str, Any] | None:
    if not reasons:
        return None
    kind = min((k for k, _ in reasons), key=PRIORITY.index)
    return {"kind": kind, "reason": "; ".join(r for _, r in reasons)}


def after_append(thread_id: Any, events: list[Event | dict[str, Any]]) -> None:
    """The hook on threads.services.events.after_append_hooks (runs after commit).

    The events are stored by then: a failure here is logged and never turns the agent's
    successful append into an error (the next append, or a manual fold, asks again)."""
    try:
        _after_append(thread_id, events)
    except Exception:
        logger.exception("fold triggers failed for thread %s", thread_id)


def _after_append(thread_id: Any, events: list[Event | dict[str, Any]]) -> None:
    thread = (
        thread_id
        if isinstance(thread_id, Thread)
        else Thread.objects.select_related("workspace").filter(pk=thread_id).first()
    )
    if thread is None or thread.pinned_at is not None or fold_in_flight(thread):
        # A queued or running fold re-checks the triggers for everything that arrived
        # meanwhile once it commits, so an append need not take the thread's lock again.
        return
    _fold_if_triggered(thread, events)


def _fold_if_triggered(thread: Thread, events: Iterable[Event | dict[str, Any]]) -> None:
    """Request a fold when these events, or the thread's history size, call for one."""
    reasons = event_triggers(thread=thread, events=events)
    capacity = capacity_trigger(thread=thread)
    if capacity is not None:
        reasons.append(capacity)
    trigger = choose_trigger(reasons)
    if trigger is not None:
        _request(thread, trigger)


def _request(thread: Thread, trigger: dict[str, Any]) -> None:
    """Ask for a fold; a thread pinned meanwhile answers ThreadPinned, and waits for its
    release (fold_if_due) rather than failing the caller."""
    try:
        fold_request(thread=thread, trigger=trigger)
    except ThreadPinned:
        logger.info("thread %s is pinned: no fold requested (%s)", thread.pk, trigger["kind"])


def after_fold(thread_id: Any, trigger: dict[str, Any], result: FoldResult) -> None:
    """The hook on threads.services.folding.after_fold_hooks: whether to fold again."""
    version = result.version
    if version is None:
        return
    thread = Thread.objects.get(pk=thread_id)
    if thread.pinned_at is not None:
        return  # looked at again when the pin is released (fold_if_due)
    if result.outcome == Outcome.REJECTED:
        # Risk trigger "a failed verification": one retry (an llm backend may do better), never
        # a loop — a retry that fails again stays rejected and waits for people.
        if not trigger.get("retry_of"):
            failed = [c["name"] for c in version.verification["checks"] if not c["ok"]]
            _request(
                thread,
                {
                    "kind": "risk",
                    "retry_of": version.version,
                    "reason": f"verification of v{version.version} failed: {', '.join(failed)}",
                },
            )
        return
    if result.outcome != Outcome.COMMITTED:
        return
    # A capped fold (see FOLD_MAX_EVENTS) leaves the rest of a long backlog: the same trigger
    # carries on with it. The cap counts from the head the fold was built on (a rebuild's
    # covered_from lies before it).
    base_covered = version.covered_from - 1
    if version.base_version:
        base_covered = max(
            base_covered,
            SummaryVersion.objects.filter(thread=thread, version=version.base_version)
            .values_list("covered_until", flat=True)
            .first()
            or 0,
        )
    if thread.last_seq - base_covered > fold_preparation.FOLD_MAX_EVENTS:
        reason = str(trigger.get("reason", "")).split(" (continued")[0]
        _request(
            thread,
            {
                **trigger,
                "reason": f"{reason} (continued: {thread.last_seq - thread.covered_until} "
                f"events after covered_until {thread.covered_until})",
            },
        )
        return
    _refold_if_triggered(thread)


def _refold_if_triggered(thread: Thread) -> None:
    """Triggers raised by events that arrived while this fold ran were answered by the fold
    in flight, which stopped before them: look at them again now, and fold them if they
    call for it and something after the new head may be folded."""
    if thread.last_seq <= thread.covered_until:
        return
    tail = event_dicts_for_fold(thread.pk, after=thread.covered_until, until=thread.last_seq)
    if last_closed_boundary(split_units(tail), after=thread.covered_until) <= thread.covered_until:
        return
    _fold_if_triggered(thread, tail)


def fold_if_due(thread: Thread) -> None:
    """After a pin is released: fold what its triggers (those of the events after the head,
    and the history's size) call for, as an append would have had the thread not been
    pinned. Never raises: the release stands, and the next append asks again."""
    try:
        fresh = Thread.objects.select_related("workspace").get(pk=thread.pk)
        if fresh.pinned_at is None and not fold_in_flight(fresh):
            _refold_if_triggered(fresh)
    except Exception:
        logger.exception("fold triggers failed for thread %s after its release", thread.pk)


def install() -> None:
    """Register the hooks once (AppConfig.ready may run more than once in tests)."""
    if after_append not in event_service.after_append_hooks:
        event_service.after_append_hooks.append(after_append)
    if after_fold not in folding.after_fold_hooks:
        folding.after_fold_hooks.append(after_fold)
