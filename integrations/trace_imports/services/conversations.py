"""Importing conversations as threads, one each: a conversation's events go through the normal
append path in batches, named `import-<index>` so that importing it again appends only what is
new; a conversation that cannot be imported is refused with its position and reason, and the
rest still import.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from integrations.trace_imports.models import ImportOutcome, ImportState
from integrations.trace_imports.readers import (
    DEFAULT_SIDE_EFFECT_TOOLS,
    FORMATS,
    TITLE_LENGTH,
    Conversation,
    ImportFormatError,
    conversation_events,
    conversation_value,
)
from threads.domain.errors import DomainError, InvalidEvent, InvalidTools, PayloadTooLarge
from threads.domain.events import NewEvent, normalize_event
from threads.models import Thread, Workspace
from threads.services.audit import audit_record
from threads.services.events import event_append_batch
from threads.services.threads import thread_get_or_create
from threads.services.tools import thread_tools_set

BATCH_SIZE = 500
# What a single malformed conversation raises while it is read, converted or appended. Anything
# else (the database going away, a time limit) stops the whole import instead.
CONVERSATION_ERRORS = (
    ImportFormatError,
    DomainError,
    LookupError,
    TypeError,
    ValueError,
    RecursionError,  # a conversation nested too deeply to convert or hash
)


@dataclass
class ImportResult:
    thread: Thread
    created: int = 0  # events appended by this import (0 when it was imported before)
    total: int = 0
    skipped: list[str] = field(default_factory=list)
    thread_created: bool = False  # this import created the thread
    thread_was_empty: bool = True  # the thread held no event before this import

    @property
    def outcome(self) -> ImportOutcome:
        """created: a new (or empty) thread got events; updated: an existing thread got the
        events it did not hold yet; skipped: nothing was new."""
        if self.created == 0 and not self.thread_created:
            return ImportOutcome.SKIPPED
        return ImportOutcome.CREATED if self.thread_was_empty else ImportOutcome.UPDATED


@dataclass(frozen=True)
class ConversationReport:
    """One conversation's line of an import's report."""

    index: int  # its position in the file, counted from 0
    outcome: ImportOutcome
    external_id: str = ""
    thread: str | None = None
    events: int = 0  # events the conversation converts to
    appended: int = 0  # of which this import appended
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "external_id": self.external_id,
            "thread": self.thread,
            "outcome": self.outcome.value,
            "events": self.events,
            "appended": self.appended,
            "reason": self.reason,
        }


class ConversationRefused(DomainError):
    """One conversation could not be stored after its thread existed (a batch refused by the
    append path); the batches before it stay appended."""

    def __init__(self, message: str, *, thread: Thread, appended: int, events: int) -> None:
        super().__init__(message)
        self.thread = thread
        self.appended = appended
        self.events = events


class ImportStopped(Exception):
    """The import stops before its next conversation (not one conversation's fault): a limit
    reached or an admin's cancel. Those before it stay imported, each in the report."""

    state = ImportState.FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ImportLimitReached(ImportStopped):
    pass


class ImportCancelled(ImportStopped):
    state = ImportState.CANCELLED


def _reason(exc: Exception) -> str:
    """Why a conversation was refused; never empty."""
    if isinstance(exc, DomainError):
        reason = f"{exc.message}: {exc.fields}" if exc.fields else exc.message
    elif isinstance(exc, ImportFormatError):
        reason = str(exc)
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return reason.strip() or type(exc).__name__


def conversation_import(
    *,
    workspace: Workspace,
    conversation: Conversation,
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
    actor_label: str = "import_trace",
    title: str = "",
    max_events: int | None = None,
) -> ImportResult:
    """Store one conversation as a thread (found or created by its external_id), appending
    the events it does not hold yet, and audit the import when it appended any.

    Every event is validated before the thread is created, so a conversation with a bad event
    leaves nothing behind. Each batch locks the thread (event_append_batch). A conversation
    with no user words to name its thread is titled `title` (the file and its position).
    More than `max_events` events raise ImportLimitReached before anything is stored."""
    prepared = conversation_events(
        conversation=conversation, fmt=fmt, side_effect_tools=side_effect_tools
    )
    if max_events is not None and len(prepared.events) > max_events:
        raise ImportLimitReached(
            f"it converts to {len(prepared.events)} events, more than the "
            f"{max_events} left of the import's limit (CTXADMIN_MAX_IMPORT_EVENTS)"
        )
    if not prepared.thread_settings.get("title") and title:
        prepared.thread_settings["title"] = title[:TITLE_LENGTH]
    events = prepared.events
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    normalized: list[NewEvent] = []
    for index, body in enumerate(events):
        body = {**body, "client_event_id": body.get("client_event_id") or f"import-{index}"}
        try:
            normalized.append(normalize_event(body, max_bytes=max_bytes))
        except (InvalidEvent, PayloadTooLarge) as exc:
            raise type(exc)(f"event {index}: {exc.message}", fields=exc.fields) from exc
    thread, thread_created = thread_get_or_create(
        workspace=workspace,
        external_id=prepared.external_id,
        actor_label=actor_label,
        **prepared.thread_settings,
    )
    result = ImportResult(
        thread=thread,
        total=len(events),
        skipped=prepared.skipped,
        thread_created=thread_created,
        thread_was_empty=thread.last_seq == 0,
    )
    if conversation.tools:
        # The same tools again (a re-import) write nothing (thread_tools_set is idempotent).
        try:
            thread_tools_set(thread=thread, tools=conversation.tools, actor_label="import_trace")
        except (InvalidTools, PayloadTooLarge) as exc:
            result.skipped.append(f"tools: {exc.message}")
    for start in range(0, len(normalized), BATCH_SIZE):
        try:
            appended = event_append_batch(
                thread=thread, new_events=normalized[start : start + BATCH_SIZE], by_agent=False
            )
        except DomainError as exc:
            raise ConversationRefused(
                f"events {start}-{min(start + BATCH_SIZE, len(normalized)) - 1}: {_reason(exc)}",
                thread=thread,
                appended=result.created,
                events=len(events),
            ) from exc
        result.created += sum(1 for a in appended if a.created)
    if result.created:
        audit_record(
            workspace=workspace,
            actor=None,
            action="trace_imported",
            target_type="thread",
            target_id=thread.pk,
            thread=thread,
            actor_label=actor_label,
            after={"format": fmt, "events": result.created, "skipped": len(prepared.skipped)},
        )
    return result


def skipped_reason(skipped: list[str]) -> str:
    """A report line's reason for a conversation that imported with items left out: how many,
    and every one of them (position and why), so nothing is dropped unsaid."""
    if not skipped:
        return ""
    items = "item was" if len(skipped) == 1 else "items were"
    return f"{len(skipped)} {items} not imported: {'; '.join(skipped)}"


def _refusal(number: int, value: Any, exc: Exception) -> ConversationReport:
    external_id = ""
    if isinstance(value, dict) and value.get("id") not in (None, ""):
        external_id = str(value["id"])[:200]
    if isinstance(exc, ConversationRefused):
        return ConversationReport(
            index=number,
            outcome=ImportOutcome.REFUSED,
            external_id=exc.thread.external_id,
            thread=str(exc.thread.pk),
            events=exc.events,
            appended=exc.appended,
            reason=exc.message,
        )
    return ConversationReport(
        index=number, outcome=ImportOutcome.REFUSED, external_id=external_id, reason=_reason(exc)
    )


def conversations_import(
    *,
    workspace: Workspace,
    conversations: Iterable[Any],
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
    progress: Callable[[int, int], None] | None = None,
    report: Callable[[ConversationReport], None] | None = None,
    start: int = 0,
    actor_label: str = "import_trace",
    file_name: str = "",
    max_events: int | None = None,
    stop: Callable[[int], None] | None = None,
) -> list[ImportResult]:
    """Import conversations in order, one thread each; `progress(done, total)` after each.

    Without `report`, the first conversation that cannot be imported raises (those before it
    stay imported). With `report`, every conversation's outcome is passed to it as soon as it
    is known, and a refused conversation does not stop the others. `start` skips the
    conversations before that position (a resumed import). `max_events` bounds the events the
    conversations from `start` on convert to: the conversation that would cross it raises
    ImportLimitReached, as `stop(position)` may raise ImportStopped, before that conversation
    is touched. The results of the conversations imported are returned in order."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    values = list(conversations)
    results = []
    events_left = max_events
    for number in range(start, len(values)):
        if stop is not None:
            stop(number)
        value = values[number]
        try:
            conversation = conversation_value(value, fmt, where=f"conversation {number}")
            result = conversation_import(
                workspace=workspace,
                conversation=conversation,
                fmt=fmt,
                side_effect_tools=side_effect_tools,
                actor_label=actor_label,
                title=f"{file_name} #{number + 1}" if file_name else "",
                max_events=events_left,
            )
        except ImportLimitReached as exc:
            raise ImportLimitReached(f"conversation {number}: {exc.message}") from exc
        except CONVERSATION_ERRORS as exc:
            if report is None:
                raise
            report(_refusal(number, value, exc))
        else:
            results.append(result)
            if events_left is not None:
                events_left -= result.total
            if report is not None:
                report(
                    ConversationReport(
                        index=number,
                        outcome=result.outcome,
                        external_id=result.thread.external_id,
                        thread=str(result.thread.pk),
                        events=result.total,
                        appended=result.created,
                        reason=skipped_reason(result.skipped),
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
    `progress(done, total)` counts conversations."""
    results = conversations_import(
        workspace=workspace,
        conversations=conversations,
        fmt=fmt,
        side_effect_tools=side_effect_tools,
        progress=progress,
    )
    return [r.thread for r in results]
