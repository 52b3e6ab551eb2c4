"""The LangGraph checkpointer's writes (docs/langgraph.md, "Agent frameworks", docs/api.md,
"LangGraph checkpointer").

What `ctxadmin_client.langgraph.CtxadminSaver` sends is stored as sent: channel values and
pending writes are bytes that ctxadmin never decodes (a checkpoint row carries its small values
and its tasks' writes, packed; a larger value's version row points at its bytes in a content
table keyed by SHA-256, so equal values are stored once), the checkpoint and its metadata are
JSON. The `messages` channel's LangChain messages arrive as JSON forms and are
mirrored into the thread's event log through the ordinary append path, once each (the LangChain
id is the client_event_id); its version row refers to the log instead of holding a copy.

Every LangGraph checkpoint gets a ctxadmin Checkpoint (label `langgraph:<checkpoint_id>`,
cursor = the last mirrored seq it stands on). Deleting or pruning removes checkpoints, versions
and writes, never the log; the ctxadmin Checkpoints they leave are marked unsafe, and an audit
entry names the key that did it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from integrations.langgraph_checkpointer.domain.messages import (
    INTERRUPT_ACTION,
    MESSAGES_CHANNEL,
    checkpoint_id_after,
    checkpoint_pack,
    interrupt_call,
    message_digest,
    message_event_bodies,
    repair_metadata,
)
from integrations.langgraph_checkpointer.domain.packing import (
    Carried,
    PackedWrite,
    TaskWrites,
    tasks_pack,
    tasks_unpack,
    values_pack,
    writes_pack,
)
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    langgraph_checkpoint_get,
    langgraph_message_index,
    langgraph_messages_at,
    langgraph_messages_count_until,
    langgraph_pending_tool_calls,
    langgraph_side_effect_tools,
    langgraph_thread_get,
    langgraph_threads_get,
    langgraph_version_message_count,
    langgraph_version_message_seqs,
)
from integrations.langgraph_checkpointer.services.statements import (
    checkpoint_writes_locked,
    checkpoint_writes_update,
    checkpoints_carrying,
    checkpoints_insert,
    message_index,
    message_index_and_base,
    message_index_and_cursor,
    messages_count_between,
    messages_index_insert,
    rows_insert_new,
    thread_found,
    thread_locked,
)
from threads.domain.errors import (
    Conflict,
    DomainError,
    IdempotencyConflict,
    InvalidEvent,
    NoOpenToolCall,
    PayloadTooLarge,
)
from threads.domain.events import normalize_event
from threads.models import ApprovalRequest, ApprovalStatus, Checkpoint, Thread, Workspace
from threads.selectors.checkpoints import side_effects_after
from threads.services.approvals import approvals_close_locked
from threads.services.audit import audit_record
from threads.services.checkpoints import checkpoint_build
from threads.services.events import Appended, event_append_batch, event_append_locked
from threads.services.integrity import chain_hash_at
from threads.services.threads import external_id_require_valid, thread_get_or_create

PRUNE_STRATEGIES = ("keep_latest", "delete")


class MessagesMissing(Conflict):
    """The saver named messages by id and digest that the log does not hold: it must send their
    JSON forms."""

    code = "messages_missing"


class MessagesBaseUnknown(Conflict):
    """The saver sent only the messages after a base version the server does not hold (pruned,
    deleted, or never stored) or holds with another count: it must send the whole list."""

    code = "messages_base_unknown"


class MessagesUnordered(Conflict):
    """A write's new messages cannot be appended to the log in the conversation's order: the
    checkpoint it follows is not stored yet, or the log holds other messages after its
    messages. The saver sends that write as bytes."""

    code = "messages_unordered"


class MessagesNotMirrored(DomainError):
    """The messages have no event form the log accepts (a tool result with no call, an event
    over the size limit...): the saver stores the channel as bytes instead."""

    code = "messages_not_mirrored"
    status = 422


@dataclass(frozen=True)
class ValueIn:
    """One channel version as the saver serialised it."""

    channel: str
    version: str
    type: str
    data: bytes


@dataclass(frozen=True)
class MessageIn:
    """One message of a mirrored channel: its LangChain id, the digest of its JSON form, and the
    JSON form itself unless the saver knows the log holds it."""

    id: str
    digest: str
    message: dict[str, Any] | None = None


@dataclass(frozen=True)
class MessagesIn:
    """A mirrored channel's version: `entries` are its messages in order — all of them, or with
    `base_version` only those after the `base_count` messages of that earlier version of the
    channel (so that a put costs O(new messages), not O(all))."""

    channel: str
    version: str
    entries: Sequence[MessageIn]
    # Tools whose calls are side effects (docs/repairs.md, "Side effects"), as the saver was told.
    side_effect_tools: frozenset[str] = frozenset()
    base_version: str | None = None
    base_count: int = 0


@dataclass(frozen=True)
class WriteIn:
    """One pending write: serialised bytes, or (`messages`) the LangChain messages of a write
    to the mirrored channel, which are mirrored into the log and stored as references to it."""

    idx: int
    channel: str
    type: str = ""
    data: bytes = b""
    messages: Sequence[MessageIn] | None = None


@dataclass(frozen=True)
class InterruptIn:
    """An `interrupt()` of a task as the saver describes it beside its serialised write: the
    interrupt's id and its value as plain JSON (the server never decodes the bytes)."""

    id: str
    value: Any


