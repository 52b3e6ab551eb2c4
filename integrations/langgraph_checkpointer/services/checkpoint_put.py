"""The LangGraph checkpointer's put of a checkpoint (docs/langgraph.md, "Agent frameworks",
docs/api.md, "LangGraph checkpointer").

What `ctxadmin_client.langgraph.CtxadminSaver` sends is stored as sent: channel values and
pending writes are bytes that ctxadmin never decodes (a checkpoint row carries its small values
and its tasks' writes, packed; a larger value's version row points at its bytes in a content
table keyed by SHA-256, so equal values are stored once), the checkpoint and its metadata are
JSON. The `messages` channel is mirrored into the thread's event log (message_mirror).

Every LangGraph checkpoint gets a ctxadmin Checkpoint (label `langgraph:<checkpoint_id>`,
cursor = the last mirrored seq it stands on).

The saver's other operations are modules beside this one: writes (a task's pending writes),
interrupts (their approval requests), repair (the head a rollback writes) and threads
(delete, copy, prune, delete for runs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q

from integrations.langgraph_checkpointer.domain.messages import MESSAGES_CHANNEL, checkpoint_pack
from integrations.langgraph_checkpointer.domain.packing import Carried, values_pack
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
)
from integrations.langgraph_checkpointer.services.interrupts import _waiting_interrupts_open
from integrations.langgraph_checkpointer.services.message_mirror import (
    MessagesIn,
    _messages_mirror,
    _mirrored_cursor,
)
from integrations.langgraph_checkpointer.services.statements import (
    checkpoints_carrying,
    checkpoints_insert,
    thread_locked,
)
from threads.models import Thread, Workspace
from threads.services.checkpoints import checkpoint_build
from threads.services.integrity import chain_hash_at
from threads.services.threads import external_id_require_valid, thread_get_or_create


@dataclass(frozen=True)
class ValueIn:
    """One channel version as the saver serialised it."""

    channel: str
    version: str
    type: str
    data: bytes


def _locked_thread(workspace: Workspace, external_id: str, actor_label: str) -> Thread:
    """The thread, locked (select_for_update) in the caller's transaction: one prepared
    statement when it exists (the hot path: every put and write), created first otherwise.
    An external_id that cannot name a thread is refused first (400 validation_error)."""
    external_id_require_valid(external_id)
    found = thread_locked(workspace, external_id)
    if found is not None:
        return found
    thread, _ = thread_get_or_create(
        workspace=workspace, external_id=external_id, actor_label=actor_label
    )
    return _lock(thread)


def _lock(thread: Thread) -> Thread:
    # of=self: lock the thread row only, never the joined workspace row.
    return (
        Thread.objects.select_for_update(of=("self",)).select_related("workspace").get(pk=thread.pk)
    )


def _values_store(
    thread: Thread, checkpoint_ns: str, values: Sequence[ValueIn], versions: dict[str, str]
) -> dict[str, Carried]:
    """Store the put's values: larger ones as a version row pointing at a content row stored
    once per distinct content, small ones of the checkpoint's own versions (`versions`,
    channel -> version) returned for its row to carry, and any other small one (a version the
    checkpoint does not name) as a version row holding its bytes. Returns what the row carries
    of them (None: in a version row). The first row stored for a version wins, as with
    LangGraph's own savers."""
    small = LanggraphChannelVersion.SMALL_VALUE_BYTES
    carried: dict[str, Carried] = {}
    rows: list[tuple[ValueIn, str | None]] = []
    for value in values:
        if len(value.data) > small:
            rows.append((value, hashlib.sha256(value.data).hexdigest()))
            if versions.get(value.channel) == value.version:
                carried.setdefault(value.channel, None)
        elif versions.get(value.channel) == value.version:
            carried.setdefault(value.channel, (value.type, value.data))
        else:
            rows.append((value, None))
    contents = {digest: value.data for value, digest in rows if digest}
    if contents:
        LanggraphContent.objects.bulk_create(
            [LanggraphContent(sha256=d, data=data, size=len(data)) for d, data in contents.items()],
            ignore_conflicts=True,
        )
    if rows:
        LanggraphChannelVersion.objects.bulk_create(
            [
                LanggraphChannelVersion(
                    thread=thread,
                    checkpoint_ns=checkpoint_ns,
                    channel=value.channel,
                    version=value.version,
                    type=value.type,
                    content_id=digest,
                    data=None if digest else value.data,
                )
                for value, digest in rows
            ],
            ignore_conflicts=True,
        )
    return carried


