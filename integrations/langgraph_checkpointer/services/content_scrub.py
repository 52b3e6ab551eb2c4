"""The LangGraph checkpointer's part of a redaction (docs/langgraph.md, "Redaction"): a
redacted event's content leaves the thread's stored LangGraph state.

Registered into threads.services.content_scrub.content_scrubbers by the app's `ready()`, and
run inside the redaction's transaction. It rewrites, for the thread:
- channel values: a version row's own bytes, and a content row (keyed by the SHA-256 of its
  bytes: the rewritten bytes get a row of their own under their own key, the thread's versions
  are re-pointed at it, and the old row goes once no version of any thread refers to it);
- checkpoints: their JSON, the small values and pending writes they carry, their metadata;
- pending writes stored before their checkpoint, and the interrupts waiting with them;
- the message index: the digest of a message whose carrying event is the redacted one becomes
  the digest of its redacted form (`redacted_message`), which the saver reads back from then
  on; the old digest, a hash of the content, goes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import message_digest
from integrations.langgraph_checkpointer.domain.packing import PackedWrite, TaskWrites
from integrations.langgraph_checkpointer.domain.scrub import typed_value_scrub
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.redacted import langgraph_redacted_forms
from threads.domain.scrub import Needles, scrub_json
from threads.models import Thread


def langgraph_content_scrub(
    *, thread: Thread, seq: int, needles: Sequence[str], placeholder: str
) -> dict[str, int]:
    """Remove the needles from the thread's LangGraph state; answers the rows changed by store:
    `langgraph_values` (version rows), `langgraph_contents` (content rows rewritten),
    `langgraph_checkpoints`, `langgraph_writes`, `langgraph_messages`. Runs in the caller's
    transaction, which holds the thread's lock."""
    # A message's LangChain id is an id the saver keys on, not content.
    ids = set(
        LanggraphMessage.objects.filter(thread=thread, message_id__in=list(needles)).values_list(
            "message_id", flat=True
        )
    )
    found = Needles([n for n in needles if n not in ids], placeholder)
    counts = {
        "langgraph_values": 0,
        "langgraph_contents": 0,
        "langgraph_checkpoints": 0,
        "langgraph_writes": 0,
        "langgraph_messages": _messages_scrub(thread, seq),
    }
    if not found:
        return counts
    _versions_scrub(thread, found, counts)
    counts["langgraph_checkpoints"] = _checkpoints_scrub(thread, found)
    counts["langgraph_writes"] = _writes_scrub(thread, found)
    return counts


def _versions_scrub(thread: Thread, found: Needles, counts: dict[str, int]) -> None:
    """Version rows' own bytes, then the content rows they point at."""
    versions = LanggraphChannelVersion.objects.filter(thread=thread)
    for pk, type_, data in versions.filter(data__isnull=False).values_list("pk", "type", "data"):
        scrubbed = typed_value_scrub(type_, bytes(data or b""), found)
        if scrubbed is not None:
            LanggraphChannelVersion.objects.filter(pk=pk).update(type=scrubbed[0], data=scrubbed[1])
            counts["langgraph_values"] += 1
    types: dict[str, str] = dict(
        versions.filter(content__isnull=False).values_list("content_id", "type")
    )
    for key, data in LanggraphContent.objects.filter(sha256__in=list(types)).values_list(
        "sha256", "data"
    ):
        scrubbed = typed_value_scrub(types[key], bytes(data), found)
        if scrubbed is None:
            continue
        new_type, new_data = scrubbed
        new_key = hashlib.sha256(new_data).hexdigest()
        LanggraphContent.objects.bulk_create(
            [LanggraphContent(sha256=new_key, data=new_data, size=len(new_data))],
            ignore_conflicts=True,
        )
        counts["langgraph_values"] += versions.filter(content_id=key).update(
            content_id=new_key, type=new_type
        )
        counts["langgraph_contents"] += 1
        # Another thread with the very same bytes (a copy of this one) keeps its own row.
        if not LanggraphChannelVersion.objects.filter(content_id=key).exists():
            LanggraphContent.objects.filter(sha256=key).delete()


def _writes_of(writes: list[PackedWrite], found: Needles) -> list[PackedWrite] | None:
    out, changed = [], False
    for write in writes:
        scrubbed = typed_value_scrub(write.type, write.data, found)
        if scrubbed is None:
            out.append(write)
            continue
        changed = True
        out.append(
            PackedWrite(
                idx=write.idx,
                channel=found.sub(write.channel),
                type=scrubbed[0],
                data=scrubbed[1],
                message_seqs=write.message_seqs,
            )
        )
    return out if changed else None


def _checkpoints_scrub(thread: Thread, found: Needles) -> int:
    changed = 0
    for row in LanggraphCheckpoint.objects.filter(thread=thread).order_by("pk"):
        updates: dict[str, Any] = {}
        checkpoint = scrub_json(row.checkpoint, found)
        if checkpoint is not row.checkpoint:
            row.checkpoint = checkpoint
            updates["checkpoint_z"] = row.checkpoint_z
        metadata = scrub_json(row.metadata, found)
        if metadata is not row.metadata:
            updates["metadata"] = metadata
        values = row.small_values
        new_values = {
            channel: None if value is None else typed_value_scrub(value[0], value[1], found)
            for channel, value in values.items()
        }
        if any(v is not None for v in new_values.values()):
            row.small_values = {
                channel: new_values[channel] or value for channel, value in values.items()
            }
            updates["values_z"] = row.values_z
        tasks = row.task_writes
        new_tasks = [_writes_of(task.writes, found) for task in tasks]
        if any(w is not None for w in new_tasks):
            row.task_writes = [
                TaskWrites(task.task_id, task.task_path, writes or task.writes)
                for task, writes in zip(tasks, new_tasks, strict=True)
            ]
            updates["writes_z"] = row.writes_z
        if updates:
            LanggraphCheckpoint.objects.filter(pk=row.pk).update(**updates)
            changed += 1
    return changed


def _writes_scrub(thread: Thread, found: Needles) -> int:
    changed = 0
    for row in LanggraphWrite.objects.filter(thread=thread).order_by("pk"):
        updates: dict[str, Any] = {}
        writes = _writes_of(row.writes, found)
        if writes is not None:
            row.writes = writes
            updates["writes_z"] = row.writes_z
        interrupts = scrub_json(row.interrupts, found)
        if interrupts is not row.interrupts:
            updates["interrupts"] = interrupts
        if updates:
            LanggraphWrite.objects.filter(pk=row.pk).update(**updates)
            changed += 1
    return changed


def _messages_scrub(thread: Thread, seq: int) -> int:
    """The message carried by event `seq` gets the digest of its redacted form: the form the
    saver reads back, so that a put naming the message by id and that digest finds it. (A
    second message of the same id, redacted too, keeps a digest of its seq instead: the index
    holds one row per id and digest.)"""
    rows = list(LanggraphMessage.objects.filter(thread=thread, seq=seq))
    if not rows:
        return 0
    forms = langgraph_redacted_forms(thread, [seq])
    digest = message_digest(forms[seq])
    for row in rows:
        taken = (
            LanggraphMessage.objects.filter(thread=thread, message_id=row.message_id, digest=digest)
            .exclude(pk=row.pk)
            .exists()
        )
        new = hashlib.sha256(f"redacted:{seq}".encode()).hexdigest() if taken else digest
        LanggraphMessage.objects.filter(pk=row.pk).update(digest=new)
    return len(rows)
