"""Retention (docs/operations.md, "Retention"): a workspace's policy deletes whole threads that
nobody has appended to or repaired for `retention_days`, leaving a signed tombstone each
(docs/event-log.md, "Tombstones"), and the checkpoints beyond the latest `keep_checkpoints` of
each thread that nothing needs (threads/services/checkpoint_retention.py).

A run goes in bounded batches, each its own transaction: a run stopped half way (a time limit,
a crash) keeps what it committed and the next run goes on from there. A dry run reads the same
batches, deletes nothing and says what a run would delete and the bytes it would free.

Integrations own rows of a thread the core does not know: they register a `ThreadDeleter`
in `thread_deleters` (and a `CheckpointPruner`, threads/services/checkpoint_retention.py) in
their `AppConfig.ready()`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, router, transaction
from django.db.models import QuerySet
from django.utils import timezone

from threads.database.guard import retention_delete_opened
from threads.domain.canonical import format_time
from threads.domain.errors import InvalidEvent
from threads.domain.tombstones import external_id_digest, tombstone_signature
from threads.keys.chain import ChainKeyUnknown, chain_key
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    AuditEntry,
    Checkpoint,
    ContextRequestLog,
    Event,
    Redaction,
    SideEffect,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
    ThreadTombstone,
    ThreadTool,
    Workspace,
)
from threads.selectors.integrity import stored_hashes
from threads.selectors.published_heads import thread_published_heads
from threads.selectors.retention import (
    OPEN_SIDE_EFFECTS,
    retention_workspaces,
    rows_bytes,
    thread_rows,
    threads_past_retention,
)
from threads.services.audit import audit_record
from threads.services.checkpoint_retention import CheckpointsOutcome, checkpoints_retention_apply
from threads.services.workspaces import workspace_fields_update

RETENTION_ACTOR = "retention policy"
# The Forget page's dry runs (threads.services.retention_preview): their reports name threads
# by external_id, so a run that deletes threads deletes the finished ones too.
RETENTION_PREVIEW_KIND = "retention_preview"
BATCH_SIZE = 100


@dataclass(frozen=True)
class ThreadDeleter:
    """An integration's part in deleting a thread:
    - `rows`: its rows that deleting these threads removes (for the dry run's bytes);
    - `delete`: remove them, in the retention's transaction, the thread locked; answers the
      rows deleted per table."""

    name: str
    rows: Callable[[Sequence[uuid.UUID]], list[QuerySet[Any]]]
    delete: Callable[[Thread], dict[str, int]]


thread_deleters: list[ThreadDeleter] = []


@dataclass
class RetentionOutcome:
    """What a run deleted (or, dry, would delete), per workspace."""

    workspace: str
    dry_run: bool
    threads: list[dict[str, Any]] = field(default_factory=list)  # {"thread", "external_id", ...}
    rows: dict[str, int] = field(default_factory=dict)  # per table
    bytes: int = 0
    checkpoints: CheckpointsOutcome = field(default_factory=CheckpointsOutcome)

    def summary(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "dry_run": self.dry_run,
            "threads_deleted": len(self.threads),
            "checkpoints_deleted": self.checkpoints.deleted,
            "rows": dict(sorted(self.rows.items())),
            "bytes": self.bytes + self.checkpoints.bytes,
        }


def retention_apply(
    *,
    workspace_name: str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    batch_size: int = BATCH_SIZE,
) -> list[RetentionOutcome]:
    """Apply every workspace's retention policy (or one's): threads first, then checkpoints,
    in batches of `batch_size` threads, each batch its own transaction (dry: none). One audit
    entry per workspace per run that is not dry. Returns what went, per workspace."""
    now = now or timezone.now()
    outcomes = []
    for workspace in retention_workspaces(name=workspace_name):
        outcome = RetentionOutcome(workspace=workspace.name, dry_run=dry_run)
        if dry_run:
            _threads_dry(workspace, now, batch_size, outcome)
            outcome.checkpoints = checkpoints_retention_apply(
                workspace=workspace,
                dry_run=True,
                batch_size=batch_size,
                deleting={uuid.UUID(line["thread"]) for line in outcome.threads},
            )
        else:
            try:
                skipped: set[uuid.UUID] = set()
                while _threads_batch_delete(
                    workspace=workspace, now=now, limit=batch_size, skipped=skipped, into=outcome
                ):
                    pass
                checkpoints_retention_apply(
                    workspace=workspace,
                    dry_run=False,
                    batch_size=batch_size,
                    into=outcome.checkpoints,
                )
            except BaseException:
                # Stopped (a time limit, a failure): what the committed batches deleted is
                # audited all the same.
                _run_audit(workspace, outcome, interrupted=True)
                raise
            _run_audit(workspace, outcome, interrupted=False)
        outcomes.append(outcome)
    return outcomes


def _dry_runs_delete(workspace: Workspace) -> None:
    """A deleted thread leaves only its tombstone's digest of its external_id: no finished dry
    run's report keeps naming it (one still running writes what it read)."""
    TaskRun.objects.filter(
        workspace=workspace,
        kind=RETENTION_PREVIEW_KIND,
        state__in=[TaskState.SUCCESS, TaskState.FAILURE],
    ).delete()


