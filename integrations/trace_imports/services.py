"""Importing recorded agent traces as threads (docs/api.md, "Import formats" and
"Imports — `/api/v1/imports/`", docs/imports.md, "Imports of recorded traces").

Events go through the normal append path (event_append_batch) in batches: the same validation,
binding, hashing and token counting as the API. Every event gets the client_event_id
`import-<index>`, so importing the same file again appends nothing, and importing a longer
version of a conversation appends only what is new. Reading and converting the formats is
integrations.trace_imports.readers' job.

An upload (dashboard or API) is a TraceImport: `import_start` stores the file and queues the
`ctxadmin.import_trace` task, whose `import_run` imports it conversation by conversation,
recording each one's outcome as it goes; a conversation that cannot be imported is refused
with its position and reason, and the rest of the file still imports. The task runs on the
`imports` queue (CELERY_TASK_ROUTES), away from folds and verification.

Limits (docs/api.md, "Imports — `/api/v1/imports/`"): the upload's bytes and what they unpack to,
the conversations in the file and the events they convert to (CTXADMIN_MAX_IMPORT_*). Past one, the
import ends `failed` with the limit named; the events limit stops before the conversation that would
cross it, so what was imported is exactly the report's lines. An admin's cancel stops the import the
same way, between two conversations, and ends it `cancelled`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from integrations.trace_imports.models import ImportOutcome, ImportState, TraceImport
from integrations.trace_imports.readers import (
    DEFAULT_SIDE_EFFECT_TOOLS,
    FILE_FORMATS,
    FORMATS,
    TITLE_LENGTH,
    Conversation,
    ImportFormatError,
    conversation_events,
    conversation_value,
    read_uploaded_conversations,
)
from integrations.trace_imports.readers.common import GZIP_MAGIC
from threads.access import require_role
from threads.domain.errors import (
    Conflict,
    DomainError,
    InvalidEvent,
    InvalidTools,
    PayloadTooLarge,
    PermissionDenied,
)
from threads.domain.events import NewEvent, normalize_event
from threads.models import Role, Thread, Workspace
from threads.services.audit import audit_record
from threads.services.enqueue import task_run_enqueue
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
# The import's row (report and counts) is written at most this often while it runs; the task
# run's progress after every conversation.
REPORT_INTERVAL = 0.5
# Room for the multipart framing and the other fields around an uploaded file: a request
# announcing more than CTXADMIN_MAX_IMPORT_BYTES plus this is refused before it is read.
UPLOAD_FORM_OVERHEAD = 64 * 1024

# The import task's name (integrations.trace_imports.tasks), routed to the `imports` queue.
IMPORT_TRACE = "ctxadmin.import_trace"


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


# --- Uploads: a TraceImport and its task ------------------------------------------------------


def import_start(
    *,
    workspace: Workspace,
    actor: AbstractBaseUser | None,
    actor_label: str = "",
    fmt: str,
    file_name: str,
    content: bytes,
    side_effect_tools: Collection[str] | None = None,
) -> TraceImport:
    """Store an uploaded file as a TraceImport and queue its import (task
    `ctxadmin.import_trace`, sent after commit), audited, in one transaction.

    `actor` is the person (who needs the admin role in the workspace), or None for an agent
    named by `actor_label` (refused unless the workspace lets its agents import).
    `side_effect_tools` None means the default tools. Raises InvalidEvent for a format that is
    not a file format, PayloadTooLarge over CTXADMIN_MAX_IMPORT_BYTES (or, for a file that is
    not gzipped, CTXADMIN_MAX_IMPORT_UNPACKED_BYTES). Nothing is parsed here: the worker does
    that, and checks the limits only it can know (conversations, events, unpacked bytes)."""
    if actor is not None:
        require_role(actor, workspace, Role.ADMIN)
    elif not workspace.agents_may_import:
        raise PermissionDenied(
            f"agent keys may not import into {workspace.name}: an admin can allow it on the "
            "Imports page"
        )
    if fmt not in FILE_FORMATS:
        raise InvalidEvent(
            "unknown import format",
            fields={"format": f"must be one of {', '.join(FILE_FORMATS)}"},
        )
    limit = settings.CTXADMIN_MAX_IMPORT_BYTES
    if len(content) > limit:
        raise PayloadTooLarge(
            f"the file is larger than {limit} bytes (CTXADMIN_MAX_IMPORT_BYTES)",
            fields={"limit": limit, "size": len(content)},
        )
    unpacked_limit = settings.CTXADMIN_MAX_IMPORT_UNPACKED_BYTES
    if content[:2] != GZIP_MAGIC and len(content) > unpacked_limit:
        raise PayloadTooLarge(
            f"the file is larger than {unpacked_limit} bytes (CTXADMIN_MAX_IMPORT_UNPACKED_BYTES)",
            fields={"limit": unpacked_limit, "size": len(content)},
        )
    label = actor_label or (actor.get_username() if actor is not None else "system")
    digest = hashlib.sha256(content).hexdigest()
    tools = None if side_effect_tools is None else sorted(set(side_effect_tools))
    with transaction.atomic(durable=True):
        trace_import_row = TraceImport(
            workspace=workspace,
            created_by=cast(Any, actor),
            actor_label=label,
            format=fmt,
            file_name=file_name[:255],
            size=len(content),
            sha256=digest,
            content=content,
            side_effect_tools=tools,
        )
        run = task_run_enqueue(
            workspace=workspace,
            kind="import",
            task_name=IMPORT_TRACE,
            args=(str(trace_import_row.pk),),
        )
        trace_import_row.task_run = run
        trace_import_row.save(force_insert=True)
        audit_record(
            workspace=workspace,
            actor=actor,
            actor_label=label,
            action="import.start",
            target_type="import",
            target_id=trace_import_row.pk,
            after={
                "format": fmt,
                "file_name": trace_import_row.file_name,
                "size": len(content),
                "sha256": digest,
                "side_effect_tools": tools,
                "task_id": run.id,
            },
        )
    return trace_import_row


FINISHED = (ImportState.SUCCEEDED, ImportState.FAILED, ImportState.CANCELLED)

COUNT_FIELDS = {
    ImportOutcome.CREATED: "created_count",
    ImportOutcome.UPDATED: "updated_count",
    ImportOutcome.SKIPPED: "skipped_count",
    ImportOutcome.REFUSED: "refused_count",
}


def import_answer(trace_import: TraceImport) -> dict[str, Any]:
    """The task's result: the import's state and counts (the report is on the import)."""
    answer: dict[str, Any] = {
        "import_id": str(trace_import.pk),
        "state": trace_import.state,
        "conversations": trace_import.conversations_total,
        "created": trace_import.created_count,
        "updated": trace_import.updated_count,
        "skipped": trace_import.skipped_count,
        "refused": trace_import.refused_count,
        "events_appended": trace_import.events_appended,
    }
    if trace_import.state in (ImportState.FAILED, ImportState.CANCELLED):
        answer["error"] = trace_import.error
    return answer


class _Recorder:
    """Collects the report as conversations finish and writes it, with the counts, to the
    import's row: every REPORT_INTERVAL seconds and at the end, so the row's counts always
    match its report (the trace_import_outcomes_counted constraint)."""

    def __init__(self, trace_import: TraceImport) -> None:
        self.row = trace_import
        self.report: list[dict[str, Any]] = list(trace_import.report)
        self.counts = {name: getattr(trace_import, name) for name in COUNT_FIELDS.values()}
        self.appended = trace_import.events_appended
        self.written_at = 0.0

    def __call__(self, line: ConversationReport) -> None:
        self.report.append(line.as_json())
        self.counts[COUNT_FIELDS[line.outcome]] += 1
        self.appended += line.appended
        if time.monotonic() - self.written_at >= REPORT_INTERVAL:
            self.write()

    def write(self, **more: Any) -> None:
        fields = {
            "report": self.report,
            "conversations_done": len(self.report),
            "events_appended": self.appended,
            **self.counts,
            **more,
        }
        TraceImport.objects.filter(pk=self.row.pk).update(**fields)
        for name, value in fields.items():
            setattr(self.row, name, value)
        self.written_at = time.monotonic()


def _import_fail(trace_import: TraceImport, error: str, **more: Any) -> None:
    more.setdefault("state", ImportState.FAILED)
    TraceImport.objects.filter(pk=trace_import.pk).update(
        error=error, finished_at=timezone.now(), **more
    )
    trace_import.refresh_from_db()


def import_run(
    *, import_id: str, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Import an uploaded file (the `ctxadmin.import_trace` task): read it, then import each
    conversation (conversations_import, one append transaction per batch, each locking its
    thread), recording each one's outcome on the import and calling `progress(done, total)`.

    Idempotent: a finished import answers at once; a redelivered one (its worker died)
    resumes after the last conversation it recorded, and the `import-<index>` client_event_ids
    make a conversation it had half-imported append only the rest. A file that cannot be read
    at all, or that holds more than CTXADMIN_MAX_IMPORT_CONVERSATIONS conversations, ends the
    import `failed` with the reason before anything is imported; the events limit and an
    admin's cancel stop it between two conversations (ImportStopped)."""
    trace_import = TraceImport.objects.select_related("workspace").get(pk=import_id)
    if trace_import.state in FINISHED:
        return import_answer(trace_import)
    # Only a pending (or redelivered running) import starts: a cancel that came first stays.
    started = TraceImport.objects.filter(
        pk=trace_import.pk, state__in=(ImportState.PENDING, ImportState.RUNNING)
    ).update(state=ImportState.RUNNING, started_at=trace_import.started_at or timezone.now())
    if not started:
        trace_import.refresh_from_db()
        return import_answer(trace_import)
    try:
        conversations = read_uploaded_conversations(
            bytes(trace_import.content),
            trace_import.format,
            name=trace_import.file_name,
            max_unpacked=settings.CTXADMIN_MAX_IMPORT_UNPACKED_BYTES,
        )
    except (ImportFormatError, RecursionError) as exc:
        _import_fail(trace_import, f"the file cannot be read: {exc}")
        return _finished(trace_import)
    total = len(conversations)
    limit = settings.CTXADMIN_MAX_IMPORT_CONVERSATIONS
    if total > limit:
        _import_fail(
            trace_import,
            f"the file holds {total} conversations, more than an import's limit of {limit} "
            "(CTXADMIN_MAX_IMPORT_CONVERSATIONS): nothing was imported",
        )
        return _finished(trace_import)
    TraceImport.objects.filter(pk=trace_import.pk).update(conversations_total=total)
    trace_import.conversations_total = total
    if progress is not None:
        progress(trace_import.conversations_done, total)
    recorder = _Recorder(trace_import)
    tools = trace_import.side_effect_tools
    # A resumed import has converted the events of the conversations it recorded already.
    events_before = sum(line["events"] for line in recorder.report)

    def stop(number: int) -> None:
        cancelled_by = (
            TraceImport.objects.filter(pk=trace_import.pk, cancel_requested_at__isnull=False)
            .values_list("cancelled_by", flat=True)
            .first()
        )
        if cancelled_by is not None:
            raise ImportCancelled(f"cancelled by {cancelled_by or 'an admin'}")

    try:
        conversations_import(
            workspace=trace_import.workspace,
            conversations=conversations,
            fmt=trace_import.format,
            side_effect_tools=DEFAULT_SIDE_EFFECT_TOOLS if tools is None else frozenset(tools),
            progress=progress,
            report=recorder,
            start=len(recorder.report),
            actor_label=trace_import.actor_label,
            file_name=trace_import.file_name,
            max_events=max(settings.CTXADMIN_MAX_IMPORT_EVENTS - events_before, 0),
            stop=stop,
        )
    except ImportStopped as exc:
        done = len(recorder.report)
        recorder.write()
        kept = (
            f"the {done} conversations before it stay imported, each in the report"
            if done
            else "nothing was imported"
        )
        _import_fail(
            trace_import,
            f"{exc.message}; stopped after {done} of {total} conversations: {kept}",
            state=exc.state,
        )
        return _finished(trace_import)
    except Exception as exc:
        # Not one conversation's fault (the database, a time limit): keep what was recorded.
        recorder.write()
        _import_fail(trace_import, f"stopped after {len(recorder.report)} conversations: {exc}")
        _finished(trace_import)
        raise
    recorder.write(state=ImportState.SUCCEEDED, finished_at=timezone.now())
    trace_import.state = ImportState.SUCCEEDED
    return _finished(trace_import)


