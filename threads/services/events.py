"""Appending to a thread's event log (DESIGN §2).

Numbering and chaining happen under the thread's lock: `select_for_update()` on the thread row on
PostgreSQL; on SQLite every transaction is BEGIN IMMEDIATE, which serialises writers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from threads.domain import chain, tokens
from threads.domain.errors import IdempotencyConflict, InvalidEvent, NoOpenToolCall
from threads.domain.events import NewEvent, parse_time, stored_form
from threads.domain.render import render_event
from threads.models import (
    ApprovalRequest,
    Event,
    EventKind,
    SideEffect,
    SideEffectStatus,
    Thread,
)
from threads.services.chainkey import chain_key

RESULT_TO_SIDE_EFFECT = {
    "succeeded": SideEffectStatus.SUCCEEDED,
    "failed": SideEffectStatus.FAILED,
    "cancelled": SideEffectStatus.CANCELLED,
    # A timeout says nothing about whether the effect happened: unknown, never failed.
    "timeout": SideEffectStatus.UNKNOWN,
}

# Called after commit with (thread_id, appended events); the pipeline registers its triggers.
after_append_hooks: list[Callable[[Any, list[Event]], None]] = []


@dataclass
class Appended:
    event: Event
    created: bool  # False when an idempotent replay answered with the original


def event_token_count(stored: dict[str, Any], encoding: str) -> int:
    return tokens.count_text(render_event(stored), encoding) + tokens.MESSAGE_OVERHEAD_TOKENS


def _open_calls(thread: Thread, tool_call_ids: set[str]) -> dict[str, list[int]]:
    """Seqs of calls with no result yet, per id, newest last."""
    if not tool_call_ids:
        return {}
    rows = Event.objects.filter(
        thread=thread,
        tool_call_id__in=tool_call_ids,
        kind__in=(EventKind.TOOL_CALL, EventKind.TOOL_RESULT),
    ).values_list("kind", "seq", "data").order_by("seq")
    calls: dict[str, list[int]] = {}
    answered: set[int] = set()
    by_seq: dict[int, str] = {}
    for kind, seq, data in rows:
        if kind == EventKind.TOOL_CALL:
            by_seq[seq] = data["tool_call_id"]
        else:
            answered.add(data["call_seq"])
    for seq, call_id in by_seq.items():
        if seq not in answered:
            calls.setdefault(call_id, []).append(seq)
    return calls


def event_append_batch(
    *, thread: Thread, new_events: Sequence[NewEvent], lock: bool = True
) -> list[Appended]:
    """Append events to a thread, all or nothing.

    Locks the thread row (select_for_update) before numbering anything. Idempotent by
    client_event_id: the same id and body answers with the original event, the same id with
    another body raises IdempotencyConflict. A tool_result binds to the latest call with its
    tool_call_id that has no result yet, or raises NoOpenToolCall.
    """
    with transaction.atomic(durable=lock):
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        appended = _append_locked(locked, new_events)
    new = [a.event for a in appended if a.created]
    if new:
        for hook in after_append_hooks:
            transaction.on_commit(lambda hook=hook: hook(locked.pk, new))  # type: ignore[misc]
    thread.last_seq, thread.chain_head = locked.last_seq, locked.chain_head
    thread.token_total = locked.token_total
    return appended


def _append_locked(thread: Thread, new_events: Sequence[NewEvent]) -> list[Appended]:
    key = chain_key()
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    existing = {
        e.client_event_id: e
        for e in Event.objects.filter(thread=thread, client_event_id__in=client_ids)
    } if client_ids else {}
    open_calls = _open_calls(
        thread, {e.data["tool_call_id"] for e in new_events if e.kind == "tool_result"}
    )
    seq, head = thread.last_seq, thread.chain_head
    out: list[Appended] = []
    to_insert: list[Event] = []
    stored_forms: list[dict[str, Any]] = []
    seen_in_batch: dict[str, Event] = {}
    now = timezone.now()
    for index, new in enumerate(new_events):
        where = f"events[{index}]" if len(new_events) > 1 else "event"
        if new.client_event_id is not None:
            original = existing.get(new.client_event_id) or seen_in_batch.get(new.client_event_id)
            if original is not None:
                if original.request_digest != new.digest:
                    raise IdempotencyConflict(
                        f"client_event_id {new.client_event_id!r} was already used with "
                        f"another body (seq {original.seq})",
                        fields={where: "client_event_id reused with a different body"},
                    )
                out.append(Appended(original, created=False))
                continue
        seq += 1
        data = dict(new.data)
        if new.kind == "tool_result":
            pending = open_calls.get(data["tool_call_id"], [])
            if not pending:
                raise NoOpenToolCall(
                    f"no open tool call with tool_call_id {data['tool_call_id']!r} "
                    "in this thread",
                    fields={where: "tool_call_id has no open call"},
                )
            data["call_seq"] = pending.pop()
        elif new.kind == "tool_call":
            open_calls.setdefault(data["tool_call_id"], []).append(seq)
        elif new.kind == "annotation" and any(s >= seq for s in data.get("refers_to", [])):
            raise InvalidEvent(
                "refers_to names an event that does not exist yet",
                fields={where: f"refers_to must be below {seq}"},
            )
        created_at = new.created_at or now
        stored = stored_form(
            seq=seq, kind=new.kind, created_at=created_at, client_event_id=new.client_event_id,
            metadata=new.metadata, data=data,
        )
        head = chain.link_hash(head, chain.event_canonical(stored), key)
        event = Event(
            thread=thread, seq=seq, kind=new.kind, created_at=created_at,
            client_event_id=new.client_event_id, metadata=new.metadata, data=data,
            role=data.get("role", ""), tool_call_id=data.get("tool_call_id", ""),
            request_digest=new.digest, hash=head,
        )
        stored_forms.append(stored)
        to_insert.append(event)
        out.append(Appended(event, created=True))
        if new.client_event_id is not None:
            seen_in_batch[new.client_event_id] = event
    if not to_insert:
        return out
    counts = tokens.count_texts([render_event(s) for s in stored_forms], thread.encoding)
    for event, count in zip(to_insert, counts, strict=True):
        event.token_count = count + tokens.MESSAGE_OVERHEAD_TOKENS
    Event.objects.bulk_create(to_insert)
    _record_side_effects_and_approvals(thread, to_insert)
    thread.last_seq, thread.chain_head = seq, head
    thread.token_total += sum(e.token_count for e in to_insert)
    Thread.objects.filter(pk=thread.pk).update(
        last_seq=seq, chain_head=head, token_total=thread.token_total, updated_at=now
    )
    return out


def _record_side_effects_and_approvals(thread: Thread, events: list[Event]) -> None:
    new_effects: list[SideEffect] = []
    approvals: list[ApprovalRequest] = []
    results: list[Event] = []
    for event in events:
        if event.kind == EventKind.TOOL_CALL and event.data.get("side_effect"):
            new_effects.append(SideEffect(
                thread=thread, call_event=event, tool_call_id=event.data["tool_call_id"],
                tool_name=event.data["tool_name"],
                idempotency_key=event.data["idempotency_key"],
                status=SideEffectStatus.RUNNING, call_seq=event.seq,
            ))
        elif event.kind == EventKind.TOOL_RESULT:
            results.append(event)
        elif event.kind == EventKind.APPROVAL_REQUEST:
            approvals.append(ApprovalRequest(
                thread=thread, request_event=event, action=event.data["action"],
                tool_name=event.data.get("tool_name", ""), arguments=event.data["arguments"],
                expires_at=parse_time(event.data["expires_at"])
                if event.data.get("expires_at") else None,
            ))
    if new_effects:
        SideEffect.objects.bulk_create(new_effects)
    if approvals:
        ApprovalRequest.objects.bulk_create(approvals)
    if results:
        by_call = {r.data["call_seq"]: r for r in results}
        for effect in SideEffect.objects.filter(thread=thread, call_seq__in=by_call):
            result = by_call[effect.call_seq]
            effect.status = RESULT_TO_SIDE_EFFECT[result.data["status"]]
            effect.result_seq = result.seq
            effect.request_id = result.data.get("request_id", "")
            effect.save(update_fields=["status", "result_seq", "request_id", "updated_at"])


def server_event_append(*, thread: Thread, kind: str, data: dict[str, Any],
                        metadata: dict[str, Any] | None = None) -> Event:
    """Append an event that ctxadmin writes itself (approval_decision, side_effect_resolution).

    Must run inside the caller's transaction, which holds the thread's lock.
    """
    new = NewEvent(kind=kind, data=data, metadata=metadata or {})
    return _append_locked(thread, [new])[0].event
