"""Appending to a thread's event log (docs/event-log.md, "Event log").

Numbering and chaining happen under the thread's lock: `select_for_update()` on the thread row on
PostgreSQL; on SQLite every transaction is BEGIN IMMEDIATE, which serialises writers.

The lock's statement is event_lock's; what a batch is checked against under the lock (the
calls its results bind to, what its retractions may name), event_lookups'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections, router, transaction
from django.utils import timezone

from threads.domain import chain
from threads.domain.canonical import format_time, join_canonical
from threads.domain.errors import IdempotencyConflict, InvalidEvent, NoOpenToolCall
from threads.domain.events import NewEvent, stored_members
from threads.domain.ledger import DUPLICATE_OF
from threads.domain.markers import RETRACTION
from threads.keys.chain import thread_key
from threads.models import Event, Thread, Workspace
from threads.selectors.statements import equal_or_any, rows_read
from threads.services.event_lock import (
    _may_have_replays,
    _thread_lock_for_workspace,
    _with_replay_count,
)
from threads.services.event_lookups import (
    _batch_lookups,
    _check_retraction,
    _open_calls,
    _retraction_lookups,
)
from threads.services.event_rows import (
    DEFERRED_HEAD,
    NewRow,
    insert_events_and_head,
    side_effect_and_approval_statements,
)
from threads.services.event_secrets import (
    event_secret_flags,
    secrets_removed,
    workspace_removes_secrets,
)
from threads.services.event_tokens import TokenCounts, encoding_guess, remember_encoding
from threads.services.metrics import events_appended_statements

# Called after commit with (thread or its id, appended events: Event rows, or dicts of seq, kind
# and the kind's fields); the pipeline registers its triggers.
after_append_hooks: list[Callable[[Any, list[Event | dict[str, Any]]], None]] = []


class Appended:
    """One event of an append: a new one, or the original an idempotent replay answered with."""

    __slots__ = ("_event", "created", "row", "chained")

    def __init__(
        self,
        event: Event | None,
        *,
        created: bool,
        row: NewRow | None = None,
        chained: str | None = None,
    ) -> None:
        self._event = event
        self.created = created  # False when an idempotent replay answered with the original
        self.row = row  # a new event's row; None for a replay
        # A new event's stored form as canonical JSON text (without token_count and hash; the
        # chain of a v2 event hashes its content digest instead), so that the answer is
        # assembled without encoding the event again; None for a replay.
        self.chained = chained

    @property
    def event(self) -> Event:
        """The event as a model, built on first use for a new one."""
        if self._event is None:
            assert self.row is not None
            self._event = self.row.model()
        return self._event


def event_append_batch(
    *, thread: Thread, new_events: Sequence[NewEvent], lock: bool = True, by_agent: bool = True
) -> list[Appended]:
    """Append events to a thread, all or nothing. `by_agent`: False for events that do not
    come from the thread's agent at work (an import): they leave its run status as it was.

    Locks the thread row (select_for_update) before numbering anything. Idempotent by
    client_event_id: the same id and body answers with the original event, the same id with
    another body raises IdempotencyConflict. A tool_result binds to the latest call with its
    tool_call_id that has no result yet, or raises NoOpenToolCall.
    """
    with transaction.atomic(durable=lock):
        if not lock and getattr(thread, DEFERRED_HEAD, None) is not None:
            # `thread` is the row the caller locked, and holds a head the database will only
            # have when the caller's batch ends (head_deferred): append to it, not to the row
            # read again. Its replay count was another append's.
            locked = thread
            locked.__dict__.pop("replays", None)
        else:
            locked = _with_replay_count(
                Thread.objects.select_for_update().filter(pk=thread.pk), new_events
            ).get()
        appended = _append_locked(locked, new_events, by_agent=by_agent)
    _schedule_hooks(locked, appended)
    thread.last_seq, thread.chain_head = locked.last_seq, locked.chain_head
    thread.token_total = locked.token_total
    thread.events_with_secrets = locked.events_with_secrets
    return appended


def event_append_locked(thread: Thread, new_events: Sequence[NewEvent]) -> list[Appended]:
    """event_append_batch for a caller whose transaction already holds the lock of `thread`,
    the row it locked (an integration's write mirroring its messages): no second lock, and on
    PostgreSQL the replays of the batch's client_event_ids are looked for with one prepared
    statement, the events themselves read only when there are some. Updates `thread`'s head
    fields in place."""
    client_ids = sorted({e.client_event_id for e in new_events if e.client_event_id is not None})
    connection = connections[router.db_for_write(Event)]
    if client_ids and connection.vendor == "postgresql":
        table = connection.ops.quote_name(Event._meta.db_table)
        ids, id_params = equal_or_any(client_ids, "text")
        sql = f"SELECT COUNT(*) FROM {table} WHERE thread_id = %s AND client_event_id {ids}"
        ((count,),) = rows_read(connection, sql, (thread.pk, *id_params))
        # Under the lock the count is current: _may_have_replays trusts it.
        thread.replays = count  # type: ignore[attr-defined]
        thread.log_seq = thread.last_seq  # type: ignore[attr-defined]
    appended = _append_locked(thread, new_events)
    _schedule_hooks(thread, appended)
    return appended


def thread_events_append(
    *,
    workspace: Workspace,
    thread_id: str,
    new_events: Sequence[NewEvent],
    batch: bool | None = None,
) -> tuple[Thread, list[Appended]]:
    """The API's append: find the workspace's thread by UUID or external_id and lock it in the
    same query (select_for_update), then append as event_append_batch does. Raises NotFound
    for a thread outside the workspace. `batch`: the request was a batch, so a refusal names
    its event `events[i]` even in a batch of one (by default: when there are several)."""
    guess_key = (workspace.pk, thread_id)
    counts = TokenCounts(new_events, encoding_guess(guess_key))
    try:
        # Scanned before the lock: no other append of the thread waits for it.
        secrets = event_secret_flags(new_events)
        with transaction.atomic(durable=True):
            locked = _thread_lock_for_workspace(workspace, thread_id, new_events)
            appended = _append_locked(
                locked, new_events, counts=counts, batch=batch, secrets=secrets
            )
    finally:
        counts.cancel()
    remember_encoding(guess_key, locked.encoding)
    _schedule_hooks(locked, appended)
    return locked, appended


def announce_after_commit(thread: Any, events: list[Event | dict[str, Any]]) -> None:
    """Run the append hooks (the fold triggers) for `events` once the caller's transaction
    commits: the agents' appends, and the events ctxadmin writes itself (a resolution or a
    decision is a structural trigger). `thread` is the thread as the append left it (head
    fields current as of the commit), so a hook need not read it again, or its id."""
    for hook in after_append_hooks:
        # robust: the events are committed by then; a failing hook (a fold trigger) is
        # logged, and never turns the successful append into an error.
        transaction.on_commit(
            lambda hook=hook: hook(thread, events),  # type: ignore[misc]
            robust=True,
        )


def _schedule_hooks(thread: Thread, appended: list[Appended]) -> None:
    new = [a.row.hook_view() if a.row is not None else a.event for a in appended if a.created]
    if new:
        announce_after_commit(thread, new)


def _append_locked(
    thread: Thread,
    new_events: Sequence[NewEvent],
    *,
    with_pks: bool = False,
    counts: TokenCounts | None = None,
    batch: bool | None = None,
    by_agent: bool = True,
    secrets: list[list[dict[str, str]]] | None = None,
) -> list[Appended]:
    """`counts`: the events' token counts, already being counted (in the right encoding or
    not: a wrong one is cancelled and counted again). `by_agent`: the agent's events, which
    mark the thread's agent_appended_at (run status); False for those ctxadmin writes.
    `secrets`: the events' flags (event_secret_flags), scanned here when not given."""
    key = thread_key(thread)
    if secrets is None:
        secrets = event_secret_flags(new_events)
    if secrets and any(secrets) and workspace_removes_secrets(thread.workspace_id):
        # Stored without them (docs/event-log.md, "Secrets redacted at ingest"): counted
        # again, as the texts changed.
        new_events, secrets = secrets_removed(new_events, secrets)
        if counts is not None:
            counts.cancel()
            counts = None
    if counts is None or counts.encoding != thread.encoding:
        if counts is not None:
            counts.cancel()
        counts = TokenCounts(new_events, thread.encoding)
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    existing = (
        {
            e.client_event_id: e
            for e in Event.objects.filter(thread=thread, client_event_id__in=client_ids)
        }
        if client_ids and _may_have_replays(thread)
        else {}
    )
    calls = _open_calls(thread, _batch_lookups(new_events, existing))
    open_calls, side_effect_calls, answered = calls.open, calls.side_effects, calls.answered
    # Calls of this batch that got a result in it: call seq -> that result's seq.
    # Kinds of the events retractions may name (the log's, then this batch's as they are
    # numbered) and who retracted what already.
    retractions = _retraction_lookups(thread, new_events)
    retracts = any(new.kind == RETRACTION for new in new_events)
    seq, head = thread.last_seq, thread.chain_head
    out: list[Appended] = []
    rows: list[NewRow] = []
    created: list[int] = []  # the indexes of new_events that are new
    seen_in_batch: dict[str, NewRow] = {}
    now = timezone.now()
    now_text = format_time(now)
    for index, new in enumerate(new_events):
        where = f"events[{index}]" if batch or (batch is None and len(new_events) > 1) else "event"
        if new.client_event_id is not None:
            original: Event | NewRow | None = existing.get(
                new.client_event_id
            ) or seen_in_batch.get(new.client_event_id)
            if original is not None:
                if original.request_digest != new.digest:
                    # An earlier event of this batch is numbered but not stored: no seq to name.
                    used = (
                        "earlier in this batch"
                        if isinstance(original, NewRow)
                        else f"by seq {original.seq}"
                    )
                    raise IdempotencyConflict(
                        f"client_event_id {new.client_event_id!r} was already used {used} "
                        "with another body",
                        fields={where: "client_event_id reused with a different body"},
                    )
                if isinstance(original, NewRow):  # earlier in this same batch
                    out.append(Appended(None, created=False, row=original))
                else:
                    out.append(Appended(original, created=False))
                continue
        seq += 1
        data, (data_texts, metadata_text) = new.data, new.texts()
        data_text = new.data_text if new.data_text is not None else join_canonical(data_texts)
        if new.kind == "tool_result":
            waiting = open_calls.get(data["tool_call_id"], [])
            if waiting:
                data = {**data, "call_seq": waiting.pop()}
                answered[data["tool_call_id"]] = (data["call_seq"], seq)
            elif data["tool_call_id"] in answered:
                # A second result for a call that has one: stored and flagged, never dropped;
                # the call's outcome stays its first result's (or a resolution's).
                call_seq, first = answered[data["tool_call_id"]]
                data = {**data, "call_seq": call_seq, DUPLICATE_OF: first}
                data_texts[DUPLICATE_OF] = str(first)
            else:
                raise NoOpenToolCall(
                    f"no tool call with tool_call_id {data['tool_call_id']!r} in this thread",
                    fields={where: "tool_call_id has no call"},
                )
            data_texts["call_seq"] = str(data["call_seq"])
            data_text = join_canonical(data_texts)
        elif new.kind == "tool_call":
            open_calls.setdefault(data["tool_call_id"], []).append(seq)
            if data.get("side_effect"):
                side_effect_calls.add(seq)
        elif new.kind == "annotation" and any(s >= seq for s in data.get("refers_to", [])):
            raise InvalidEvent(
                "refers_to names an event that does not exist yet",
                fields={where: f"refers_to must be below {seq}"},
            )
        elif new.kind == RETRACTION:
            target = data["retracts"]
            _check_retraction(target, seq, retractions, where)
            retractions.by_target[target] = seq
        if retracts:
            retractions.kinds[seq] = new.kind  # a later retraction in the batch may name it
            if new.kind == "tool_result":
                retractions.pair(data["call_seq"], seq)
        created_at = new.created_at or now
        created_text = now_text if new.created_at is None else format_time(created_at)
        # The stored form as text: what the answer is assembled from.
        chained = join_canonical(
            stored_members(
                seq=seq,
                kind=new.kind,
                created_at=created_text,
                client_event_id=new.client_event_id,
                metadata_text=metadata_text,
                data_texts=data_texts,
            )
        )
        # Chain v2: the link commits to a salted digest of the content, never to the content
        # (docs/event-log.md, "Hash chain and canonical JSON"), so a redaction leaves it valid.
        salt = chain.new_salt()
        digest = chain.content_digest(salt, metadata_text, data_text)
        head = chain.link_hash(
            head,
            chain.v2_canonical(
                seq=seq,
                kind=new.kind,
                created_at=created_text,
                client_event_id=new.client_event_id,
                digest=digest,
            ),
            key,
        )
        row = NewRow(
            thread,
            seq,
            new.kind,
            created_at,
            new.client_event_id,
            new.metadata,
            data,
            # Only an event with a client_event_id is ever compared with a repeat of its
            # request (docs/event-log.md, "Idempotency and binding"); the others keep no digest, 65
            # bytes a row.
            new.digest if new.client_event_id is not None else "",
            head,
            metadata_text,
            data_text,
        )
        row.content_salt, row.content_digest = salt, digest
        if new.kind == "tool_result":
            row.call_side_effect = data["call_seq"] in side_effect_calls
        if secrets is not None and secrets[index]:
            # Derived, outside the chain (threads.domain.chain.DERIVED_FIELDS); written in the
            # row's own INSERT (docs/event-log.md, "Secrets at ingest").
            row.secrets = secrets[index]
        rows.append(row)
        created.append(index)
        out.append(Appended(None, created=True, row=row, chained=chained))
        if new.client_event_id is not None:
            seen_in_batch[new.client_event_id] = row
    if not rows:
        return out
    token_counts = counts.result()
    for row, index in zip(rows, created, strict=True):
        row.token_count = token_counts[index]
    thread.last_seq, thread.chain_head = seq, head
    thread.token_total += sum(row.token_count for row in rows)
    with_secrets = sum(row.secrets is not None for row in rows)
    thread.events_with_secrets += with_secrets
    if by_agent:
        # Under the lock `thread` is the row: the events ctxadmin writes keep its value.
        thread.agent_appended_at = now
    insert_events_and_head(
        thread,
        rows,
        now,
        texts=[(row.metadata_text, row.data_text) for row in rows],
        then=side_effect_and_approval_statements(thread, rows, side_effect_calls)
        + events_appended_statements(
            thread,
            (row.kind for row in rows),
            second_results=sum(DUPLICATE_OF in row.data for row in rows),
            with_secrets=with_secrets,
        ),
    )
    if with_pks:
        _assign_event_pks(thread, [a.event for a in out if a.created])
    return out


def _assign_event_pks(thread: Thread, events: list[Event]) -> None:
    """Read back the keys of just-inserted events, in one query, for rows that refer to them."""
    ids = dict(
        Event.objects.filter(
            thread=thread, seq__gte=events[0].seq, seq__lte=events[-1].seq
        ).values_list("seq", "id")
    )
    for event in events:
        event.pk = ids[event.seq]


def server_event_append(
    *, thread: Thread, kind: str, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Event:
    """Append an event that ctxadmin writes itself (approval_decision, side_effect_resolution).

    Must run inside the caller's transaction, which holds the thread's lock.
    """
    new = NewEvent(kind=kind, data=data, metadata=metadata or {})
    return _append_locked(thread, [new], with_pks=True, by_agent=False)[0].event
