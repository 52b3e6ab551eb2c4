"""How an event reads to a model: the text whose tokens are counted at ingest and the
working context is measured by. Deterministic: same event, same text."""

from __future__ import annotations

import json
from typing import Any


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


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
            parts.append(text if isinstance(text, str) else _json(part))
    return "\n".join(parts)


def render_event(event: dict[str, Any]) -> str:
    kind = event["kind"]
    if kind == "message":
        return f"{event['role']}: {content_text(event['content'])}"
    if kind == "tool_call":
        return f"call {event['tool_name']}#{event['tool_call_id']} {_json(event['arguments'])}"
    if kind == "tool_result":
        head = f"result #{event['tool_call_id']} {event['status']}"
        body = event.get("result")
        text = body if isinstance(body, str) else ("" if body is None else _json(body))
        facts = event.get("verified_facts")
        if facts:
            text += " verified " + _json(facts)
        return f"{head} {text}".rstrip()
    if kind == "annotation":
        return f"{event['type']} ({event['authority']}): {_json(event['payload'])}"
    if kind == "approval_request":
        return f"approval requested: {event['action']} {_json(event['arguments'])}"
    if kind == "approval_decision":
        return f"approval {event['decision']}: {event.get('reason', '')}".rstrip()
    if kind == "side_effect_resolution":
        return (
            f"side effect #{event['tool_call_id']} resolved {event['status']}: "
            f"{event.get('evidence', '')}"
        )
    return _json(event)
