"""The one rule for a thread's external_id, for create and fork (docs/api.md,
"Create — `POST /api/v1/threads/` (agents)"), and for any other id that is a segment of a URL path
(`segment_problem`).

`{id}` in every thread URL is one path segment, so an external_id must be one: no "/", and not
"." or ".." (which clients and browsers resolve away as dot segments). A thread whose
external_id breaks the rule could be stored but never found by it.
"""

from __future__ import annotations

MAX_EXTERNAL_ID = 200


def external_id_problem(value: str) -> str | None:
    """Why `value` (already stripped of surrounding whitespace) cannot be an external_id, or
    None when it can."""
    return segment_problem(value, MAX_EXTERNAL_ID)


def segment_problem(value: str, limit: int) -> str | None:
    """Why `value` cannot be one segment of a URL path of at most `limit` characters, or None
    when it can."""
    if not value:
        return "must not be empty"
    if len(value) > limit:
        return f"must be at most {limit} characters"
    if "/" in value:
        return "must not contain '/'"
    if value in (".", ".."):
        return "must not be '.' or '..'"
    if not text_storable(value):
        return "must not contain NUL characters"
    return None


def text_storable(value: str) -> bool:
    """Whether `value` can be stored as text, and so compared with stored text: PostgreSQL's
    text refuses NUL, and a query holding one fails instead of finding nothing. An id or a
    search term with NUL names nothing ctxadmin holds."""
    return "\x00" not in value
