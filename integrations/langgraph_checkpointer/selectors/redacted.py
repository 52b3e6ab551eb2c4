"""Mirrored messages whose events were redacted, read back (docs/langgraph.md, "Redaction"): a
redacted event keeps its seq, kind, role and tool call id, and nothing of the message's JSON
form, so the message is rebuilt from what the log still knows (`redacted_message`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import (
    message_from_event,
    message_is_redacted,
    redacted_message,
)
from integrations.langgraph_checkpointer.models import LanggraphMessage
from threads.models import Event, EventKind, Thread


def langgraph_redacted_forms(thread: Thread, seqs: Collection[int]) -> dict[int, dict[str, Any]]:
    """seq -> the JSON form of the redacted message each of these events carried: its id from
    the message index (else the event's client_event_id), an AI message's tool calls from the
    tool_call events after it (those keep their ids even when redacted themselves)."""
    if not seqs:
        return {}
    index = {
        row.seq: row for row in LanggraphMessage.objects.filter(thread=thread, seq__in=set(seqs))
    }
    events = Event.objects.filter(thread=thread, seq__in=set(seqs)).values_list(
        "seq", "kind", "role", "tool_call_id", "client_event_id"
    )
    forms: dict[int, dict[str, Any]] = {}
    for seq, kind, role, tool_call_id, client_event_id in events:
        row = index.get(seq)
        calls: list[dict[str, Any]] = []
        if kind == EventKind.MESSAGE and row is not None and row.last_seq > seq:
            calls = [
                {"id": call_id, "name": name, "args": args}
                for call_id, name, args in Event.objects.filter(
                    thread=thread,
                    kind=EventKind.TOOL_CALL,
                    seq__gt=seq,
                    seq__lte=row.last_seq,
                )
                .order_by("seq")
                .values_list("tool_call_id", "data__tool_name", "data__arguments")
            ]
        forms[seq] = redacted_message(
            kind=kind,
            role=role,
            message_id=row.message_id if row is not None else str(client_event_id or ""),
            tool_call_id=tool_call_id,
            tool_calls=calls,
        )
    return forms


def langgraph_forms_of_events(
    thread: Thread, rows: Collection[tuple[int, str, Any, Any]]
) -> dict[int, dict[str, Any]]:
    """seq -> the JSON form of the message each (seq, kind, data, metadata) event carries,
    redacted ones included."""
    forms = {
        seq: message_from_event(kind, data, metadata)
        for seq, kind, data, metadata in rows
        if not message_is_redacted(metadata)
    }
    missing = [seq for seq, _, _, metadata in rows if message_is_redacted(metadata)]
    forms.update(langgraph_redacted_forms(thread, missing))
    return forms
