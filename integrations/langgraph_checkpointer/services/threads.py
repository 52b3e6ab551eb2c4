"""The LangGraph checkpointer's operations on whole threads: delete a thread's checkpoints,
prune, delete those of runs, copy a thread's to another.

Deleting or pruning removes checkpoints, versions and writes, never the log; the ctxadmin
Checkpoints they leave are marked unsafe, and an audit entry names the key that did it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from integrations.langgraph_checkpointer.domain.messages import INTERRUPT_ACTION
from integrations.langgraph_checkpointer.domain.packing import PackedWrite, writes_pack
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    langgraph_thread_get,
    langgraph_threads_get,
)
from integrations.langgraph_checkpointer.selectors.messages import (
    langgraph_message_index,
    langgraph_messages_at,
    langgraph_side_effect_tools,
)
from integrations.langgraph_checkpointer.services.checkpoint_put import _checkpoint_save, _lock
from integrations.langgraph_checkpointer.services.interrupts import (
    _interrupt_approvals_close,
    _interrupt_request_append,
)
from integrations.langgraph_checkpointer.services.message_mirror import (
    _messages_append,
    _mirrored_cursor,
    _reference,
)
from threads.domain.errors import InvalidEvent
from threads.models import ApprovalRequest, ApprovalStatus, Checkpoint, Thread, Workspace
from threads.services.audit import audit_record
from threads.services.threads import thread_get_or_create

PRUNE_STRATEGIES = ("keep_latest", "delete")


def _versions_collect(thread: Thread, keep: Sequence[LanggraphCheckpoint]) -> int:
    """Delete the thread's channel versions that no checkpoint in `keep` refers to, then the
    contents no version refers to any more. Returns the number of versions deleted."""
    wanted = {
        (row.checkpoint_ns, str(channel), str(version))
        for row in keep
        for channel, version in (row.checkpoint.get("channel_versions") or {}).items()
    }
    drop = [
        (pk, content)
        for pk, ns, channel, version, content in LanggraphChannelVersion.objects.filter(
            thread=thread
        ).values_list("pk", "checkpoint_ns", "channel", "version", "content_id")
        if (ns, channel, version) not in wanted
    ]
    LanggraphChannelVersion.objects.filter(pk__in=[pk for pk, _ in drop]).delete()
    candidates = {content for _, content in drop if content is not None}
    if candidates:
        still_used = LanggraphChannelVersion.objects.filter(content__in=candidates).values(
            "content"
        )
        LanggraphContent.objects.filter(sha256__in=candidates).exclude(
            sha256__in=still_used
        ).delete()
    return len(drop)


def _checkpoints_delete(thread: Thread, rows: Sequence[LanggraphCheckpoint], why: str) -> int:
    """Delete checkpoints and their writes; their ctxadmin Checkpoints stay, marked unsafe."""
    if not rows:
        return 0
    by_ns: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_ns[row.checkpoint_ns].append(row.checkpoint_id)
    for ns, ids in by_ns.items():
        LanggraphWrite.objects.filter(
            thread=thread, checkpoint_ns=ns, checkpoint_id__in=ids
        ).delete()
    ctxadmin_ids = [row.ctxadmin_checkpoint_id for row in rows]
    LanggraphCheckpoint.objects.filter(pk__in=[row.pk for row in rows]).delete()
    Checkpoint.objects.filter(pk__in=ctxadmin_ids).update(
        safe=False, unsafe_reason=f"its LangGraph checkpoint was deleted ({why})"
    )
    return len(rows)


def _thread_checkpoints(thread: Thread) -> list[LanggraphCheckpoint]:
    return list(
        LanggraphCheckpoint.objects.filter(thread=thread).order_by(
            "checkpoint_ns", "-checkpoint_id", "-pk"
        )
    )


def _audit(thread: Thread, action: str, actor_label: str, before: Any, after: Any) -> None:
    audit_record(
        workspace=thread.workspace,
        actor=None,
        actor_label=actor_label or "system",
        action=action,
        target_type="thread",
        target_id=thread.pk,
        thread=thread,
        before=before,
        after=after,
    )


def langgraph_threads_prune(
    *, workspace: Workspace, external_ids: Sequence[str], strategy: str, actor_label: str = ""
) -> int:
    """Prune the threads' LangGraph checkpoints: `keep_latest` keeps the newest of each
    namespace (and its writes), `delete` removes every one. Channel versions no remaining
    checkpoint refers to go too; the event log stays. One audit entry per thread. Locks each
    thread row (select_for_update). Returns the number of checkpoints deleted."""
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidEvent(
            f"unknown strategy {strategy!r}",
            fields={"strategy": f"must be one of {', '.join(PRUNE_STRATEGIES)}"},
        )
    deleted = 0
    with transaction.atomic(durable=True):
        for found in langgraph_threads_get(workspace=workspace, external_ids=set(external_ids)):
            thread = _lock(found)
            rows = _thread_checkpoints(thread)
            keep: list[LanggraphCheckpoint] = []
            if strategy == "keep_latest":
                latest: dict[str, LanggraphCheckpoint] = {}
                for row in rows:
                    latest.setdefault(row.checkpoint_ns, row)
                keep = list(latest.values())
            kept = {row.pk for row in keep}
            gone = [row for row in rows if row.pk not in kept]
            why = f"langgraph.prune {strategy}"
            count = _checkpoints_delete(thread, gone, why)
            versions = _versions_collect(thread, keep)
            closed = _interrupt_approvals_close(thread, gone if keep else None, why, actor_label)
            deleted += count
            _audit(
                thread,
                "langgraph.prune",
                actor_label,
                {"checkpoints": len(rows)},
                {
                    "strategy": strategy,
                    "deleted": [row.checkpoint_id for row in gone],
                    "kept": [row.checkpoint_id for row in keep],
                    "versions_deleted": versions,
                    "approvals_closed": closed,
                },
            )
    return deleted


def langgraph_thread_delete(
    *, workspace: Workspace, external_id: str, actor_label: str = ""
) -> int:
    """Delete every LangGraph checkpoint, channel version and write of the thread; the event
    log and its chain stay, and so do its mirrored messages. Audited. Locks the thread row
    (select_for_update). Returns the number of checkpoints deleted (0 for no such thread)."""
    found = langgraph_thread_get(workspace=workspace, external_id=external_id)
    if found is None:
        return 0
    with transaction.atomic(durable=True):
        thread = _lock(found)
        rows = _thread_checkpoints(thread)
        count = _checkpoints_delete(thread, rows, "langgraph.delete_thread")
        # Writes of checkpoints never stored (put_writes before put) go too.
        LanggraphWrite.objects.filter(thread=thread).delete()
        versions = _versions_collect(thread, [])
        closed = _interrupt_approvals_close(thread, None, "langgraph.delete_thread", actor_label)
        _audit(
            thread,
            "langgraph.delete_thread",
            actor_label,
            {"checkpoints": len(rows)},
            {
                "deleted": [row.checkpoint_id for row in rows],
                "versions_deleted": versions,
                "approvals_closed": closed,
            },
        )
    return count


def langgraph_runs_delete(
    *, workspace: Workspace, run_ids: Sequence[str], actor_label: str = ""
) -> int:
    """Delete the workspace's checkpoints whose metadata names one of `run_ids`, and their
    writes. Channel versions stay (a later checkpoint may refer to them). Audited per thread;
    locks each thread row (select_for_update). Returns the number deleted."""
    ids = sorted({str(run_id) for run_id in run_ids if run_id})
    if not ids:
        return 0
    deleted = 0
    with transaction.atomic(durable=True):
        threads = Thread.objects.filter(
            workspace=workspace, lg_checkpoints__run_id__in=ids
        ).distinct()
        for found in threads.order_by("pk"):
            thread = _lock(found)
            rows = list(LanggraphCheckpoint.objects.filter(thread=thread, run_id__in=ids))
            deleted += _checkpoints_delete(thread, rows, "langgraph.delete_for_runs")
            closed = _interrupt_approvals_close(
                thread, rows, "langgraph.delete_for_runs", actor_label
            )
            _audit(
                thread,
                "langgraph.delete_for_runs",
                actor_label,
                {"run_ids": ids},
                {"deleted": [row.checkpoint_id for row in rows], "approvals_closed": closed},
            )
    return deleted


def _copy_messages(source: Thread, target: Thread) -> dict[int, LanggraphMessage]:
    """Mirror the source's messages into the target's log, in the source's order, with the same
    keys (a new log with its own chain) and the same side-effect marking of their tool calls.
    Returns source carrying seq -> target message."""
    rows = list(LanggraphMessage.objects.filter(thread=source).order_by("seq"))
    if not rows:
        return {}
    forms = langgraph_messages_at(source, [row.seq for row in rows])
    keys = dict(
        source.events.filter(seq__in=[row.seq for row in rows]).values_list(
            "seq", "client_event_id"
        )
    )
    known = {
        (m.message_id, m.digest): m
        for m in langgraph_message_index(target, {r.message_id for r in rows})
    }
    planned = [
        (row.message_id, row.digest, form, keys[row.seq] or row.message_id)
        for row, form in zip(rows, forms, strict=True)
        if (row.message_id, row.digest) not in known
    ]
    known.update(_messages_append(target, planned, langgraph_side_effect_tools(source)))
    return {row.seq: known[(row.message_id, row.digest)] for row in rows}


def langgraph_thread_copy(
    *, workspace: Workspace, source_external_id: str, target_external_id: str, actor_label: str = ""
) -> int:
    """Copy every LangGraph checkpoint, channel version and write of one thread to the thread
    `target_external_id` (created if needed). The target's messages are mirrored into its own
    log. Audited. Locks both thread rows (select_for_update, in key order). Returns the number
    of checkpoints copied (0 when the source has none)."""
    source = langgraph_thread_get(workspace=workspace, external_id=source_external_id)
    if source is None or not source.lg_checkpoints.exists():
        return 0
    target, _ = thread_get_or_create(
        workspace=workspace, external_id=target_external_id, actor_label=actor_label
    )
    with transaction.atomic(durable=True):
        locked = {t.pk: _lock(t) for t in sorted((source, target), key=lambda t: str(t.pk))}
        source, target = locked[source.pk], locked[target.pk]
        moved = _copy_messages(source, target)
        ends = sorted((row.last_seq, seq) for seq, row in moved.items())

        def translated(until: int) -> list[LanggraphMessage]:
            return [moved[seq] for last, seq in ends if last <= until]

        def translate(write: PackedWrite) -> PackedWrite:
            if write.message_seqs is None:
                return write
            return dataclasses.replace(
                write, message_seqs=[moved[seq].seq for seq in write.message_seqs]
            )

        versions = []
        for version in LanggraphChannelVersion.objects.filter(thread=source):
            copy = LanggraphChannelVersion(
                thread=target,
                checkpoint_ns=version.checkpoint_ns,
                channel=version.channel,
                version=version.version,
                type=version.type,
                content_id=version.content_id,
                data=version.data,
            )
            if version.messages_until_seq is not None or version.message_seqs is not None:
                refs = (
                    [moved[int(seq)] for seq in version.message_seqs]
                    if version.message_seqs is not None
                    else translated(version.messages_until_seq or 0)
                )
                copy.messages_until_seq, copy.message_seqs, copy.cursor = _reference(target, refs)
                copy.message_count = len(refs)
            versions.append(copy)
        LanggraphChannelVersion.objects.bulk_create(versions, ignore_conflicts=True)
        copied = 0
        for row in LanggraphCheckpoint.objects.filter(thread=source).order_by("pk"):
            exists = LanggraphCheckpoint.objects.filter(
                thread=target, checkpoint_ns=row.checkpoint_ns, checkpoint_id=row.checkpoint_id
            ).exists()
            if exists:
                continue
            saved = _checkpoint_save(
                target,
                checkpoint_ns=row.checkpoint_ns,
                checkpoint_id=row.checkpoint_id,
                parent_checkpoint_id=row.parent_checkpoint_id,
                checkpoint=row.checkpoint,
                metadata=row.metadata,
                cursor=_mirrored_cursor(target, row.checkpoint_ns, row.checkpoint),
                small_values=row.small_values,
            )
            if row.writes_z:
                saved.task_writes = [
                    dataclasses.replace(task, writes=[translate(w) for w in task.writes])
                    for task in row.task_writes
                ]
                saved.save(update_fields=["writes_z"])
            copied += 1
        LanggraphWrite.objects.bulk_create(
            [
                LanggraphWrite(
                    thread=target,
                    checkpoint_ns=row.checkpoint_ns,
                    checkpoint_id=row.checkpoint_id,
                    task_id=row.task_id,
                    task_path=row.task_path,
                    writes_z=writes_pack([translate(w) for w in row.writes]),
                )
                for row in LanggraphWrite.objects.filter(thread=source)
            ],
            ignore_conflicts=True,
        )
        # The source's pending interrupts wait for a reviewer in the copy too: its resume
        # reads the copy's approvals.
        approvals = 0
        for approval in ApprovalRequest.objects.filter(
            thread=source, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
        ).order_by("request_event__seq"):
            if isinstance(approval.arguments, dict) and approval.arguments.get("interrupt_id"):
                _interrupt_request_append(target, dict(approval.arguments))
                approvals += 1
        _audit(
            target,
            "langgraph.copy_thread",
            actor_label,
            None,
            {
                "source": source.external_id,
                "source_thread": str(source.pk),
                "checkpoints": copied,
                "approvals": approvals,
            },
        )
    return copied
