"""How an event reads on a page: a headline and a body, both plain text that the templates
autoescape. Agent-written content is never marked safe and is rendered inside hx-disable."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from threads.domain.redaction import REDACTED, UNREDACTABLE_KINDS
from threads.domain.render import content_text
from threads.domain.repeats import Repeat
from threads.models import Event, ThreadTool
from threads.selectors.event_bodies import BodyPrefix, event_whole

# Bodies longer than this (or of more lines) are collapsed behind <details>, on every page.
COLLAPSE_CHARS = 600
COLLAPSE_LINES = 12
PREVIEW_CHARS = 160
# A page carries at most this much of one body; the rest is one request away (the event's
# body route), so thirty 1 MiB tool results make a page of kilobytes, not of 30 MB.
BODY_SHOWN_CHARS = 4096


# JSON shorter than this on one line stays on one line.
COMPACT_CHARS = 100


def _json(value: Any) -> str:
    compact = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(compact) <= COMPACT_CHARS:
        return compact
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def headline_and_body(kind: str, data: dict[str, Any]) -> tuple[str, str]:
    if kind == "message":
        return data.get("role", ""), content_text(data.get("content"))
    if kind == "tool_call":
        return f"{data.get('tool_name', '')} #{data.get('tool_call_id', '')}", _json(
            data.get("arguments", {})
        )
    if kind == "tool_result":
        body: Any = data.get("result")
        text = body if isinstance(body, str) else ("" if body is None else _json(body))
        if data.get("verified_facts"):
            text += ("\n" if text else "") + "verified facts: " + _json(data["verified_facts"])
        return f"#{data.get('tool_call_id', '')} {data.get('status', '')}", text
    if kind == "annotation":
        return f"{data.get('type', '')} ({data.get('authority', '')})", _json(
            data.get("payload", {})
        )
    if kind == "approval_request":
        return str(data.get("action", "")), _json(data.get("arguments", {}))
    if kind == "approval_decision":
        return f"{data.get('decision', '')} by {data.get('actor', '')}", str(data.get("reason", ""))
    if kind == "side_effect_resolution":
        return (
            f"#{data.get('tool_call_id', '')} resolved {data.get('status', '')}",
            str(data.get("evidence", "")),
        )
    if kind == "retraction":
        return f"retracts #{data.get('retracts', '')}", ""
    if kind == "reset":
        return "reset: earlier events leave the working context", ""
    return kind, _json(data)


def is_long(body: str) -> bool:
    """Whether a page collapses this body (the timeline, the context and an expanded source
    alike)."""
    return len(body) > COLLAPSE_CHARS or body.count("\n") > COLLAPSE_LINES


def preview_line(body: str) -> str:
    """The first PREVIEW_CHARS of a body on one line: the summary of a collapsed body."""
    head = body[: PREVIEW_CHARS * 8]  # enough for the line; a 1 MiB body is not split whole
    one_line = " ".join(head.split())
    more = len(one_line) > PREVIEW_CHARS or bool(body[len(head) :].strip())
    return one_line[:PREVIEW_CHARS] + ("…" if more else "")


def body_cut(body: str, whole_size: int | None = None) -> dict[str, Any]:
    """The part of `body` a page shows, whether it was cut, and the whole body's size in
    UTF-8 bytes (what "show all" would load). `body` may be only a prefix of the body, then
    with the whole body's size, larger than the prefix's."""
    shown = body[:BODY_SHOWN_CHARS]
    shown_bytes = len(shown.encode())
    return {
        "shown": shown,
        "cut": len(shown) < len(body) or (whole_size or 0) > shown_bytes,
        "shown_bytes": shown_bytes,
        "size": whole_size or len(body.encode()),
    }


def page_prefix_chars() -> int:
    """How much of a long body string a page reads from the database: what it shows, and
    what its preview line looks at."""
    return max(BODY_SHOWN_CHARS, PREVIEW_CHARS * 8)


def _prefix_preview(prefix: str) -> str | None:
    """preview_line of a body longer than `prefix`, known from the prefix alone; None when
    the prefix cannot tell (its text after the preview's head is all blank)."""
    head = prefix[: PREVIEW_CHARS * 8]
    one_line = " ".join(head.split())
    if len(one_line) > PREVIEW_CHARS or prefix[len(head) :].strip():
        return one_line[:PREVIEW_CHARS] + "…"
    return None


def _prefixed_size(kind: str, data: dict[str, Any], prefix: BodyPrefix) -> int:
    """The whole body's size for an event whose body string came as `prefix`: the string's,
    plus what headline_and_body appends to it (a result's verified facts)."""
    if kind == "tool_result" and data.get("verified_facts"):
        return prefix.size + len(("\nverified facts: " + _json(data["verified_facts"])).encode())
    return prefix.size


def event_body(event: Event) -> str:
    """The whole body of one event, as the pages show it (the body route's answer)."""
    return headline_and_body(event.kind, event.data)[1]


def present(event: Event) -> dict[str, Any]:
    """An event as pages show it. An event read with its body as a prefix
    (threads/selectors/event_bodies.py) shows the same as read whole; in the rare case its
    prefix cannot tell the preview line, it is read whole."""
    redacted = event.data.get(REDACTED)
    if redacted is not None:
        # Nothing of the content is left to show: who removed it, when and why instead
        # (docs/event-log.md, "Redaction").
        return {
            **_facts(event),
            "headline": headline_and_body(event.kind, event.data)[0],
            "body": "",
            "body_size": None,
            "long": False,
            "preview": "",
            "redacted": redacted,
        }
    headline, body = headline_and_body(event.kind, event.data)
    prefix: BodyPrefix | None = getattr(event, "body_prefix", None)
    size = None
    if prefix is not None:
        preview = _prefix_preview(prefix.text)
        if preview is None:
            return present(event_whole(event))
        body = prefix.text
        size = _prefixed_size(event.kind, event.data, prefix)
        long = True  # longer than the prefix, so than COLLAPSE_CHARS
    else:
        long, preview = is_long(body), preview_line(body)
    return {
        **_facts(event),
        "headline": headline,
        "body": body,
        "body_size": size,
        "long": long,
        "preview": preview,
    }


def _facts(event: Event) -> dict[str, Any]:
    """What a card shows of an event besides its headline and body."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "tokens": event.token_count,
        "created_at": event.created_at,
        "role": event.data.get("role", ""),
        "status": event.data.get("status", ""),
        "side_effect": bool(event.data.get("side_effect")),
        "call_seq": event.data.get("call_seq"),
        "approval_seq": event.data.get("approval_seq"),
        "retracts": event.data.get("retracts"),
        "hash": event.hash,
        # The secrets its append found: type and field, never the secret.
        "secrets": event.secrets or [],
        # Whether an admin may redact it (docs/event-log.md, "Redaction").
        "redactable": event.kind not in UNREDACTABLE_KINDS and REDACTED not in event.data,
    }


# Rows of the context page's repeated-content table; the rest are counted, not listed.
REPEAT_ROWS = 50


def tool_rows(tools: Iterable[ThreadTool], window: int) -> list[dict[str, Any]]:
    """The thread's tools by cost, most expensive first, each with its share of the window."""
    ordered = sorted(tools, key=lambda t: (-t.token_count, t.position))
    return [
        {"name": t.name, "tokens": t.token_count, "share": t.token_count / max(window, 1)}
        for t in ordered
    ]


def repeat_rows(repeats: Sequence[Repeat], sent: Collection[int]) -> dict[str, Any]:
    """The repeated-content table (most wasteful first, as given) and its totals; `sent` are
    the seqs of the working context, where a repeat costs the agent its tokens now."""
    return {
        "rows": [
            {
                "seq": r.seq,
                "kind": r.kind,
                "first_seq": r.first_seq,
                "tokens": r.tokens,
                "sent": r.seq in sent,
            }
            for r in repeats[:REPEAT_ROWS]
        ],
        "count": len(repeats),
        "more": max(len(repeats) - REPEAT_ROWS, 0),
        "tokens": sum(r.tokens for r in repeats),
        "sent_tokens": sum(r.tokens for r in repeats if r.seq in sent),
    }


def shown_value(value: Any) -> str:
    """A stored value as a person reads it: text as it is, anything else as JSON (null, true,
    [8, 9]), never Python's spelling of it (None, True)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
