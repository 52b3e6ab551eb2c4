"""Checkpoint retention (docs/operations.md, "Retention"): a workspace's `keep_checkpoints`
keeps the latest K checkpoints of each thread (by cursor) and deletes the rest, except those
something still needs — the core (threads.selectors.retention.checkpoints_needed) or an
integration whose state a checkpoint lists (`CheckpointPruner.needs`).

An integration's state attached to a checkpoint (a LangGraph checkpoint, its writes and the
channel versions only it referred to) is deleted by the integration (`CheckpointPruner.delete`)
before the core deletes the checkpoint rows, in the same transaction. Batches of threads, each
its own transaction; a run goes through the threads in key order, so one stopped half way is
taken up by the next from the start, with nothing left half done.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from threads.models import Checkpoint, Thread, Workspace
from threads.selectors.retention import (
    checkpoints_beyond,
    checkpoints_needed,
    rows_bytes,
    threads_over_checkpoints,
)
from threads.services.threads import thread_lock


@dataclass(frozen=True)
class CheckpointPruner:
    """An integration's part in pruning checkpoints:
    - `needs(thread, checkpoints)`: the pks among `checkpoints` its state still needs;
    - `rows(checkpoint pks)`: its rows deleting them removes (for the bytes);
    - `delete(thread, gone, kept)`: remove its state of `gone` (checkpoints of the thread),
      keeping what `kept` refers to; in the caller's transaction, the thread locked. Answers
      rows deleted per table."""

    name: str
    needs: Callable[[Thread, Sequence[Checkpoint]], set[int]]
    rows: Callable[[Sequence[int]], list[QuerySet[Any]]]
    delete: Callable[[Thread, Sequence[Checkpoint], Sequence[Checkpoint]], dict[str, int]]


checkpoint_pruners: list[CheckpointPruner] = []


@dataclass
class CheckpointsOutcome:
    deleted: int = 0
    kept_needed: int = 0  # beyond K but needed
    threads: list[dict[str, Any]] = field(default_factory=list)  # {"thread", "deleted", "kept"}
    rows: dict[str, int] = field(default_factory=dict)
    bytes: int = 0


def checkpoints_plan(*, thread: Thread, keep: int) -> tuple[list[Checkpoint], list[Checkpoint]]:
    """(checkpoints to delete, checkpoints kept) of a thread under `keep_checkpoints` = keep."""
    latest, beyond = checkpoints_beyond(thread=thread, keep=keep)
    if not beyond:
        return [], latest
    needed = checkpoints_needed(thread=thread, checkpoints=beyond)
    for pruner in checkpoint_pruners:
        needed |= pruner.needs(thread, beyond)
    gone = [c for c in beyond if c.pk not in needed]
    kept = latest + [c for c in beyond if c.pk in needed]
    return gone, kept


def checkpoints_retention_apply(
    *,
    workspace: Workspace,
    dry_run: bool,
    batch_size: int,
    deleting: Collection[uuid.UUID] = (),
    into: CheckpointsOutcome | None = None,
) -> CheckpointsOutcome:
    """Delete (dry: list) the checkpoints beyond the workspace's `keep_checkpoints` that nothing
    needs, `batch_size` threads a transaction, adding each committed batch's count to `into`
    (a new outcome when None), which it returns. Locks each thread row (select_for_update)
    before reading its checkpoints when not dry. A dry run leaves out the threads in
    `deleting`: the run deletes those whole first."""
    outcome = into if into is not None else CheckpointsOutcome()
    if workspace.keep_checkpoints is None:
        return outcome
    after: uuid.UUID | None = None
    while batch := threads_over_checkpoints(workspace=workspace, after=after, limit=batch_size):
        after = batch[-1].pk
        if dry_run:
            for thread in batch:
                if thread.pk not in deleting:
                    _thread_plan(thread, workspace.keep_checkpoints, outcome, delete=False)
            continue
        went = CheckpointsOutcome()
        with transaction.atomic(durable=True):
            for thread in batch:
                _thread_plan(thread_lock(thread), workspace.keep_checkpoints, went, delete=True)
        outcome.deleted += went.deleted
        outcome.kept_needed += went.kept_needed
        outcome.threads += went.threads
        outcome.bytes += went.bytes
        for table, count in went.rows.items():
            outcome.rows[table] = outcome.rows.get(table, 0) + count
    return outcome


def _thread_plan(thread: Thread, keep: int, outcome: CheckpointsOutcome, *, delete: bool) -> None:
    gone, kept = checkpoints_plan(thread=thread, keep=keep)
    outcome.kept_needed += max(len(kept) - keep, 0)
    if not gone:
        return
    pks = [c.pk for c in gone]
    outcome.bytes += rows_bytes([Checkpoint.objects.filter(pk__in=pks)])
    for pruner in checkpoint_pruners:
        outcome.bytes += rows_bytes(pruner.rows(pks))
    outcome.deleted += len(gone)
    outcome.threads.append(
        {
            "thread": str(thread.pk),
            "external_id": thread.external_id,
            "deleted": len(gone),
            "kept": len(kept),
        }
    )
    if not delete:
        return
    for pruner in checkpoint_pruners:
        for table, count in pruner.delete(thread, gone, kept).items():
            outcome.rows[table] = outcome.rows.get(table, 0) + count
    count, _ = Checkpoint.objects.filter(pk__in=pks).delete()
    table = Checkpoint._meta.db_table
    outcome.rows[table] = outcome.rows.get(table, 0) + count
