"""The LangGraph `messages` channel mirrored into the thread's event log.

Its LangChain messages arrive as JSON forms and are mirrored into the log through the ordinary
append path, once each (the LangChain id is the client_event_id); the channel's version row
refers to the log instead of holding a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from integrations.langgraph_checkpointer.domain.messages import message_digest, message_event_bodies
from integrations.langgraph_checkpointer.models import LanggraphChannelVersion, LanggraphMessage
from integrations.langgraph_checkpointer.selectors.messages import (
    langgraph_messages_count_until,
    langgraph_version_message_count,
    langgraph_version_message_seqs,
)
from integrations.langgraph_checkpointer.services.statements import (
    message_index,
    message_index_and_base,
    messages_count_between,
    messages_index_insert,
    rows_insert_new,
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
from threads.models import Thread
from threads.services.events import Appended, event_append_locked


class MessagesMissing(Conflict):
    """The saver named messages by id and digest that the log does not hold: it must send their
    JSON forms."""

    code = "messages_missing"


class MessagesBaseUnknown(Conflict):
    """The saver sent only the messages after a base version the server does not hold (pruned,
    deleted, or never stored) or holds with another count: it must send the whole list."""

    code = "messages_base_unknown"


class MessagesNotMirrored(DomainError):
    """The messages have no event form the log accepts (a tool result with no call, an event
    over the size limit...): the saver stores the channel as bytes instead."""

    code = "messages_not_mirrored"
    status = 422


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
