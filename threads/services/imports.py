"""Importing recorded agent traces as threads (docs/api.md §10.1).

Events go through the normal append path (event_append_batch) in batches: the same validation,
binding, hashing and token counting as the API. Every event gets the client_event_id
`import-<index>`, so importing the same file again appends nothing, and importing a longer
version of a conversation appends only what is new. Reading and converting the formats is
threads.importers' job.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from threads.domain.errors import InvalidTools, PayloadTooLarge
from threads.domain.events import normalize_event
from threads.importers import (
    DEFAULT_SIDE_EFFECT_TOOLS,
    FORMATS,
    Conversation,
    ImportFormatError,
    conversation_events,
    conversation_value,
)
from threads.models import Thread, Workspace
from threads.services.audit import audit_record
from threads.services.events import event_append_batch
from threads.services.threads import thread_get_or_create
from threads.services.tools import thread_tools_set

BATCH_SIZE = 500


@dataclass
class ImportResult:
    thread: Thread
    created: int = 0  # events appended by this import (0 when it was imported before)
    total: int = 0
    skipped: list[str] = field(default_factory=list)


def conversation_import(
    *,
    workspace: Workspace,
    conversation: Conversation,
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
) -> ImportResult:
    """Store one conversation as a thread (found or created by its external_id), appending
    the events it does not hold yet, and audit the import when it appended any."""
    prepared = conversation_events(
        conversation=conversation, fmt=fmt, side_effect_tools=side_effect_tools
    )
    events = prepared.events
    thread, _ = thread_get_or_create(
        workspace=workspace, external_id=prepared.external_id, **prepared.thread_settings
    )
    result = ImportResult(thread=thread, total=len(events), skipped=prepared.skipped)
    if conversation.tools:
        # The same tools again (a re-import) write nothing (thread_tools_set is idempotent).
        try:
            thread_tools_set(thread=thread, tools=conversation.tools, actor_label="import_trace")
        except (InvalidTools, PayloadTooLarge) as exc:
            result.skipped.append(f"tools: {exc.message}")
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    for start in range(0, len(events), BATCH_SIZE):
        batch = []
        for index, body in enumerate(events[start : start + BATCH_SIZE], start=start):
            body = {**body, "client_event_id": body.get("client_event_id") or f"import-{index}"}
            batch.append(normalize_event(body, max_bytes=max_bytes))
        appended = event_append_batch(thread=thread, new_events=batch)
        result.created += sum(1 for a in appended if a.created)
    if result.created:
        audit_record(
            workspace=workspace,
            actor=None,
            action="trace_imported",
            target_type="thread",
            target_id=thread.pk,
            thread=thread,
            actor_label="import_trace",
            after={"format": fmt, "events": result.created, "skipped": len(prepared.skipped)},
        )
    return result


def conversations_import(
    *,
    workspace: Workspace,
    conversations: Iterable[Any],
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
    progress: Callable[[int, int], None] | None = None,
) -> list[ImportResult]:
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    values = list(conversations)
    results = []
    for number, value in enumerate(values):
        conversation = conversation_value(value, fmt, where=f"conversation {number}")
        results.append(
            conversation_import(
                workspace=workspace,
                conversation=conversation,
                fmt=fmt,
                side_effect_tools=side_effect_tools,
            )
        )
        if progress is not None:
            progress(number + 1, len(values))
    return results


def trace_import(
    *,
    workspace: Workspace,
    conversations: Iterable[Any],
    fmt: str,
    progress: Callable[[int, int], None] | None = None,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
) -> list[Thread]:
    """Import conversations (already read from their file) into threads; one per conversation.
    For the Celery task: `progress(done, total)` counts conversations."""
    results = conversations_import(
        workspace=workspace,
        conversations=conversations,
        fmt=fmt,
        side_effect_tools=side_effect_tools,
        progress=progress,
    )
    return [r.thread for r in results]
