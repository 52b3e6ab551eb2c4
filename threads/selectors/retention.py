"""What retention would delete, what it must keep, and what its deletions cost (docs/operations.md,
"Retention"); and what the published heads of deleted threads say (docs/event-log.md,
"Tombstones").

Bytes are an estimate of the rows' stored size: PostgreSQL sums `pg_column_size` of each row,
SQLite the byte lengths of each column's value. Neither counts index entries or the pages a
VACUUM gives back (docs/benchmarks.md, "Retention — `bench/retention.py`" measures both).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, router
from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from threads.domain.canonical import format_time
from threads.domain.heads import PublishedHead
from threads.domain.tombstones import GapVerdict, gap_check, tombstone_verifies
from threads.keys.chain import ChainKeyUnknown, chain_key
from threads.models import (
    ApprovalRequest,
    ApprovalStatus,
    AuditEntry,
    Checkpoint,
    ContextRequestLog,
    Event,
    SideEffect,
    SideEffectStatus,
    SummaryVersion,
    TaskRun,
    Thread,
    ThreadTombstone,
    ThreadTool,
    Workspace,
)
from threads.selectors.published_heads import published_heads

# Side effects still open: what a checkpoint listing them keeps it for.
OPEN_SIDE_EFFECTS = (SideEffectStatus.RUNNING, SideEffectStatus.UNKNOWN)


def retention_workspaces(*, name: str | None = None) -> QuerySet[Workspace]:
    """Workspaces with a retention policy (one of the two settings set), by name."""
    found = Workspace.objects.filter(
        Q(retention_days__isnull=False) | Q(keep_checkpoints__isnull=False)
    )
    if name is not None:
        found = found.filter(name=name)
    return found.order_by("name")


def threads_past_retention(
    *,
    workspace: Workspace,
    now: datetime,
    exclude: Iterable[uuid.UUID] = (),
    after: uuid.UUID | None = None,
    limit: int,
) -> list[Thread]:
    """The workspace's threads with no append and no repair for `retention_days` (their
    `updated_at`, which every append and fold moves, and no audit entry of theirs since),
    newest first so that a fork goes
    before the thread it was forked from. Kept, and never listed: a thread that still has forks,
    one with a side effect still open (running or unknown) or a pending approval (a person
    still has to act on it), and one whose chain check failed (the evidence stays).

    With `after` (a dry run's pages), in key order after that thread instead."""
    if workspace.retention_days is None:
        return []
    cutoff = now - timedelta(days=workspace.retention_days)
    open_approvals = ApprovalRequest.objects.filter(
        thread=OuterRef("pk"), status=ApprovalStatus.PENDING
    )
    running = SideEffect.objects.filter(thread=OuterRef("pk"), status=SideEffectStatus.RUNNING)
    forks = Thread.objects.filter(parent_thread=OuterRef("pk"))
    # A person's action on the thread since (a repair, a decision, a checkpoint, a pin or its
    # release): audited, though not all of them move `updated_at`.
    acted = AuditEntry.objects.filter(thread=OuterRef("pk"), created_at__gte=cutoff)
    found = (
        Thread.objects.filter(
            workspace=workspace, updated_at__lt=cutoff, unknown_side_effects=0, chain_ok=True
        )
        .exclude(pk__in=list(exclude))
        .exclude(Exists(open_approvals))
        .exclude(Exists(running))
        .exclude(Exists(forks))
        .exclude(Exists(acted))
    )
    if after is not None:
        return list(found.filter(pk__gt=after).order_by("pk")[:limit])
    return list(found.order_by("-created_at", "pk")[:limit])


def threads_over_checkpoints(
    *, workspace: Workspace, after: uuid.UUID | None, limit: int
) -> list[Thread]:
    """The workspace's threads with more than `keep_checkpoints` checkpoints, in key order
    after `after` (a run resumes from where its last batch stopped)."""
    if workspace.keep_checkpoints is None:
        return []
    found = Thread.objects.filter(workspace=workspace)
    if after is not None:
        found = found.filter(pk__gt=after)
    return list(
        found.annotate(checkpoint_count=Count("checkpoints"))
        .filter(checkpoint_count__gt=workspace.keep_checkpoints)
        .order_by("pk")[:limit]
    )


def checkpoints_beyond(*, thread: Thread, keep: int) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """The thread's checkpoints split into (the latest `keep`, by cursor then age; the rest)."""
    ordered = list(Checkpoint.objects.filter(thread=thread).order_by("-cursor", "-pk"))
    return ordered[:keep], ordered[keep:]


def checkpoints_needed(*, thread: Thread, checkpoints: Sequence[Checkpoint]) -> set[int]:
    """Which of `checkpoints` the core still needs (docs/operations.md, "Retention"):
    - the newest checkpoint of the current summary (the head version);
    - one a summary version was restored from, or a fork was made from (they name it);
    - for each side effect still open (running or unknown) and each approval still pending,
      the earliest checkpoint that lists it: the state as it stood when that work opened,
      which a rollback to before anyone acted on it needs."""
    needed: set[int] = set()
    pks = [c.pk for c in checkpoints]
    head = (
        Checkpoint.objects.filter(thread=thread, summary_version__version=thread.head_version)
        .order_by("-cursor", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    if head is not None:
        needed.add(head)
    needed.update(
        SummaryVersion.objects.filter(restored_from__in=pks).values_list("restored_from", flat=True)
    )
    needed.update(
        Thread.objects.filter(parent_checkpoint__in=pks).values_list("parent_checkpoint", flat=True)
    )
    open_effects = set(
        SideEffect.objects.filter(thread=thread, status__in=OPEN_SIDE_EFFECTS).values_list(
            "pk", flat=True
        )
    )
    open_approvals = set(
        ApprovalRequest.objects.filter(thread=thread, status=ApprovalStatus.PENDING).values_list(
            "pk", flat=True
        )
    )
    # Per open item, the earliest checkpoint listing it: the state as it was when the work
    # opened (every later one lists it too, and the latest K are kept anyway).
    first_listing: dict[tuple[str, Any], Checkpoint] = {}
    for checkpoint in sorted(checkpoints, key=lambda c: (c.cursor, c.pk)):
        for item in checkpoint.pending or []:
            kind, ref = item.get("kind"), item.get("id")
            if (kind == "side_effect" and ref in open_effects) or (
                kind == "approval" and ref in open_approvals
            ):
                first_listing.setdefault((kind, ref), checkpoint)
    needed.update(c.pk for c in first_listing.values())
    return {pk for pk in needed if pk is not None}


def thread_rows(thread_ids: Sequence[uuid.UUID]) -> list[QuerySet[Any]]:
    """The core's rows that deleting these threads removes (audit entries lose their content
    and their link, and are not counted)."""
    return [
        Thread.objects.filter(pk__in=thread_ids),
        Event.objects.filter(thread__in=thread_ids),
        SummaryVersion.objects.filter(thread__in=thread_ids),
        Checkpoint.objects.filter(thread__in=thread_ids),
        SideEffect.objects.filter(thread__in=thread_ids),
        ApprovalRequest.objects.filter(thread__in=thread_ids),
        ThreadTool.objects.filter(thread__in=thread_ids),
        TaskRun.objects.filter(thread__in=thread_ids),
        ContextRequestLog.objects.filter(thread__in=thread_ids),
    ]


def rows_bytes(querysets: Iterable[QuerySet[Any]]) -> int:
    """The estimated stored bytes of the rows of each queryset (see the module docstring)."""
    total = 0
    for queryset in querysets:
        model = queryset.model
        alias = router.db_for_write(model)
        connection = connections[alias]
        table = connection.ops.quote_name(model._meta.db_table)
        pk = connection.ops.quote_name(model._meta.pk.column)
        inner, params = queryset.values("pk").query.sql_with_params()
        if connection.vendor == "postgresql":
            size = "pg_column_size(t.*)"
        else:
            columns = [connection.ops.quote_name(f.column) for f in model._meta.concrete_fields]
            size = " + ".join(f"coalesce(length(CAST(t.{c} AS BLOB)), 0)" for c in columns)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT coalesce(sum({size}), 0) FROM {table} t WHERE t.{pk} IN ({inner})",  # noqa: S608
                params,
            )
            total += int(cursor.fetchone()[0] or 0)
    return total


@dataclass(frozen=True)
class DeletedThreadVerdict:
    thread: str
    workspace: str
    verdict: GapVerdict


def tombstone_fields(tombstone: ThreadTombstone) -> dict[str, Any]:
    """The signed fields of a stored tombstone, as they were signed."""
    return {
        "workspace": tombstone.workspace_id,
        "thread": str(tombstone.thread_uid),
        "external_id_sha256": tombstone.external_id_sha256,
        "last_seq": tombstone.last_seq,
        "chain_head": tombstone.chain_head,
        "chain_key_id": tombstone.chain_key_id,
        "published_hashes": dict(tombstone.published_hashes or {}),
        "deleted_by": tombstone.deleted_by,
        "reason": tombstone.reason,
        "deleted_at": format_time(tombstone.deleted_at),
    }


def tombstone_check(tombstone: ThreadTombstone) -> bool:
    """Whether the tombstone's signature verifies with its thread's chain key (False when that
    key is no longer configured: nothing can vouch for it then)."""
    try:
        key = chain_key(tombstone.chain_key_id)
    except ChainKeyUnknown:
        return False
    return tombstone_verifies(tombstone_fields(tombstone), tombstone.signature, key)


def deleted_threads_verdicts(*, workspace_name: str | None = None) -> list[DeletedThreadVerdict]:
    """Every thread the published heads name that the database no longer holds, held against
    its tombstone: explained ("deleted by retention at …, tombstone verifies"), or truncated /
    tampered like any log that lost what was published."""
    index = published_heads()
    named: dict[str, list[PublishedHead]] = {
        thread: heads
        for thread, heads in index.heads.items()
        if heads and (workspace_name is None or heads[-1].workspace == workspace_name)
    }
    if not named:
        return []
    present = {
        str(pk) for pk in Thread.objects.filter(pk__in=list(named)).values_list("pk", flat=True)
    }
    missing = sorted(set(named) - present)
    tombstones = {
        str(t.thread_uid): t for t in ThreadTombstone.objects.filter(thread_uid__in=missing)
    }
    verdicts = []
    for thread in missing:
        tombstone = tombstones.get(thread)
        fields = tombstone_fields(tombstone) if tombstone is not None else None
        verdict = gap_check(
            named[thread],
            tombstone=fields,
            signature_ok=tombstone is not None and tombstone_check(tombstone),
        )
        verdicts.append(DeletedThreadVerdict(thread, named[thread][-1].workspace, verdict))
    return verdicts
