"""Events of one thread: windows of the log, single events, and what links to them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import (
    F,
    QuerySet,
    Sum,
)

from threads.domain.errors import NotFound
from threads.domain.events import stored_form
from threads.domain.timing import CallTiming, call_timing
from threads.models import (
    TOOL_CALL_INDEXED,
    ApprovalRequest,
    Event,
    EventKind,
    SideEffect,
    Thread,
)


def event_window(*, thread: Thread, from_seq: int, limit: int) -> list[Event]:
    """Events from_seq .. from_seq+limit-1, in seq order: never the whole log."""
    return list(
        Event.objects.filter(thread=thread, seq__gte=from_seq, seq__lt=from_seq + limit).order_by(
            "seq"
        )
    )


def event_get(*, thread: Thread, seq: int) -> Event:
    event = Event.objects.filter(thread=thread, seq=seq).first()
    if event is None:
        raise NotFound("event not found")
    return event


def events_by_seqs(*, thread: Thread, seqs: set[int]) -> list[Event]:
    return list(Event.objects.filter(thread=thread, seq__in=seqs).order_by("seq"))


def closing_events_for_calls(
    *, thread: Thread, call_ids: set[str], after: int
) -> list[tuple[int, str, int | None]]:
    """(seq, kind, call_seq) of results and resolutions naming these tool call ids."""
    if not call_ids:
        return []
    rows = (
        Event.objects.filter(
            TOOL_CALL_INDEXED,
            thread=thread,
            tool_call_id__in=call_ids,
            seq__gt=after,
            kind__in=(EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION),
        )
        .values_list("seq", "kind", "data__call_seq")
        .order_by()
    )
    # Sorted here: asked for the order, SQLite without table statistics walks the thread's
    # (thread, seq) index instead of probing the ids (docs/scale.md, "What one database holds").
    return sorted(rows)


@dataclass
class CallClosings:
    """What closes a page's tool calls: call seq -> the seqs of its results and resolutions,
    and call seq -> its timing (docs/dashboard.md, "The time axis")."""

    closing: dict[int, list[int]] = field(default_factory=dict)
    timings: dict[int, CallTiming] = field(default_factory=dict)


def call_closings(
    *, thread: Thread, calls: Iterable[Event], after: int, now: datetime
) -> CallClosings:
    """The results and resolutions of these tool call events, wherever they are after `after`,
    with each call's duration (call to its first result) computed from the one query that finds
    them: a page of thousands of events costs no query per call."""
    calls = [call for call in calls if call.kind == EventKind.TOOL_CALL]
    if not calls:
        return CallClosings()
    by_seq = {call.seq: call for call in calls}
    rows = Event.objects.filter(
        TOOL_CALL_INDEXED,
        thread=thread,
        tool_call_id__in={call.tool_call_id for call in calls},
        seq__gt=after,
        kind__in=(EventKind.TOOL_RESULT, EventKind.SIDE_EFFECT_RESOLUTION),
    ).values_list("seq", "kind", "data__call_seq", "created_at", "data__status")
    found = CallClosings()
    first_result: dict[int, tuple[int, datetime, str]] = {}
    resolved: set[int] = set()
    # Sorted here, as closing_events_for_calls does (docs/scale.md, "What one database holds").
    for seq, kind, call_seq, created_at, status in sorted(rows.order_by()):
        if call_seq not in by_seq:
            continue
        found.closing.setdefault(call_seq, []).append(seq)
        if kind == EventKind.TOOL_RESULT:
            first_result.setdefault(call_seq, (seq, created_at, str(status or "")))
        else:
            resolved.add(call_seq)
    for seq, call in by_seq.items():
        result = first_result.get(seq)
        found.timings[seq] = call_timing(
            called_at=call.created_at,
            result_at=result[1] if result else None,
            result_status=result[2] if result else None,
            result_seq=result[0] if result else None,
            resolved=seq in resolved,
            now=now,
        )
    return found


def last_reset_at(*, thread: Thread, until: int) -> int:
    """Seq of the last reset at or before `until`, 0 when there is none."""
    seq = (
        Event.objects.filter(thread=thread, kind=EventKind.RESET, seq__lte=until)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return seq or 0


def retractions_by_target(*, thread: Thread, targets: set[int]) -> dict[int, int]:
    """target seq -> seq of the retraction that names it, for these targets (a retraction
    always comes after its target, so only the log after the lowest one is read)."""
    if not targets:
        return {}
    rows = Event.objects.filter(
        thread=thread, seq__gt=min(targets), kind=EventKind.RETRACTION
    ).values_list("seq", "data__retracts")
    return {target: seq for seq, target in rows if target in targets}


def retracted_calls(*, thread: Thread, calls: set[int], until: int) -> set[int]:
    """Of these calls, those a retraction at or before `until` takes out: named itself, or its
    result named (a call and its result are one item, threads.domain.markers.retracted_items).
    One query when no retraction came after the first of them, two otherwise."""
    if not calls:
        return set()
    targets = {
        target
        for target in Event.objects.filter(
            thread=thread, kind=EventKind.RETRACTION, seq__gt=min(calls), seq__lte=until
        ).values_list("data__retracts", flat=True)
        if isinstance(target, int)
    }
    if not targets:
        return set()
    of_results = Event.objects.filter(
        thread=thread, kind=EventKind.TOOL_RESULT, seq__in=targets
    ).values_list("data__call_seq", flat=True)
    return calls & (targets | set(of_results))


def side_effects_for_calls(*, thread: Thread, call_seqs: list[int]) -> dict[int, SideEffect]:
    return {s.call_seq: s for s in SideEffect.objects.filter(thread=thread, call_seq__in=call_seqs)}


def approvals_for_requests(*, thread: Thread, seqs: list[int]) -> dict[int, ApprovalRequest]:
    return {
        a.request_event.seq: a
        for a in ApprovalRequest.objects.filter(thread=thread, request_event__seq__in=seqs)
        .select_related("request_event", "decision_event", "decided_by")
        # The timeline shows a request's status and expiry; its arguments (as long as the
        # request event's body, 1 MiB at worst) and the events' data are not read for that.
        .defer("arguments", "request_event__data", "decision_event__data")
    }


def event_token_buckets(*, thread: Thread, buckets: int = 120) -> tuple[int, list[tuple[int, int]]]:
    """(bucket width, [(bucket index, tokens)]) over the whole log, summed in the database."""
    width = max(1, -(-thread.last_seq // buckets))
    rows = (
        Event.objects.filter(thread=thread)
        .annotate(bucket=(F("seq") - 1) / width)
        .order_by()
        .values("bucket")
        .annotate(tokens=Sum("token_count"))
        .order_by("bucket")
        .values_list("bucket", "tokens")
    )
    return width, [(int(b), int(t or 0)) for b, t in rows]


# The columns of an event's stored form, then what the server derived (`secrets`: the flags
# of docs/event-log.md, "Secrets at ingest", NULL and left out for most events).
STORED_COLUMNS = ("seq", "kind", "created_at", "client_event_id", "metadata", "data")
EVENT_DICT_COLUMNS = (*STORED_COLUMNS, "token_count", "hash", "secrets")
DERIVED_COLUMNS = EVENT_DICT_COLUMNS[len(STORED_COLUMNS) :]


def stored_event(row: Sequence[Any], derived: Sequence[str]) -> dict[str, Any]:
    """A row of STORED_COLUMNS followed by the `derived` columns, as the event in its stored
    form plus the derived columns under their names, those that are NULL left out."""
    seq, kind, created_at, client_event_id, metadata, data, *values = row
    event = stored_form(
        seq=seq,
        kind=kind,
        created_at=created_at,
        client_event_id=client_event_id,
        metadata=metadata,
        data=data,
    )
    event.update(
        (name, value) for name, value in zip(derived, values, strict=True) if value is not None
    )
    return event


def event_range(*, thread_id: Any, after: int = 0, until: int | None = None) -> QuerySet[Event]:
    """A thread's events with seq in (after, until], in seq order."""
    rows = Event.objects.filter(thread_id=thread_id, seq__gt=after)
    if until is not None:
        rows = rows.filter(seq__lte=until)
    return rows.order_by("seq")