def _run_audit(workspace: Workspace, outcome: RetentionOutcome, *, interrupted: bool) -> None:
    """The run's audit entry, and with it (one transaction) the dry runs that name the threads
    it deleted."""
    with transaction.atomic(durable=True):
        if outcome.threads:
            _dry_runs_delete(workspace)
        audit_record(
            workspace=workspace,
            actor=None,
            actor_label=RETENTION_ACTOR,
            action="retention.apply",
            target_type="workspace",
            target_id=workspace.pk,
            before={
                "retention_days": workspace.retention_days,
                "keep_checkpoints": workspace.keep_checkpoints,
            },
            after={**outcome.summary(), "interrupted": interrupted},
        )


def _threads_dry(
    workspace: Workspace, now: datetime, limit: int, outcome: RetentionOutcome
) -> None:
    """The threads a run would delete, read in pages in key order."""
    after = uuid.UUID(int=0)
    while batch := threads_past_retention(workspace=workspace, now=now, after=after, limit=limit):
        after = batch[-1].pk
        outcome.threads += [_thread_line(t) for t in batch]
        outcome.bytes += _threads_bytes([t.pk for t in batch])


def _thread_line(thread: Thread) -> dict[str, Any]:
    return {
        "thread": str(thread.pk),
        "external_id": thread.external_id,
        "last_seq": thread.last_seq,
        "inactive_since": format_time(thread.updated_at),
    }


def _threads_batch_delete(
    *,
    workspace: Workspace,
    now: datetime,
    limit: int,
    skipped: set[uuid.UUID],
    into: RetentionOutcome,
) -> bool:
    """Delete one batch of threads past retention, in one transaction, and add what went to
    `into` once it committed. Returns whether there was a batch (False: nothing left)."""
    went = RetentionOutcome(workspace=workspace.name, dry_run=False)
    kept: list[uuid.UUID] = []
    with transaction.atomic(durable=True):
        batch = threads_past_retention(workspace=workspace, now=now, exclude=skipped, limit=limit)
        if not batch:
            return False
        # The rows' bytes before they go (those of a thread kept under the lock are taken
        # back below: it is still there).
        went.bytes += _threads_bytes([t.pk for t in batch])
        for candidate in batch:
            deleted = thread_delete_locked(
                thread=candidate,
                now=now,
                inactive_before=now - timedelta(days=workspace.retention_days or 0),
                deleted_by=RETENTION_ACTOR,
                reason=f"inactive for more than {workspace.retention_days} days",
            )
            if deleted is None:
                kept.append(candidate.pk)
                continue
            line, rows = deleted
            went.threads.append(line)
            for table, count in rows.items():
                went.rows[table] = went.rows.get(table, 0) + count
        if kept:
            went.bytes -= _threads_bytes(kept)
    skipped.update(kept)
    into.threads += went.threads
    into.bytes += went.bytes
    for table, count in went.rows.items():
        into.rows[table] = into.rows.get(table, 0) + count
    return True


def _threads_bytes(thread_ids: Sequence[uuid.UUID]) -> int:
    """The estimated bytes of every row of these threads, the integrations' included."""
    total = rows_bytes(thread_rows(thread_ids))
    for deleter in thread_deleters:
        total += rows_bytes(deleter.rows(thread_ids))
    return total


def thread_delete_locked(
    *, thread: Thread, now: datetime, inactive_before: datetime, deleted_by: str, reason: str
) -> tuple[dict[str, Any], dict[str, int]] | None:
    """Delete one thread and every row of it, across the core and the integrations, leaving
    its signed tombstone. Runs in the caller's transaction; locks the thread row
    (select_for_update) first and re-checks under the lock what the selection checked
    (threads_past_retention): nothing appended or repaired since `inactive_before`, no fork,
    no open side effect or approval. None when it is not deleted; else the deleted thread's
    line and the rows deleted per table."""
    locked = (
        Thread.objects.select_for_update(of=("self",))
        .select_related("workspace")
        .filter(pk=thread.pk)
        .first()
    )
    if (
        locked is None
        or locked.updated_at >= inactive_before
        or AuditEntry.objects.filter(thread=locked, created_at__gte=inactive_before).exists()
        or not locked.chain_ok
        or Thread.objects.filter(parent_thread=locked).exists()
        or ApprovalRequest.objects.filter(thread=locked, status=ApprovalStatus.PENDING).exists()
        or SideEffect.objects.filter(thread=locked, status__in=OPEN_SIDE_EFFECTS).exists()
    ):
        return None
    try:
        key = chain_key(locked.chain_key_id)
    except ChainKeyUnknown:
        # No key to sign its tombstone with: kept until the key is configured again.
        return None
    line = _thread_line(locked)
    _tombstone_write(locked, key=key, now=now, deleted_by=deleted_by, reason=reason)
    rows: dict[str, int] = {}
    for deleter in thread_deleters:
        for table, count in deleter.delete(locked).items():
            rows[table] = rows.get(table, 0) + count
    # Audit entries keep who did what when; the thread link and any content go.
    AuditEntry.objects.filter(thread=locked).update(thread=None, before=None, after=None)
    rows.update(_core_rows_delete(locked))
    return line, rows


