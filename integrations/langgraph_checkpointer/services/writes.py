"""The LangGraph checkpointer's pending writes: a task's writes after a checkpoint, stored as
sent (a write of messages mirrored into the log and stored as references to it), in the
checkpoint's row once it is stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from integrations.langgraph_checkpointer.domain.packing import (
    PackedWrite,
    TaskWrites,
    tasks_pack,
    tasks_unpack,
    writes_pack,
)
from integrations.langgraph_checkpointer.models import LanggraphMessage, LanggraphWrite
from integrations.langgraph_checkpointer.services.checkpoint_put import _locked_thread
from integrations.langgraph_checkpointer.services.interrupts import InterruptIn, _interrupts_request
from integrations.langgraph_checkpointer.services.message_mirror import MessageIn, _messages_resolve
from integrations.langgraph_checkpointer.services.statements import (
    checkpoint_writes_locked,
    checkpoint_writes_update,
    message_index_and_cursor,
    thread_found,
)
from threads.domain.errors import Conflict
from threads.models import Thread, Workspace
from threads.services.threads import thread_get_or_create


class MessagesUnordered(Conflict):
    """A write's new messages cannot be appended to the log in the conversation's order: the
    checkpoint it follows is not stored yet, or the log holds other messages after its
    messages. The saver sends that write as bytes."""

    code = "messages_unordered"


@dataclass(frozen=True)
class WriteIn:
    """One pending write: serialised bytes, or (`messages`) the LangChain messages of a write
    to the mirrored channel, which are mirrored into the log and stored as references to it."""

    idx: int
    channel: str
    type: str = ""
    data: bytes = b""
    messages: Sequence[MessageIn] | None = None


def _writes_order_check(
    thread: Thread, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[WriteIn]
) -> dict[tuple[str, str], LanggraphMessage]:
    """Refuse (MessagesUnordered) to append a write's new messages anywhere but right after
    the messages of the checkpoint it follows, which is where LangGraph's `add_messages` puts
    them: the log stays in the conversation's order even when a write arrives before its
    checkpoint (LangGraph sends both from background threads). Returns the log's index of the
    writes' messages."""
    pairs = {(e.id, e.digest) for w in writes for e in w.messages or ()}
    # One statement: the index of the writes' messages, and the checkpoint's cursor (the last
    # seq of its mirrored messages, 0: none) with the messages after it.
    index, end, after = message_index_and_cursor(
        thread, {p[0] for p in pairs}, checkpoint_ns, checkpoint_id
    )
    known = {(m.message_id, m.digest): m for m in index}
    if pairs <= set(known):
        return known  # nothing to append: only references
    if end is None or any(pair not in pairs for pair in after):
        raise MessagesUnordered(
            "these messages cannot be appended in the conversation's order yet: send the write "
            "as bytes",
            fields={"checkpoint_id": checkpoint_id},
        )
    return known


def langgraph_writes_put(
    *,
    workspace: Workspace,
    external_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[WriteIn],
    interrupts: Sequence[InterruptIn] = (),
    side_effect_tools: frozenset[str] = frozenset(),
    actor_label: str = "",
) -> None:
    """Store a task's pending writes after `checkpoint_id`. A write with idx >= 0 is stored once
    (a repeat is ignored); a special channel's (negative idx: error, interrupt, resume...)
    replaces the earlier one, as LangGraph's savers do. A write of messages to the mirrored
    channel is mirrored into the log (each message once, as a put does) and stored as the seqs
    of their events, not as a second copy. Each of `interrupts` opens an approval request
    (action `langgraph.interrupt`), once: now when the checkpoint is stored, else at its put,
    after its messages (LangGraph sends a task's writes before the background put of the
    checkpoint it ran from may have arrived, and the request must follow the call it asks
    about). Locks the thread row (select_for_update) only when it
    has messages or interrupts to number; bytes alone number nothing. Raises MessagesNotMirrored
    (422) when the messages have no event form: the saver sends that write as bytes."""
    mirrored = [w for w in writes if w.messages is not None]
    with transaction.atomic(durable=True):
        if interrupts or mirrored:
            thread = _locked_thread(workspace, external_id, actor_label)
        else:
            thread = (
                thread_found(workspace, external_id)
                or (
                    thread_get_or_create(
                        workspace=workspace, external_id=external_id, actor_label=actor_label
                    )[0]
                )
            )
        langgraph_writes_put_locked(
            thread=thread,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            task_path=task_path,
            writes=writes,
            interrupts=interrupts,
            side_effect_tools=side_effect_tools,
        )


