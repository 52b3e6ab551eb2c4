"""The events that mention a subject (an e-mail address, a customer id), for erasure by subject
(docs/repairs.md, "Erasure by subject"): found through the message-search index, then confirmed
on each event's stored strings, so a hit on the words alone (`alice` and `example` apart) is
not taken for the value.

What the index does not hold is not found: an event's metadata, the kinds without search text
and the text past the first `SEARCH_TEXT_LIMIT` characters of an event (docs/search.md, "Message
search").
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from threads.domain.search import search_terms
from threads.models import Event, SummaryVersion
from threads.selectors.search import MAX_HITS, events_search


@dataclass(frozen=True, slots=True)
class SubjectEvent:
    thread_id: uuid.UUID
    external_id: str
    seq: int


def subject_events(*, workspace_id: int, value: str) -> list[SubjectEvent]:
    """Every event of the workspace whose strings hold `value` (any case), grouped by
    thread, in seq order within one. A value without a searchable word finds nothing."""
    if not search_terms(value):
        return []
    needle = value.casefold()
    found: list[SubjectEvent] = []
    before: int | None = None
    while True:
        hits = events_search(workspace_ids=[workspace_id], q=value, limit=MAX_HITS, before=before)
        if not hits:
            break
        stored = {
            row["pk"]: row
            for row in Event.objects.filter(pk__in=[hit.event_id for hit in hits]).values(
                "pk", "data", "metadata"
            )
        }
        for hit in hits:
            row = stored.get(hit.event_id)
            if row is not None and any(
                needle in text.casefold() for text in _strings((row["data"], row["metadata"]))
            ):
                found.append(SubjectEvent(hit.thread_id, hit.external_id, hit.seq))
        if len(hits) < MAX_HITS:
            break
        before = hits[-1].event_id
    found.sort(key=lambda event: (str(event.thread_id), event.seq))
    return found


def summary_versions_holding(*, thread_ids: list[uuid.UUID], value: str) -> int:
    """How many summary versions of these threads hold `value` in their text (any case)."""
    return SummaryVersion.objects.filter(
        thread_id__in=thread_ids, rendered__icontains=value
    ).count()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
