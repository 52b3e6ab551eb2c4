"""ctxadmin's own event objects, as agents post them to `/events/` — and `export_thread` files.

A conversation is a list of event objects (or an object holding them under `messages`). An
export file (a header line, then one stored event a line) is one conversation: the
server-derived fields (`seq`, `hash`, `token_count`, a result's `call_seq`, the chain's
`content_salt` and `content_digest`, the `secrets` flags) are dropped and recomputed on import,
and the events ctxadmin writes itself (approval decisions, side-effect resolutions) are left
out because agents cannot post them.
"""

from __future__ import annotations

from typing import Any

from integrations.trace_imports.readers.common import CallTracker, Conversation, Converted
from threads.domain.events import SERVER_KINDS

SERVER_FIELDS = (
    "seq",
    "hash",
    "token_count",
    "call_seq",
    "content_salt",
    "content_digest",
    "secrets",
)


def is_export(values: list[Any]) -> bool:
    """An export file read as JSONL: a header object, then event objects."""
    return bool(values) and isinstance(values[0], dict) and "ctxadmin_export" in values[0]


def export_as_conversation(values: list[Any]) -> Conversation:
    header = values[0]
    return Conversation(items=values[1:], id=header.get("external_id"), raw=header)


def convert(conversation: Conversation) -> Converted:
    out = Converted()
    tracker = CallTracker()
    for index, item in enumerate(conversation.items):
        if not isinstance(item, dict) or "kind" not in item:
            out.skipped.append(f"event {index}: not an event object")
            continue
        if item["kind"] in SERVER_KINDS:
            out.skipped.append(f"event {index}: {item['kind']} is written by ctxadmin itself")
            continue
        body = {k: v for k, v in item.items() if k not in SERVER_FIELDS}
        if body["kind"] == "tool_call" and body.get("tool_call_id"):
            tracker.call(body["tool_call_id"])
        elif body["kind"] == "tool_result" and not tracker.result(body.get("tool_call_id", "")):
            out.skipped.append(f"event {index}: result has no open call")
            continue
        elif body["kind"] == "annotation" and "refers_to" in body:
            # Seqs name events of the source thread; they hold only if nothing was skipped.
            if out.skipped:
                body.pop("refers_to")
        out.events.append(body)
    return out