def _finished(trace_import: TraceImport) -> dict[str, Any]:
    """Audit the end of an import with its counts; the task's answer."""
    answer = import_answer(trace_import)
    audit_record(
        workspace=trace_import.workspace,
        actor=trace_import.created_by,
        actor_label=trace_import.actor_label,
        action="import.finish",
        target_type="import",
        target_id=trace_import.pk,
        after=answer,
    )
    return answer


def import_cancel(*, trace_import: TraceImport, actor: AbstractBaseUser) -> TraceImport:
    """Cancel an import (the person needs the admin role in its workspace), audited, in one
    transaction that locks the import's row. A pending import ends `cancelled` at once (its
    task, when a worker takes it, does nothing); a running one stops before its next
    conversation, keeping those it imported (import_run). Raises Conflict for an import that
    has ended."""
    require_role(actor, trace_import.workspace, Role.ADMIN)
    label = actor.get_username()
    now = timezone.now()
    with transaction.atomic(durable=True):
        # Not the uploaded bytes: only the worker reads them.
        row = TraceImport.objects.select_for_update().defer("content").get(pk=trace_import.pk)
        if row.state in FINISHED:
            raise Conflict(f"the import has ended ({row.state}): there is nothing to cancel")
        before = row.state
        row.cancel_requested_at = row.cancel_requested_at or now
        row.cancelled_by = row.cancelled_by or label
        fields = ["cancel_requested_at", "cancelled_by"]
        if row.state == ImportState.PENDING:
            row.state = ImportState.CANCELLED
            row.finished_at = now
            row.error = f"cancelled by {label} before it started: nothing was imported"
            fields += ["state", "finished_at", "error"]
        row.save(update_fields=fields)
        audit_record(
            workspace=row.workspace,
            actor=actor,
            actor_label=label,
            action="import.cancel",
            target_type="import",
            target_id=row.pk,
            before={"state": before},
            after={"state": row.state, "conversations_done": row.conversations_done},
        )
    return row


def workspace_agents_may_import_set(
    *, workspace: Workspace, actor: AbstractBaseUser, allowed: bool
) -> Workspace:
    """Let the workspace's agent keys upload imports, or stop them (the person needs the admin
    role), audited, in one transaction."""
    require_role(actor, workspace, Role.ADMIN)
    with transaction.atomic(durable=True):
        row = Workspace.objects.select_for_update().get(pk=workspace.pk)
        if row.agents_may_import != allowed:
            row.agents_may_import = allowed
            row.save(update_fields=["agents_may_import"])
            audit_record(
                workspace=row,
                actor=actor,
                actor_label=actor.get_username(),
                action="workspace.agents_may_import",
                target_type="workspace",
                target_id=row.pk,
                before={"agents_may_import": not allowed},
                after={"agents_may_import": allowed},
            )
    return row