def event_dict(event: Event) -> dict[str, Any]:
    """One event in its stored form (what the chain covers) plus token_count and hash, and
    its `secrets` when it has some: the form the API answers, the fold reads and the verifier
    checks."""
    return stored_event([getattr(event, column) for column in EVENT_DICT_COLUMNS], DERIVED_COLUMNS)


# With chain v2's salt and digest, for a reader that verifies the chain over what it read (the
# fold's verification): never in an answer.
CHAIN_DERIVED_COLUMNS = (*DERIVED_COLUMNS, "content_salt", "content_digest")


def event_dicts(
    thread: Thread,
    *,
    after: int = 0,
    until: int | None = None,
    limit: int | None = None,
    chain_fields: bool = False,
) -> list[dict[str, Any]]:
    """Events with seq in (after, until], in seq order, as event_dict builds them, read as
    plain values (no model instances). `chain_fields`: with `content_salt` and
    `content_digest` where the event has them."""
    derived = CHAIN_DERIVED_COLUMNS if chain_fields else DERIVED_COLUMNS
    rows = event_range(thread_id=thread.pk, after=after, until=until)
    values = rows.values_list(*STORED_COLUMNS, *derived)
    if limit is not None:
        values = values[:limit]
    return [stored_event(row, derived) for row in values.iterator(chunk_size=2000)]
