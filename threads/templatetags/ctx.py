"""Small display filters and tags for the dashboard. None of them marks agent-written content
safe: it stays autoescaped."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html

from threads.models import ApprovalStatus, SideEffectStatus, SummaryPhase, TaskState
from threads.views.present import body_cut, shown_value

register = template.Library()

# A status's badge colour, per subject: (colour by status, colour of any other status).
BADGE_TONES: dict[str, tuple[dict[str, str], str]] = {
    "approval": (
        # "expired": pending past its expires_at, undecidable (threads/views/queues.py).
        {ApprovalStatus.PENDING: "info", ApprovalStatus.APPROVED: "ok", "expired": "muted"},
        "bad",
    ),
    "side_effect": (
        {
            SideEffectStatus.UNKNOWN: "warn",
            SideEffectStatus.SUCCEEDED: "ok",
            SideEffectStatus.FAILED: "bad",
        },
        "muted",
    ),
    "phase": (
        {
            SummaryPhase.COMMITTED: "ok",
            SummaryPhase.REJECTED: "bad",
            SummaryPhase.PREPARED: "info",
        },
        "muted",
    ),
    "task": ({TaskState.SUCCESS: "ok", TaskState.FAILURE: "bad"}, "info"),
    # What a retraction or a reset did to an event in the timeline.
    "event": ({"retracted": "muted"}, "info"),
    # The status of a summary entry (tool state, constraint, pending item).
    "entry": (
        {
            "unknown": "warn",
            "failed": "muted",
            "superseded": "muted",
            "expired": "muted",
            "succeeded": "ok",
            "active": "ok",
        },
        "info",
    ),
}


@register.filter
def num(value: Any) -> str:
    """1234567 -> 1,234,567 (token counts are read at a glance)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "" if value is None else str(value)


@register.filter
def pct(value: Any, digits: int = 0) -> str:
    try:
        return f"{float(value) * 100:.{int(digits)}f}%"
    except (TypeError, ValueError):
        return ""


@register.filter
def pretty(value: Any) -> str:
    """JSON for reading: indented, keys sorted, non-ASCII kept."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def get(mapping: Any, key: Any) -> Any:
    if isinstance(mapping, dict):
        return mapping.get(key, mapping.get(str(key)))
    return None


@register.filter
def shown(value: Any) -> str:
    """A summary's value as a person reads it: text as it is, anything else as JSON (null,
    true, [8, 9]), never Python's spelling of it (None, True)."""
    return shown_value(value)


@register.filter
def spaced(value: Any) -> str:
    """tool_call -> tool call (kinds read as words)."""
    return str(value).replace("_", " ")


def _badge(tone: str, text: str) -> str:
    return format_html('<span class="badge badge-{}">{}</span>', tone, text)


@register.simple_tag
def status_badge(subject: str, status: Any, label: Any = "", prefix: Any = "") -> str:
    """A status as a badge coloured by its subject's tones: {% status_badge "approval" a.status %}.
    The text is the label (the status itself by default), after an optional prefix."""
    tones, other = BADGE_TONES[subject]
    text = " ".join(str(part) for part in (prefix, label or status) if part != "")
    return _badge(tones.get(status, other), text)


@register.simple_tag
def chain_badge(thread: Any, detail: bool = False) -> str:
    """A thread's chain verdict; with detail, how far it verified or where it broke. Before the
    first sweep reached it nothing is known to be wrong: plain words, no badge (a badge, even a
    grey one, reads as a problem on every fresh thread); only a broken chain is a problem."""
    if thread.chain_ok and not thread.verified_at:
        return format_html(
            '<span class="chain-unchecked muted" title="{}">not checked yet</span>',
            "The integrity sweep has not reached this thread yet; nothing is known to be wrong.",
        )
    if thread.chain_ok:
        return _badge("ok", f"ok to #{thread.verified_until}" if detail else "ok")
    return _badge("bad", f"broken at {thread.first_bad_seq}" if detail else "broken")


@register.inclusion_tag("threads/_sort_header.html", takes_context=True)
def sort_header(
    context: template.Context, key: str, label: str, first: str = "", css: str = ""
) -> dict[str, Any]:
    """A column header that sorts the list by key: the first click sorts by `first` (key, or
    -key for newest/largest first), the next one reverses it. The sorted column carries
    aria-sort and an arrow."""
    sort = str(context.get("sort") or "")
    first = first or key
    state = {key: "ascending", f"-{key}": "descending"}.get(sort, "")
    return {
        "sort_query": context.get("sort_query", ""),
        "next": (key if first.startswith("-") else f"-{key}") if sort == first else first,
        "label": label,
        "css": css,
        "aria_sort": state,
        "arrow": {"ascending": " ↑", "descending": " ↓"}.get(state, ""),
    }


@register.inclusion_tag("threads/_body.html")
def body_block(
    text: str,
    thread_id: Any = None,
    seq: Any = None,
    preview: str = "",
    long: bool = False,
    size: int | None = None,
) -> dict[str, Any]:
    """An event's body on a page: at most BODY_SHOWN_CHARS of it, the whole body's size, and
    a "Show all" that loads the rest from the event's body route (the same text the page
    would have carried). `long` collapses it behind `preview`, as the timeline does. `text`
    may be a prefix of the body read from the database, with the whole body's `size`
    (present's body_size)."""
    context: dict[str, Any] = {
        "text": text,
        "preview": preview,
        "long": long,
        **body_cut(text, size or None),
    }
    if thread_id is not None and seq is not None:
        context["href"] = reverse("thread-event-body", args=[thread_id, seq])
    return context