def _interrupts_request(
    thread: Thread, interrupts: Sequence[InterruptIn], checkpoint_ns: str, checkpoint_id: str
) -> None:
    """Open an approval request per interrupt (docs/repairs.md, "Approvals"), once each: its
    client_event_id names the interrupt, so a repeated put_writes appends nothing. Its
    arguments name the checkpoint the interrupt's task ran from, whose deletion closes it, and
    the call that task was about to run when there is one (`interrupt_call`).
    Runs in the caller's transaction, which holds the thread's lock."""
    pending = langgraph_pending_tool_calls(
        thread=thread,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        channel=MESSAGES_CHANNEL,
    )
    for interrupt in interrupts:
        _interrupt_request_append(
            thread,
            {
                "interrupt_id": interrupt.id,
                "value": interrupt.value,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                **interrupt_call(pending, interrupt.value),
            },
        )


def _interrupt_request_append(thread: Thread, arguments: dict[str, Any]) -> None:
    body = {
        "kind": "approval_request",
        "client_event_id": f"langgraph-interrupt:{arguments['interrupt_id']}"[:200],
        "action": INTERRUPT_ACTION,
        "arguments": arguments,
    }
    if isinstance(arguments.get("tool_name"), str) and arguments["tool_name"]:
        # The approval reads as the action asked about; the action stays the interrupt's,
        # which the saver's resume_command looks for.
        body["tool_name"] = arguments["tool_name"][:200]
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    try:
        event_append_batch(
            thread=thread, new_events=[normalize_event(body, max_bytes=max_bytes)], lock=False
        )
    except IdempotencyConflict:
        pass  # the interrupt asked already, with another value: the first one stands


def _interrupt_approvals_close(
    thread: Thread, gone: Sequence[LanggraphCheckpoint] | None, why: str, actor_label: str
) -> int:
    """Close the thread's pending interrupt approvals whose checkpoint is in `gone` (None:
    every one, all its checkpoints gone): nothing can resume them any more, so no reviewer
    should wait on them (docs/langgraph.md, "Agent frameworks"). Returns how many were closed. Runs
    under the thread's lock."""
    pending = ApprovalRequest.objects.filter(
        thread=thread, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
    ).order_by("request_event__seq")
    if gone is not None:
        names = {(row.checkpoint_ns, row.checkpoint_id) for row in gone}
        chosen = [
            a
            for a in pending
            if isinstance(a.arguments, dict)
            and (a.arguments.get("checkpoint_ns"), a.arguments.get("checkpoint_id")) in names
        ]
    else:
        chosen = list(pending)
    closed = approvals_close_locked(
        thread=thread,
        approvals=chosen,
        reason=f"its LangGraph checkpoint was deleted ({why}): nothing can resume it",
        actor_label=actor_label or "system",
    )
    return len(closed)


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


