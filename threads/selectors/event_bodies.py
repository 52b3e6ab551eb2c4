"""Events for a dashboard page, with long text bodies read only as far as a page shows them.

A page shows at most the first BODY_SHOWN_CHARS of a body (threads/views/present.py) and the
whole body's size; a 1 MiB tool result read whole to show 4 KB of it is 1 MiB carried from the
database and decoded for nothing. The bodies that are one JSON string in the event's data — a
message's `content`, a tool result's `result` — are read here as a prefix and their size in
UTF-8 bytes, computed by the database; the event's other fields come as its data without that
string. Bodies the page builds from JSON (call arguments,
payloads, structured results, content parts) are pretty-printed by Python with sorted keys,
which no SQL function reproduces, so those events' data is read whole, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from threads.domain.errors import NotFound
from threads.models import Event, Thread

# Off, every event's data is read whole (how pages read before; bench/long_bodies.py
# compares the two).
READ_PREFIX = True
# The kinds whose page body is a string field of their data, and that field.
STRING_BODY_FIELD = {"message": "content", "tool_result": "result"}


@dataclass(frozen=True)
class BodyPrefix:
    """The first characters of an event's body string, and the whole string's size in UTF-8
    bytes (larger than the prefix's: the string is longer)."""

    text: str
    size: int


# The body string's field by kind, as SQL: NULL for the other kinds.
_FIELD = (
    "CASE e.kind "
    + " ".join(f"WHEN '{kind}' THEN '{field}'" for kind, field in STRING_BODY_FIELD.items())
    + " END"
)
# Per row: the data without the body string (the data whole when it has none), the string's
# first %s characters and its UTF-8 size. Each reads the row's JSON once for the string
# (SQLite's json_each; PostgreSQL's lateral subquery, kept from being inlined by OFFSET 0)
# rather than once per use, and once more for the rest; the string's length in characters,
# which both would count by a scan, is not needed: a size larger than the prefix's says it.
_BODY_SQL = {
    "sqlite": (
        "SELECT e.id, CASE WHEN j.key IS NULL THEN e.data "
        "ELSE json_remove(e.data, '$.' || j.key) END, "
        "substr(j.value, 1, %s), length(CAST(j.value AS BLOB)) "
        "FROM threads_event e LEFT JOIN json_each(e.data) j "
        f"ON j.type = 'text' AND j.key = {_FIELD} "
        "WHERE e.id IN ({ids})"
    ),
    "postgresql": (
        "SELECT e.id, CASE WHEN x.s IS NULL THEN e.data ELSE e.data - x.f END, "
        "substr(x.s, 1, %s), octet_length(x.s) "
        "FROM threads_event e CROSS JOIN LATERAL ("
        "SELECT k.f, CASE WHEN jsonb_typeof(e.data -> k.f) = 'string' THEN e.data ->> k.f END "
        f"AS s FROM (SELECT {_FIELD} AS f) k OFFSET 0) x "
        "WHERE e.id IN ({ids})"
    ),
}


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def events_with_body_prefixes(events: QuerySet[Event], chars: int) -> list[Event]:
    """The events of the query, each with `body_prefix`: a BodyPrefix when its body is a
    string longer than `chars`, its `data` then lacking that field (the rows are for reading
    only); None, with `data` whole, otherwise. Two queries: the events but their data, then
    their data cut."""
    connection = connections[events.db]
    sql = _BODY_SQL.get(connection.vendor) if READ_PREFIX else None
    if sql is None:
        rows = list(events)
        for event in rows:
            event.body_prefix = None  # type: ignore[attr-defined]
        return rows
    rows = list(events.defer("data"))
    if not rows:
        return rows
    ids = [event.pk for event in rows]
    with connection.cursor() as cursor:
        # PostgreSQL's substr takes an int4 count.
        cursor.execute(sql.format(ids=", ".join(["%s"] * len(ids))), [min(chars, 2**31 - 1), *ids])
        cut = {row[0]: row[1:] for row in cursor.fetchall()}
    for event in rows:
        data, prefix_text, size = cut[event.pk]
        data = dict(_json(data))
        prefix = None
        if prefix_text is not None:
            if size > len(prefix_text.encode()):
                prefix = BodyPrefix(prefix_text, size)
            else:  # the whole string came: put it back
                data[STRING_BODY_FIELD[event.kind]] = prefix_text
        event.data = data
        event.body_prefix = prefix  # type: ignore[attr-defined]
    return rows


def event_window_for_page(*, thread: Thread, from_seq: int, limit: int, chars: int) -> list[Event]:
    """event_window's events, bodies longer than `chars` read as a prefix."""
    return events_with_body_prefixes(
        Event.objects.filter(thread=thread, seq__gte=from_seq, seq__lt=from_seq + limit).order_by(
            "seq"
        ),
        chars,
    )


def event_whole(event: Event) -> Event:
    """The event with its data read whole, when a page needs more of a body than its
    prefix tells (a rare case of present_page's)."""
    return Event.objects.get(pk=event.pk)


def event_get_for_page(*, thread: Thread, seq: int, chars: int) -> Event:
    """event_get's event, a body longer than `chars` read as a prefix."""
    rows = events_with_body_prefixes(Event.objects.filter(thread=thread, seq=seq), chars)
    if not rows:
        raise NotFound("event not found")
    return rows[0]
