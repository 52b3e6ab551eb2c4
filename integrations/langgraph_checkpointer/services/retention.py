"""The LangGraph checkpointer's part in retention (docs/operations.md, "Retention"), registered
with the core's hooks (threads.services.retention.thread_deleters,
threads.services.checkpoint_retention.checkpoint_pruners):

- a deleted thread loses every row of it here: checkpoints, writes, channel versions, the
  contents only they referred to, the mirrored-message index;
- a pruned checkpoint loses its LangGraph checkpoint and writes, and the channel versions no
  remaining checkpoint refers to, through the same code as `prune` and `delete_thread`
  (services/threads.py) — never a checkpoint the graph still needs: the latest of each
  namespace (where the graph resumes), one with pending writes no later checkpoint took up
  (writes stored before their checkpoint, or the writes of a branch's last checkpoint), and one
  a pending interrupt's approval names (its answer resumes from there).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from integrations.langgraph_checkpointer.domain.messages import INTERRUPT_ACTION
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.services.threads import (
    _checkpoints_delete,
    _versions_collect,
)
from threads.models import ApprovalRequest, ApprovalStatus, Checkpoint, Thread

WHY = "retention"


def langgraph_retention_thread_rows(thread_ids: Sequence[uuid.UUID]) -> list[QuerySet[Any]]:
    """The rows deleting these threads removes here, contents only they refer to included."""
    versions = LanggraphChannelVersion.objects.filter(thread__in=thread_ids)
    # Read through the versions' content index: only the contents these threads refer to.
    elsewhere = LanggraphChannelVersion.objects.filter(content=OuterRef("sha256")).exclude(
        thread__in=thread_ids
    )
    return [
        LanggraphCheckpoint.objects.filter(thread__in=thread_ids),
        LanggraphWrite.objects.filter(thread__in=thread_ids),
        versions,
        LanggraphMessage.objects.filter(thread__in=thread_ids),
        LanggraphContent.objects.filter(
            sha256__in=versions.filter(content__isnull=False).values("content")
        ).exclude(Exists(elsewhere)),
    ]


def langgraph_retention_thread_delete(thread: Thread) -> dict[str, int]:
    """Delete every row of the thread here (the caller holds its lock, in its transaction)."""
    rows = {
        LanggraphWrite._meta.db_table: LanggraphWrite.objects.filter(thread=thread).delete()[0],
        LanggraphCheckpoint._meta.db_table: LanggraphCheckpoint.objects.filter(
            thread=thread
        ).delete()[0],
    }
    contents = set(
        LanggraphChannelVersion.objects.filter(thread=thread, content__isnull=False).values_list(
            "content", flat=True
        )
    )
    rows[LanggraphChannelVersion._meta.db_table] = LanggraphChannelVersion.objects.filter(
        thread=thread
    ).delete()[0]
    still_used = LanggraphChannelVersion.objects.filter(content__in=contents).values("content")
    rows[LanggraphContent._meta.db_table] = (
        LanggraphContent.objects.filter(sha256__in=contents)
        .exclude(sha256__in=still_used)
        .delete()[0]
        if contents
        else 0
    )
    rows[LanggraphMessage._meta.db_table] = LanggraphMessage.objects.filter(thread=thread).delete()[
        0
    ]
    return rows


def langgraph_retention_needs(thread: Thread, checkpoints: Sequence[Checkpoint]) -> set[int]:
    """The ctxadmin checkpoint pks among `checkpoints` whose LangGraph checkpoint the graph
    still needs (see the module docstring)."""
    rows = list(
        LanggraphCheckpoint.objects.filter(
            thread=thread, ctxadmin_checkpoint__in=[c.pk for c in checkpoints]
        ).defer("checkpoint_z", "values_z")
    )
    if not rows:
        return set()
    everything = LanggraphCheckpoint.objects.filter(thread=thread)
    latest: dict[str, str] = {}
    for ns, checkpoint_id in everything.order_by("checkpoint_ns", "-checkpoint_id").values_list(
        "checkpoint_ns", "checkpoint_id"
    ):
        latest.setdefault(ns, checkpoint_id)
    parents = set(everything.values_list("checkpoint_ns", "parent_checkpoint_id"))
    stored_writes = set(
        LanggraphWrite.objects.filter(thread=thread).values_list("checkpoint_ns", "checkpoint_id")
    )
    interrupted = {
        (a.get("checkpoint_ns", ""), a.get("checkpoint_id"))
        for a in ApprovalRequest.objects.filter(
            thread=thread, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
        ).values_list("arguments", flat=True)
        if isinstance(a, dict)
    }
    needed = set()
    for row in rows:
        name = (row.checkpoint_ns, row.checkpoint_id)
        if (
            latest.get(row.checkpoint_ns) == row.checkpoint_id
            or name in stored_writes
            or name in interrupted
            or (bool(row.writes_z) and name not in parents)
        ):
            needed.add(row.ctxadmin_checkpoint_id)
    return needed


def langgraph_retention_checkpoint_rows(checkpoint_pks: Sequence[int]) -> list[QuerySet[Any]]:
    chosen = LanggraphCheckpoint.objects.filter(ctxadmin_checkpoint__in=checkpoint_pks)
    same = chosen.filter(
        thread=OuterRef("thread"),
        checkpoint_ns=OuterRef("checkpoint_ns"),
        checkpoint_id=OuterRef("checkpoint_id"),
    )
    return [chosen, LanggraphWrite.objects.filter(Exists(same))]


def langgraph_retention_checkpoints_delete(
    thread: Thread, gone: Sequence[Checkpoint], kept: Sequence[Checkpoint]
) -> dict[str, int]:
    """Delete the LangGraph checkpoints of `gone` and their writes, then the channel versions
    no remaining checkpoint of the thread refers to (the caller holds the thread's lock)."""
    rows = list(
        LanggraphCheckpoint.objects.filter(
            thread=thread, ctxadmin_checkpoint__in=[c.pk for c in gone]
        )
    )
    if not rows:
        return {}
    deleted = _checkpoints_delete(thread, rows, WHY)
    remaining = list(LanggraphCheckpoint.objects.filter(thread=thread))
    versions = _versions_collect(thread, remaining)
    return {
        LanggraphCheckpoint._meta.db_table: deleted,
        LanggraphChannelVersion._meta.db_table: versions,
    }