def _versions_of(checkpoint: dict[str, Any]) -> dict[str, str]:
    return {str(c): str(v) for c, v in (checkpoint.get("channel_versions") or {}).items()}


def _carried_from(
    rows: Sequence[LanggraphCheckpoint], wanted: dict[str, str], found: dict[str, Carried]
) -> None:
    """Add to `found` the small values that `rows` carry at the versions `wanted` names."""
    for row in rows:
        if len(found) == len(wanted):
            return
        carried = row.small_values
        if not carried:
            continue
        theirs = _versions_of(row.checkpoint)
        for channel, value in carried.items():
            version = wanted.get(channel)
            if version is not None and channel not in found and theirs.get(channel) == version:
                found[channel] = value


def _small_values_resolve(
    thread: Thread,
    *,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: dict[str, Any],
    given: dict[str, Carried],
    near: dict[str, LanggraphCheckpoint],
    values_from: LanggraphCheckpoint | None = None,
) -> dict[str, Carried]:
    """What the checkpoint row carries of each channel at the version it names: the first
    stored small value — by this checkpoint id put before, by its parent (both in `near`, by
    checkpoint id, as _near_checkpoints read them), by `values_from` (a repair's chosen
    checkpoint), by the put itself (`given`), else by any other checkpoint of the namespace —
    or None where a version row holds that version. A put sends only the values that changed,
    so the others come from the parent. A version no one stored has no value, as before. Only
    a checkpoint that names versions its parent does not carry (a hand-made put, a fork from
    elsewhere) reads version rows and then further checkpoints, newest first, until all are
    found."""
    wanted = _versions_of(checkpoint)
    found: dict[str, Carried] = {}
    if not wanted:
        return found
    ids = [i for i in (checkpoint_id, parent_checkpoint_id) if i]
    sources = [near[i] for i in ids if i in near]
    if values_from is not None:
        sources.append(values_from)
    _carried_from(sources, wanted, found)
    for channel, value in given.items():
        if channel in wanted:
            found.setdefault(channel, value)
    missing = {c: v for c, v in wanted.items() if c not in found}
    if missing:
        condition = Q(pk__in=[])
        for channel, version in missing.items():
            condition |= Q(channel=channel, version=version)
        for channel, version in LanggraphChannelVersion.objects.filter(
            condition, thread=thread, checkpoint_ns=checkpoint_ns
        ).values_list("channel", "version"):
            if missing.get(channel) == version:
                del missing[channel]
                found[channel] = None
    if missing:
        rest = (
            LanggraphCheckpoint.objects.filter(thread=thread, checkpoint_ns=checkpoint_ns)
            .exclude(checkpoint_id__in=ids)
            .exclude(values_z=b"")
            .order_by("-checkpoint_id")
            .only("checkpoint_id", "checkpoint_z", "values_z")
        )
        extra: dict[str, Carried] = {}
        for row in rest.iterator(chunk_size=100):
            _carried_from([row], missing, extra)
            if len(extra) == len(missing):
                break
        found.update(extra)
    return found


def _near_checkpoints(
    thread: Thread, checkpoint_ns: str, checkpoint_id: str, parent_checkpoint_id: str
) -> tuple[dict[str, LanggraphCheckpoint], list[tuple[int, list[dict[str, Any]]]]]:
    """The namespace's stored checkpoints with the put's id and its parent's, by checkpoint id,
    in one statement: what the put's row carries from them, and whether the put repeats one
    (nothing else writes checkpoint rows while the put holds the thread's lock); and the
    interrupts of writes that came before the put, waiting for it (writes rows' key and
    interrupts)."""
    ids = [i for i in (checkpoint_id, parent_checkpoint_id) if i]
    rows, waiting = checkpoints_carrying(thread, checkpoint_ns, ids, checkpoint_id)
    return {row.checkpoint_id: row for row in rows}, waiting