def langgraph_writes_put_locked(
    *,
    thread: Thread,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[WriteIn],
    interrupts: Sequence[InterruptIn] = (),
    side_effect_tools: frozenset[str] = frozenset(),
) -> None:
    """`langgraph_writes_put` inside the caller's transaction, which holds the thread's lock
    when the writes have messages or interrupts (a batch of puts and writes)."""
    stored = _writes_store(
        thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        task_path=task_path,
        writes=writes,
        mirrored=[w for w in writes if w.messages is not None],
        side_effect_tools=side_effect_tools,
        interrupts=interrupts,
    )
    if interrupts and stored:
        _interrupts_request(thread, interrupts, checkpoint_ns, checkpoint_id)


def _writes_store(
    thread: Thread,
    *,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[WriteIn],
    mirrored: Sequence[WriteIn],
    side_effect_tools: frozenset[str],
    interrupts: Sequence[InterruptIn] = (),
) -> bool:
    """Store the writes (see langgraph_writes_put). Returns whether the checkpoint they follow
    is stored; when not, `interrupts` wait in the task's writes row for its put."""
    where = {
        "thread": thread,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "task_id": task_id,
    }
    seqs: dict[int, list[int]] = {}
    if mirrored:
        known = _writes_order_check(thread, checkpoint_ns, checkpoint_id, mirrored)
    for write in mirrored:
        assert write.messages is not None
        # Each message once in the log, as a put would mirror it; the write refers to it.
        refs = _messages_resolve(thread, write.messages, side_effect_tools, known)
        known.update({(r.message_id, r.digest): r for r in refs})
        seqs[write.idx] = [ref.seq for ref in refs]
    new = [
        PackedWrite(
            idx=w.idx,
            channel=w.channel,
            type=w.type,
            data=w.data,
            message_seqs=seqs.get(w.idx) if w.messages is not None else None,
        )
        for w in writes
    ]
    return _task_writes_merge(where, task_path, new, interrupts)


def _writes_merged(
    stored: Sequence[PackedWrite], new: Sequence[PackedWrite]
) -> list[PackedWrite] | None:
    """`stored` with `new` added: a write with idx >= 0 is kept once (the first stands), a
    negative idx replaces the earlier one (within one call the first stands). None when nothing
    changes."""
    merged = {w.idx: w for w in stored}
    replaced: set[int] = set()
    changed = False
    for write in new:
        if write.idx not in merged or (write.idx < 0 and write.idx not in replaced):
            changed = changed or merged.get(write.idx) != write
            merged[write.idx] = write
            replaced.add(write.idx)
    return list(merged.values()) if changed else None


def _task_writes_merge(
    where: dict[str, Any],
    task_path: str,
    new: Sequence[PackedWrite],
    interrupts: Sequence[InterruptIn] = (),
) -> bool:
    """Add `new` to the task's writes after the checkpoint: into the checkpoint's row when it
    is stored (no row of their own), else into a row for the task, which is where that task's
    later writes go too; while the checkpoint is not stored, `interrupts` wait in that row for
    its put (each id once). The row merged into is locked (select_for_update); when two
    requests create the task's row at once, the loser merges into the winner's. Returns
    whether the checkpoint is stored."""
    task_id = where["task_id"]
    # One statement on the hot path: the checkpoint's row, locked, and whether the task has a
    # row of its own. The task row's queryset is built only when it is needed (building it on
    # every write cost about as much as the rest of the merge).
    checkpoint = checkpoint_writes_locked(
        where["thread"], where["checkpoint_ns"], where["checkpoint_id"], task_id
    )
    if checkpoint is not None and not checkpoint[2]:
        pk, packed, _ = checkpoint
        tasks = tasks_unpack(packed)
        found = next((t for t in tasks if t.task_id == task_id), None)
        merged = _writes_merged(found.writes if found else [], new)
        if merged is not None:
            task = TaskWrites(task_id=task_id, task_path=task_path, writes=merged)
            if found is None:
                tasks.append(task)
            else:
                tasks[tasks.index(found)] = dataclasses.replace(found, writes=merged)
            checkpoint_writes_update(pk, tasks_pack(tasks))
        return True
    stored = checkpoint is not None
    waiting = [] if stored else [{"id": i.id, "value": i.value} for i in interrupts]
    rows = LanggraphWrite.objects.select_for_update().filter(**where)
    row = rows.first()
    if row is None:
        try:
            with transaction.atomic():
                LanggraphWrite.objects.create(
                    **where,
                    task_path=task_path,
                    writes_z=writes_pack(_writes_merged([], new) or []),
                    interrupts=waiting or None,
                )
            return stored
        except IntegrityError:
            row = rows.get()
    fields = []
    merged = _writes_merged(row.writes, new)
    if merged is not None:
        row.writes = merged
        fields.append("writes_z")
    known = {str(item["id"]) for item in row.interrupts or []}
    added = [item for item in waiting if item["id"] not in known]
    if added:
        row.interrupts = [*(row.interrupts or []), *added]
        fields.append("interrupts")
    if fields:
        row.save(update_fields=fields)
    return stored
