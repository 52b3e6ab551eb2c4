"""How an event reads to a model: the text whose tokens are counted at ingest and the
working context is measured by. Deterministic: same event, same text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threads.domain.canonical import canonical_text
from threads.domain.redaction import REDACTED, readable


def content_text(content: Any) -> str:
    """Plain text of a message's content: a string, or a list of parts."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            text = part.get("text")
            parts.append(text if isinstance(text, str) else canonical_text(part))
    return "\n".join(parts)


def render_event(event: dict[str, Any], texts: Mapping[str, str] | None = None) -> str:
    """`texts`, when given, holds the canonical JSON text of some of the event's fields (the
    append path has it already): those are not encoded again."""

    def json_of(name: str) -> str:
        if texts is not None and name in texts:
            return texts[name]
        return canonical_text(event[name])

    if REDACTED in event:
        # Read as its placeholder (docs/event-log.md, "Redaction"): nothing of the content.
        event, texts = readable(event), None
    kind = event["kind"]
    if kind == "message":
        return f"{event['role']}: {content_text(event['content'])}"
    if kind == "tool_call":
        return f"call {event['tool_name']}#{event['tool_call_id']} {json_of('arguments')}"
    if kind == "tool_result":
        head = f"result #{event['tool_call_id']} {event['status']}"
        body = event.get("result")
        text = body if isinstance(body, str) else ("" if body is None else json_of("result"))
        if event.get("verified_facts"):
            text += " verified " + json_of("verified_facts")
        return f"{head} {text}".rstrip()
    if kind == "annotation":
        return f"{event['type']} ({event['authority']}): {json_of('payload')}"
    if kind == "approval_request":
        return f"approval requested: {event['action']} {json_of('arguments')}"
    if kind == "approval_decision":
        return f"approval {event['decision']}: {event.get('reason', '')}".rstrip()
    if kind == "side_effect_resolution":
        return (
            f"side effect #{event['tool_call_id']} resolved {event['status']}: "
            f"{event.get('evidence', '')}"
        )
    if kind == "retraction":
        return f"retracts #{event['retracts']}"
    if kind == "reset":
        return "reset"
    return canonical_text(event)