def _checkpoint_save(
    thread: Thread,
    *,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: dict[str, Any],
    metadata: dict[str, Any],
    cursor: int,
    created_by: Any = None,
    small_values: dict[str, Carried] | None = None,
    stored: int | None = None,
) -> LanggraphCheckpoint:
    """Insert the checkpoint with its ctxadmin Checkpoint, or replace the JSON of the one with the
    same id (`stored`, its key; its ctxadmin Checkpoint stays), with the small values it
    carries. Runs under the thread's lock."""
    values_z = values_pack(small_values or {})
    run_id = str(metadata.get("run_id") or "")[:200]
    if stored is not None:  # a repeated put, which is rare
        existing = LanggraphCheckpoint.objects.get(pk=stored)
        existing.parent_checkpoint_id = parent_checkpoint_id
        existing.checkpoint = checkpoint  # packed by the model
        existing.metadata, existing.run_id = metadata, run_id
        existing.values_z = values_z
        existing.save(
            update_fields=["parent_checkpoint_id", "checkpoint_z", "values_z", "metadata", "run_id"]
        )
        return existing
    # The locked row's head is the chain hash at its last seq (a put's cursor when its own
    # messages were the last appended): no read of the event.
    chain_hash = thread.chain_head if cursor == thread.last_seq else chain_hash_at(thread, cursor)
    assert chain_hash is not None  # cursor is a mirrored seq of this thread's log
    ctxadmin_checkpoint = checkpoint_build(
        thread=thread,
        version=None,
        cursor=cursor,
        chain_hash=chain_hash,
        summary_checksum="",
        label=f"langgraph:{checkpoint_id}",
        created_by=created_by,
    )
    row = LanggraphCheckpoint(
        thread=thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent_checkpoint_id,
        checkpoint_z=checkpoint_pack(checkpoint),
        values_z=values_z,
        metadata=metadata,
        run_id=run_id,
        cursor=cursor,
    )
    # Both rows in one statement: the ctxadmin Checkpoint, and the row that points at it.
    checkpoints_insert(ctxadmin_checkpoint, row)
    return row


def langgraph_checkpoint_put_locked(
    *,
    thread: Thread,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: dict[str, Any],
    metadata: dict[str, Any],
    values: Sequence[ValueIn] = (),
    messages: MessagesIn | None = None,
    created_by: Any = None,
    values_from: LanggraphCheckpoint | None = None,
) -> LanggraphCheckpoint:
    """`langgraph_checkpoint_put` inside the caller's transaction, which holds the thread's lock
    (a repair that writes a LangGraph checkpoint along with its own changes; its small channel
    values are looked for in `values_from` too)."""
    named = _versions_of(checkpoint)
    given = _values_store(thread, checkpoint_ns, values, named)
    if messages is not None and named.get(messages.channel) == messages.version:
        given[messages.channel] = None  # its version row is the reference to the log
    near, waiting = _near_checkpoints(thread, checkpoint_ns, checkpoint_id, parent_checkpoint_id)
    small_values = _small_values_resolve(
        thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent_checkpoint_id,
        checkpoint=checkpoint,
        given=given,
        near=near,
        values_from=values_from,
    )
    cursor = None
    if messages is not None:
        mirrored = _messages_mirror(thread, checkpoint_ns, messages)
        # The saver mirrors one channel: when this put's version of it is the checkpoint's, its
        # cursor is the checkpoint's, with no query for the others.
        versions = checkpoint.get("channel_versions") or {}
        if messages.channel == MESSAGES_CHANNEL and (
            str(versions.get(messages.channel)) == messages.version
        ):
            cursor = mirrored
    saved = _checkpoint_save(
        thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=parent_checkpoint_id,
        checkpoint=checkpoint,
        metadata=metadata,
        cursor=cursor
        if cursor is not None
        else _mirrored_cursor(thread, checkpoint_ns, checkpoint),
        created_by=created_by,
        small_values=small_values,
        stored=near[checkpoint_id].pk if checkpoint_id in near else None,
    )
    _waiting_interrupts_open(thread, checkpoint_ns, checkpoint_id, waiting)
    return saved


def langgraph_checkpoint_put(
    *,
    workspace: Workspace,
    external_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str,
    checkpoint: dict[str, Any],
    metadata: dict[str, Any],
    values: Sequence[ValueIn] = (),
    messages: MessagesIn | None = None,
    actor_label: str = "",
    created_by: Any = None,
) -> LanggraphCheckpoint:
    """Store a LangGraph checkpoint of the thread `external_id` (created on first put): its
    channel versions, its mirrored messages, the checkpoint row and its ctxadmin Checkpoint.

    Locks the thread row (select_for_update) before the messages are numbered. Raises
    MessagesMissing (409) when a message named by id and digest is not in the log and its JSON
    form was not sent, MessagesNotMirrored (422) when the messages have no event form.
    """
    with transaction.atomic(durable=True):
        return langgraph_checkpoint_put_locked(
            thread=_locked_thread(workspace, external_id, actor_label),
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            parent_checkpoint_id=parent_checkpoint_id,
            checkpoint=checkpoint,
            metadata=metadata,
            values=values,
            messages=messages,
            created_by=created_by,
        )