def _waiting_interrupts_open(
    thread: Thread,
    checkpoint_ns: str,
    checkpoint_id: str,
    waiting: Sequence[tuple[int, list[dict[str, Any]]]],
) -> None:
    """Open the approval requests of interrupts whose writes came before their checkpoint's
    put, now that the put has mirrored its messages: in the log they follow the messages of
    the checkpoint their task ran from, whatever order LangGraph's background threads sent
    the requests in. Runs under the thread's lock."""
    if not waiting:
        return
    _interrupts_request(
        thread,
        [
            InterruptIn(id=str(item["id"]), value=item.get("value"))
            for _, interrupts in waiting
            for item in interrupts
        ],
        checkpoint_ns,
        checkpoint_id,
    )
    LanggraphWrite.objects.filter(pk__in=[pk for pk, _ in waiting]).update(interrupts=None)


def _appended_seq(appended: Appended) -> int:
    return appended.row.seq if appended.row is not None else appended.event.seq


def _messages_append(
    thread: Thread,
    items: Sequence[tuple[str, str, dict[str, Any], str]],
    side_effect_tools: frozenset[str] = frozenset(),
) -> dict[tuple[str, str], LanggraphMessage]:
    """Append the events of each (message_id, digest, JSON form, key) through the ordinary
    append path (validation, chain, idempotency by client_event_id) and index them. Runs in the
    caller's transaction, which holds the thread's lock."""
    if not items:
        return {}
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    try:
        bodies = [
            message_event_bodies(message, key, side_effect_tools) for _, _, message, key in items
        ]
        new_events = [
            normalize_event(body, max_bytes=max_bytes) for group in bodies for body in group
        ]
        appended = event_append_locked(thread, new_events)
    except (InvalidEvent, PayloadTooLarge, NoOpenToolCall, IdempotencyConflict) as exc:
        raise MessagesNotMirrored(
            f"the messages cannot be mirrored into the log: {exc.message}", fields=exc.fields
        ) from exc
    rows: dict[tuple[str, str], LanggraphMessage] = {}
    position = 0
    for (message_id, digest, _, _), group in zip(items, bodies, strict=True):
        events = appended[position : position + len(group)]
        position += len(group)
        rows[(message_id, digest)] = LanggraphMessage(
            thread=thread,
            message_id=message_id,
            digest=digest,
            seq=_appended_seq(events[0]),
            last_seq=max(_appended_seq(e) for e in events),
        )
    messages_index_insert(thread, list(rows.values()))
    return rows


def _reference(
    thread: Thread, refs: Sequence[LanggraphMessage]
) -> tuple[int | None, list[int] | None, int]:
    """How a version refers to its messages in the log: (messages_until_seq, None, cursor) when
    the list is, in order, every mirrored message up to the last one's events (the append-only
    case); otherwise (None, the seqs of the carrying events in order, cursor)."""
    if not refs:
        return 0, None, 0
    seqs = [ref.seq for ref in refs]
    cursor = max(ref.last_seq for ref in refs)
    increasing = all(a < b for a, b in zip(seqs, seqs[1:], strict=False))
    if increasing and langgraph_messages_count_until(thread, refs[-1].last_seq) == len(refs):
        return refs[-1].last_seq, None, cursor
    return None, seqs, cursor


def _messages_resolve(
    thread: Thread,
    entries: Sequence[MessageIn],
    side_effect_tools: frozenset[str],
    known: dict[tuple[str, str], LanggraphMessage] | None = None,
) -> list[LanggraphMessage]:
    """The log's record of each entry, in order: the messages it holds already, and those it
    does not appended now (their JSON forms checked against their digests). Raises
    MessagesMissing for a message the log does not hold that came without its JSON form. Runs
    in the caller's transaction, which holds the thread's lock."""
    if known is None:
        ids = {e.id for e in entries}
        known = {(m.message_id, m.digest): m for m in message_index(thread, ids)}
    else:
        known = dict(known)
    missing = sorted({e.id for e in entries if (e.id, e.digest) not in known and e.message is None})
    if missing:
        raise MessagesMissing(
            f"{len(missing)} messages are not in the log: send their JSON forms",
            fields={"missing": missing},
        )
    used = {key[0] for key in known}
    planned: list[tuple[str, str, dict[str, Any], str]] = []
    seen: set[tuple[str, str]] = set()
    for entry in entries:
        pair = (entry.id, entry.digest)
        if pair in known or pair in seen:
            continue
        assert entry.message is not None
        if message_digest(entry.message) != entry.digest:
            raise InvalidEvent(
                f"message {entry.id!r}: the digest is not the SHA-256 of its JSON form",
                fields={"messages": entry.id},
            )
        # An edited message (same id, another body) gets a key of its own: the log keeps both.
        key = entry.id if entry.id not in used else f"{entry.id}#{entry.digest[:16]}"
        used.add(entry.id)
        seen.add(pair)
        planned.append((entry.id, entry.digest, entry.message, key))
    known.update(_messages_append(thread, planned, side_effect_tools))
    return [known[(e.id, e.digest)] for e in entries]