def _tombstone_write(
    thread: Thread, *, key: bytes | None, now: datetime, deleted_by: str, reason: str
) -> None:
    heads, _ = thread_published_heads(thread_id=thread.pk)
    seqs = sorted({h.seq for h in heads if h.seq <= thread.last_seq})
    hashes = stored_hashes(thread_id=thread.pk, seqs=seqs) if seqs else {}
    fields: dict[str, Any] = {
        "workspace": thread.workspace_id,  # its key: a name may change
        "thread": str(thread.pk),
        "external_id_sha256": external_id_digest(thread.external_id),
        "last_seq": thread.last_seq,
        "chain_head": thread.chain_head,
        "chain_key_id": thread.chain_key_id,
        "published_hashes": {str(seq): value for seq, value in sorted(hashes.items())},
        "deleted_by": deleted_by,
        "reason": reason,
        # Stored and signed at the precision the canonical form keeps.
        "deleted_at": format_time(now),
    }
    # A thread restored from a backup after its deletion and deleted again: the new tombstone
    # replaces the one its first deletion left.
    ThreadTombstone.objects.filter(thread_uid=thread.pk).delete()
    ThreadTombstone.objects.create(
        workspace=thread.workspace,
        thread_uid=thread.pk,
        external_id_sha256=fields["external_id_sha256"],
        last_seq=thread.last_seq,
        chain_head=thread.chain_head,
        chain_key_id=thread.chain_key_id,
        published_hashes=fields["published_hashes"],
        deleted_by=deleted_by,
        reason=reason,
        deleted_at=now,
        signature=tombstone_signature(fields, key),
    )


# The core's tables of a thread, in an order that deletes what refers to a row before the row
# (checkpoints and summary versions refer to each other: the constraints are checked at commit).
CORE_TABLES: tuple[type[Any], ...] = (
    ContextRequestLog,
    ThreadTool,
    Redaction,
    ApprovalRequest,
    SideEffect,
    Checkpoint,
    SummaryVersion,
    Event,
)


def _core_rows_delete(thread: Thread) -> dict[str, int]:
    rows: dict[str, int] = {}
    # Task runs through the ORM: an integration's row may point at one (SET_NULL).
    count, _ = TaskRun.objects.filter(thread=thread).delete()
    rows[TaskRun._meta.db_table] = count
    connection = connections[router.db_for_write(Thread)]
    quote = connection.ops.quote_name
    key = Thread._meta.pk.get_db_prep_value(thread.pk, connection)
    with connection.cursor() as cursor:
        for model in CORE_TABLES:
            sql = f"DELETE FROM {quote(model._meta.db_table)} WHERE thread_id = %s"  # noqa: S608
            if model is Event:
                with retention_delete_opened(connection, thread.pk):
                    cursor.execute(sql, [key])
            else:
                cursor.execute(sql, [key])
            rows[model._meta.db_table] = cursor.rowcount
        cursor.execute(f"DELETE FROM {quote(Thread._meta.db_table)} WHERE id = %s", [key])  # noqa: S608
        rows[Thread._meta.db_table] = cursor.rowcount
    return rows


UNSET: Any = object()


def workspace_retention_update(
    *,
    workspace: Workspace,
    actor_label: str,
    retention_days: int | None = UNSET,
    keep_checkpoints: int | None = UNSET,
) -> Workspace:
    """Change a workspace's retention policy, audited: `retention_days` (None: keep threads
    forever) and `keep_checkpoints` (None: keep every checkpoint), each at least 1; an argument
    left out stays as it is. Locks the workspace row (select_for_update)."""
    changes = {
        name: value
        for name, value in (
            ("retention_days", retention_days),
            ("keep_checkpoints", keep_checkpoints),
        )
        if value is not UNSET
    }
    for name, value in changes.items():
        if value is not None and value < 1:
            raise InvalidEvent(f"{name} must be at least 1", fields={name: "at least 1, or none"})
    return workspace_fields_update(workspace=workspace, actor_label=actor_label, changes=changes)
