"""An uploaded file as a TraceImport: stored and queued (`import_start`), imported by its task
conversation by conversation with a report and counts (`import_run`), cancelled by an admin
(`import_cancel`); and whether a workspace's agents may upload.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from integrations.trace_imports.models import ImportOutcome, ImportState, TraceImport
from integrations.trace_imports.readers import (
    DEFAULT_SIDE_EFFECT_TOOLS,
    FILE_FORMATS,
    ImportFormatError,
    read_uploaded_conversations,
)
from integrations.trace_imports.readers.common import GZIP_MAGIC
from integrations.trace_imports.services.conversations import (
    ConversationReport,
    ImportCancelled,
    ImportStopped,
    conversations_import,
)
from threads.access import require_role
from threads.domain.errors import Conflict, InvalidEvent, PayloadTooLarge, PermissionDenied
from threads.models import Role, Workspace
from threads.services.audit import audit_record
from threads.services.enqueue import task_run_enqueue

# The import's row (report and counts) is written at most this often while it runs; the task
# run's progress after every conversation.
REPORT_INTERVAL = 0.5
# Room for the multipart framing and the other fields around an uploaded file: a request
# announcing more than CTXADMIN_MAX_IMPORT_BYTES plus this is refused before it is read.
UPLOAD_FORM_OVERHEAD = 64 * 1024

# The import task's name (integrations.trace_imports.tasks), routed to the `imports` queue.
IMPORT_TRACE = "ctxadmin.import_trace"


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