def _messages_count_between(
    thread: Thread, until: int, last: int, *, counted: tuple[int, int] | None, appended: int
) -> int:
    """How many mirrored messages end after `until` and at or before `last`. `counted`, when
    known, is (the log's last seq before this put appended, how many messages then ended after
    `until`): when `last` is at or after that seq, every one of those counts, and of the
    `appended` messages this put mirrored (each ending after that seq) those ending at or
    before `last` — no query."""
    if counted is not None and last >= counted[0]:
        return counted[1] + appended
    return messages_count_between(thread, until, last)


def _base_reference(
    thread: Thread,
    base: LanggraphChannelVersion,
    new: Sequence[LanggraphMessage],
    counted: tuple[int, int] | None = None,
    appended: Sequence[LanggraphMessage] = (),
) -> tuple[int | None, list[int] | None, int]:
    """The reference of the base version's messages followed by `new`, in O(new): still "every
    mirrored message up to a seq" when the base is, and the log holds no other message between
    the base's end and the last new one; else the explicit seqs. `appended`: the index rows
    this put inserted; `counted`: see _messages_count_between."""
    until = base.messages_until_seq
    if not new:
        return until, None if until is not None else list(base.message_seqs or []), base.cursor
    seqs = [ref.seq for ref in new]
    cursor = max(base.cursor, *(ref.last_seq for ref in new))
    if (
        until is not None
        and seqs[0] > until
        and all(a < b for a, b in zip(seqs, seqs[1:], strict=False))
        and _messages_count_between(
            thread,
            until,
            new[-1].last_seq,
            counted=counted,
            appended=sum(1 for row in appended if row.last_seq <= new[-1].last_seq),
        )
        == len(new)
    ):
        return new[-1].last_seq, None, cursor
    return None, [*langgraph_version_message_seqs(thread, base), *seqs], cursor


def _messages_mirror(thread: Thread, checkpoint_ns: str, messages: MessagesIn) -> int:
    """Mirror the messages the log does not hold yet, then store the version's reference.
    Returns its cursor (the last seq of its messages)."""
    base = None
    known = None
    counted = None
    if messages.base_version is not None:
        # The base version, the log's index of the entries and how many messages end after the
        # base's end: one statement.
        index, base, after_until = message_index_and_base(
            thread,
            {e.id for e in messages.entries},
            checkpoint_ns,
            messages.channel,
            messages.base_version,
        )
        if base is None or langgraph_version_message_count(thread, base) != messages.base_count:
            raise MessagesBaseUnknown(
                "the base version of these messages is not stored as the saver knows it: send "
                "the whole list",
                fields={"base_version": messages.base_version},
            )
        known = {(m.message_id, m.digest): m for m in index}
        if after_until is not None:
            counted = (thread.last_seq, after_until)  # the log's end before the append
    refs = _messages_resolve(thread, messages.entries, messages.side_effect_tools, known)
    if base is None:
        until, seqs, cursor = _reference(thread, refs)
        count = len(refs)
    else:
        assert known is not None
        # The index rows this put inserted: its messages the log did not hold.
        appended = {
            (r.message_id, r.digest): r for r in refs if (r.message_id, r.digest) not in known
        }
        until, seqs, cursor = _base_reference(thread, base, refs, counted, list(appended.values()))
        count = messages.base_count + len(refs)
    # The first row stored for a version wins (a repeated put is a no-op).
    rows_insert_new(
        [
            LanggraphChannelVersion(
                thread=thread,
                checkpoint_ns=checkpoint_ns,
                channel=messages.channel,
                version=messages.version,
                type="",
                messages_until_seq=until,
                message_seqs=seqs,
                message_count=count,
                cursor=cursor,
            )
        ],
    )
    return cursor


def _mirrored_cursor(thread: Thread, checkpoint_ns: str, checkpoint: dict[str, Any]) -> int:
    """The last mirrored seq the checkpoint's channels refer to (0 when none is mirrored)."""
    versions = {str(c): str(v) for c, v in (checkpoint.get("channel_versions") or {}).items()}
    rows = LanggraphChannelVersion.objects.filter(
        thread=thread,
        checkpoint_ns=checkpoint_ns,
        channel__in=list(versions),
        version__in=set(versions.values()),
        cursor__gt=0,
    ).values_list("channel", "version", "cursor")
    return max((cursor for c, v, cursor in rows if versions.get(c) == v), default=0)


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


def langgraph_repair_put(
    *, thread: Thread, chosen: LanggraphCheckpoint, reason: str, actor: Any
) -> LanggraphCheckpoint:
    """Make the state of `chosen` the namespace's head again, as a new LangGraph checkpoint (a
    rollback's repair, docs/langgraph.md, "Agent frameworks"): the same channel versions (their rows
    and bytes are shared, never copied; the small values `chosen` carries, the new row carries), a
    new id sorting after every existing one, the previous head as its parent, metadata as
    LangGraph's `update_state` writes it, and under `ctxadmin_repair` the side effects after the
    chosen checkpoint's cursor (tool, arguments, status, idempotency key), which the saver shows the
    agent so that it does not repeat them.

    Runs inside the caller's transaction, which holds the thread's lock (select_for_update).
    """
    head = langgraph_checkpoint_get(
        thread=thread, checkpoint_ns=chosen.checkpoint_ns, checkpoint_id=None
    )
    assert head is not None  # chosen is one of the namespace's checkpoints
    checkpoint_id = checkpoint_id_after(
        head.checkpoint_id,
        now_ns=time.time_ns(),
        clock_seq=random.getrandbits(14),
        node=random.getrandbits(48),
    )
    side_effects = [
        {
            "tool_name": effect.tool_name,
            "arguments": effect.call_event.data.get("arguments"),
            "status": effect.status,
            "idempotency_key": effect.idempotency_key,
            "tool_call_id": effect.tool_call_id,
            "call_seq": effect.call_seq,
        }
        for effect in side_effects_after(thread=thread, cursor=chosen.cursor)
    ]
    head_step = head.metadata.get("step")
    metadata = repair_metadata(
        chosen.metadata,
        head_step=head_step if isinstance(head_step, int) else -1,
        repair={
            "restored": chosen.checkpoint_id,
            "ctxadmin_checkpoint": chosen.ctxadmin_checkpoint_id,
            "reason": reason,
            "side_effects": side_effects,
        },
    )
    repaired = langgraph_checkpoint_put_locked(
        thread=thread,
        checkpoint_ns=chosen.checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_checkpoint_id=head.checkpoint_id,
        checkpoint={
            **chosen.checkpoint,
            "id": checkpoint_id,
            "ts": timezone.now().isoformat(),
        },
        metadata=metadata,
        created_by=actor,
        values_from=chosen,
    )
    # The namespace resumes from the new head, whose id no pending interrupt names: an agent
    # that still needs an answer asks again from there. A reviewer should not wait on the old
    # requests, nor the agent on their decisions.
    pending = ApprovalRequest.objects.filter(
        thread=thread, action=INTERRUPT_ACTION, status=ApprovalStatus.PENDING
    ).order_by("request_event__seq")
    approvals_close_locked(
        thread=thread,
        approvals=[
            a
            for a in pending
            if not isinstance(a.arguments, dict)
            or a.arguments.get("checkpoint_ns", chosen.checkpoint_ns) == chosen.checkpoint_ns
        ],
        reason=f"the thread was rolled back to langgraph:{chosen.checkpoint_id}: the agent "
        "resumes from there and asks again if it still needs an answer",
        actor_label=str(actor) if actor is not None else "system",
    )
    return repaired


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
        stored = _writes_store(
            thread,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            task_path=task_path,
            writes=writes,
            mirrored=mirrored,
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
