"""Appending to a thread's event log (DESIGN §2).

Numbering and chaining happen under the thread's lock: `select_for_update()` on the thread row on
PostgreSQL; on SQLite every transaction is BEGIN IMMEDIATE, which serialises writers.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from threads.domain import chain, tokens
from threads.domain.canonical import canonical_text, format_time, join_canonical
from threads.domain.errors import IdempotencyConflict, InvalidEvent, NoOpenToolCall, NotFound
from threads.domain.events import NewEvent, parse_time, stored_members
from threads.domain.render import render_event
from threads.models import (
    ApprovalRequest,
    Event,
    EventKind,
    SideEffect,
    SideEffectStatus,
    Thread,
    Workspace,
)
from threads.services.chainkey import chain_key

RESULT_TO_SIDE_EFFECT = {
    "succeeded": SideEffectStatus.SUCCEEDED,
    "failed": SideEffectStatus.FAILED,
    "cancelled": SideEffectStatus.CANCELLED,
    # A timeout says nothing about whether the effect happened: unknown, never failed.
    "timeout": SideEffectStatus.UNKNOWN,
}

# Called after commit with (thread or its id, appended events: Event rows, or dicts of seq, kind
# and the kind's fields); the pipeline registers its triggers.
after_append_hooks: list[Callable[[Any, list[Event | dict[str, Any]]], None]] = []


@dataclass(slots=True)
class NewRow:
    """A new event as the append writes it, without a model object (building one costs more
    than the rest of an event's append): attribute names as Event's, plus its JSON columns as
    canonical text."""

    thread: Thread
    seq: int
    kind: str
    created_at: datetime
    client_event_id: str | None
    metadata: dict[str, Any]
    data: dict[str, Any]
    request_digest: str
    hash: str
    metadata_text: str
    data_text: str
    token_count: int = 0

    @property
    def role(self) -> str:
        return cast(str, self.data.get("role", ""))

    @property
    def tool_call_id(self) -> str:
        return cast(str, self.data.get("tool_call_id", ""))

    def model(self) -> Event:
        """The stored row as an Event (its pk unread: None)."""
        event = Event.from_db(
            router.db_for_write(Event),
            _EVENT_FIELDS,
            (
                None,
                self.thread.pk,
                self.seq,
                self.kind,
                self.created_at,
                self.client_event_id,
                self.metadata,
                self.data,
                self.role,
                self.tool_call_id,
                self.request_digest,
                self.token_count,
                self.hash,
            ),
        )
        Event.thread.field.set_cached_value(event, self.thread)
        return event

    def hook_view(self) -> dict[str, Any]:
        """What the append hooks read of an event: seq, kind and the kind's fields."""
        return {"seq": self.seq, "kind": self.kind, **self.data}


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
        # A new event's stored form as canonical JSON text (what the chain hashed: without
        # token_count and hash), so that the answer is assembled without encoding the event
        # again; None for a replay.
        self.chained = chained

    @property
    def event(self) -> Event:
        """The event as a model, built on first use for a new one."""
        if self._event is None:
            assert self.row is not None
            self._event = self.row.model()
        return self._event


def event_token_count(
    stored: dict[str, Any], encoding: str, texts: Mapping[str, str] | None = None
) -> int:
    """Tokens of the event as a model reads it; `texts`: canonical texts of its fields, when
    known (see render_event)."""
    return tokens.count_text(render_event(stored, texts), encoding) + tokens.MESSAGE_OVERHEAD_TOKENS


def _open_calls(thread: Thread, tool_call_ids: set[str]) -> tuple[dict[str, list[int]], set[int]]:
    """Seqs of calls with no result yet, per id, newest last; and which of them have a side
    effect."""
    if not tool_call_ids:
        return {}, set()
    # Only the key columns and the result's call_seq: tool results can be large and are not
    # needed here.
    rows = (
        Event.objects.filter(
            thread=thread,
            tool_call_id__in=tool_call_ids,
            kind__in=(EventKind.TOOL_CALL, EventKind.TOOL_RESULT),
        )
        .values_list("kind", "seq", "tool_call_id", "data__call_seq", "data__side_effect")
        .order_by("seq")
    )
    calls: dict[str, list[int]] = {}
    answered: set[int] = set()
    by_seq: dict[int, str] = {}
    side_effects: set[int] = set()
    for kind, seq, tool_call_id, call_seq, side_effect in rows:
        if kind == EventKind.TOOL_CALL:
            by_seq[seq] = tool_call_id
            if side_effect is True:
                side_effects.add(seq)
        else:
            answered.add(call_seq)
    for seq, call_id in by_seq.items():
        if seq not in answered:
            calls.setdefault(call_id, []).append(seq)
    return calls, side_effects - answered


def event_append_batch(
    *, thread: Thread, new_events: Sequence[NewEvent], lock: bool = True
) -> list[Appended]:
    """Append events to a thread, all or nothing.

    Locks the thread row (select_for_update) before numbering anything. Idempotent by
    client_event_id: the same id and body answers with the original event, the same id with
    another body raises IdempotencyConflict. A tool_result binds to the latest call with its
    tool_call_id that has no result yet, or raises NoOpenToolCall.
    """
    with transaction.atomic(durable=lock):
        locked = _with_replay_count(
            Thread.objects.select_for_update().filter(pk=thread.pk), new_events
        ).get()
        appended = _append_locked(locked, new_events)
    _schedule_hooks(locked, appended)
    thread.last_seq, thread.chain_head = locked.last_seq, locked.chain_head
    thread.token_total = locked.token_total
    return appended


def thread_events_append(
    *, workspace: Workspace, thread_id: str, new_events: Sequence[NewEvent]
) -> tuple[Thread, list[Appended]]:
    """The API's append: find the workspace's thread by UUID or external_id and lock it in the
    same query (select_for_update), then append as event_append_batch does. Raises NotFound
    for a thread outside the workspace."""
    guess_key = (workspace.pk, thread_id)
    counts = _TokenCounts(new_events, _encoding_guesses.get(guess_key, tokens.DEFAULT_ENCODING))
    try:
        with transaction.atomic(durable=True):
            locked = _thread_lock_for_workspace(workspace, thread_id, new_events)
            appended = _append_locked(locked, new_events, counts=counts)
    finally:
        counts.cancel()
    if len(_encoding_guesses) >= _ENCODING_GUESSES_MAX:
        _encoding_guesses.clear()
    _encoding_guesses[guess_key] = locked.encoding
    _schedule_hooks(locked, appended)
    return locked, appended


def _with_replay_count(
    threads: QuerySet[Thread], new_events: Sequence[NewEvent]
) -> QuerySet[Thread]:
    """Count, in the lock's own query, the events that already carry one of the batch's
    client_event_ids: new events (the common case) then cost no query of their own.

    On PostgreSQL the subqueries read the snapshot taken when the statement began, before it
    waited for the lock, so the count may miss events another writer committed meanwhile.
    `log_seq` (the last seq in that same snapshot) tells: the count is trusted only when it
    equals the locked row's last_seq, i.e. nothing was appended in between.
    """
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    if not client_ids:
        return threads
    matches = (
        Event.objects.filter(thread=OuterRef("pk"), client_event_id__in=client_ids)
        .order_by()
        .values("thread")
        .annotate(n=Count("pk"))
        .values("n")
    )
    log_seq = Event.objects.filter(thread=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    return threads.annotate(
        replays=Coalesce(Subquery(matches), 0), log_seq=Coalesce(Subquery(log_seq), 0)
    )


def _may_have_replays(thread: Thread) -> bool:
    """False only when the lock's query counted no replay in an up-to-date snapshot."""
    return not (
        getattr(thread, "replays", None) == 0
        and getattr(thread, "log_seq", None) == thread.last_seq
    )


def _thread_lock_for_workspace(
    workspace: Workspace, thread_id: str, new_events: Sequence[NewEvent]
) -> Thread:
    """The workspace's thread by UUID or external_id, locked (FOR UPDATE on PostgreSQL; on
    SQLite the IMMEDIATE transaction already holds the write lock), with the replay counts of
    _with_replay_count. Written as SQL: this runs on every append, and compiling the same
    ORM query with its two subqueries costs more CPU than the rest of a one-event append.
    """
    connection = connections[router.db_for_write(Thread)]
    quote = connection.ops.quote_name
    thread_table, event_table = quote(Thread._meta.db_table), quote(Event._meta.db_table)
    client_ids = sorted({e.client_event_id for e in new_events if e.client_event_id is not None})
    postgres = connection.vendor == "postgresql"
    fields = Thread._meta.concrete_fields
    columns = ", ".join(f"t.{quote(cast(str, f.column))}" for f in fields)
    params: list[Any] = []
    if client_ids:
        if postgres:
            # The ids as one array parameter (a 500-id IN list costs milliseconds to parse and
            # plan on every batch), each probed in the (thread, client_event_id) index by a
            # correlated subquery: a join may be planned as a scan of all the thread's ids,
            # whose cost grows with the log.
            replays = (
                f"SELECT COUNT(*) FROM unnest(%s::text[]) AS c(id) WHERE (SELECT 1 FROM "
                f"{event_table} e WHERE e.thread_id = t.id AND e.client_event_id = c.id) "
                "IS NOT NULL"
            )
            params.append(client_ids)
        else:
            replays = (
                f"SELECT COUNT(*) FROM {event_table} e WHERE e.thread_id = t.id AND "
                f"e.client_event_id IN ({', '.join(['%s'] * len(client_ids))})"
            )
            params += client_ids
        columns += (
            f", ({replays}) AS replays, COALESCE((SELECT MAX(e.seq) FROM {event_table} e "
            "WHERE e.thread_id = t.id), 0) AS log_seq"
        )
    try:
        uid: uuid.UUID | None = uuid.UUID(thread_id)
    except ValueError:
        uid = None
    where = "t.workspace_id = %s AND "
    params.append(workspace.pk)
    if uid is None:
        where += "t.external_id = %s"
        params.append(thread_id)
    else:
        where += "(t.id = %s OR t.external_id = %s)"
        pk_field: Any = Thread._meta.pk
        params += [uid if postgres else pk_field.get_db_prep_value(uid, connection), thread_id]
    lock = " FOR UPDATE OF t" if connection.features.has_select_for_update_of else ""
    sql = f"SELECT {columns} FROM {thread_table} t WHERE {where}{lock}"
    if postgres:
        # psycopg gives every column of the thread its Python type (uuid, timestamptz, ...),
        # so rows become models with no converter, as Django's own reads would make them.
        # In a pipeline: the transaction's BEGIN goes in the same round trip as the query.
        with _server_cursor(connection) as pg, pg.connection.pipeline():
            pg.execute(sql, params)
            rows = pg.fetchall()
        _log_queries(connection, time.monotonic(), sql)
        names = [f.attname for f in fields]
        found = []
        for row in rows:
            thread = Thread.from_db(connection.alias, names, row[: len(fields)])
            if client_ids:
                thread.replays, thread.log_seq = row[len(fields) :]  # type: ignore[attr-defined]
            found.append(thread)
    else:
        found = list(Thread.objects.raw(sql, params))
    if not found:
        raise NotFound("thread not found")
    # The UUID wins over an external_id that happens to spell another thread's UUID.
    found.sort(key=lambda t: t.pk != uid)
    return found[0]


@contextmanager
def _server_cursor(connection: Any) -> Iterator[psycopg.Cursor[Any]]:
    """A psycopg cursor on Django's PostgreSQL connection that binds on the server (Django's
    own cursors quote every value into the SQL text in Python), with its statements prepared
    (CTXADMIN_PREPARED_STATEMENTS) for this use only: the connection is left as Django
    configured it. Errors come out as Django's classes (IntegrityError...), as for any query.
    """
    connection.ensure_connection()
    pgconn = connection.connection
    threshold = pgconn.prepare_threshold
    # Django turns psycopg's prepared statements off (prepare_threshold=None, for poolers that
    # do not support them); unprepared, the server parses and plans the append path's
    # statements again on every request.
    if settings.CTXADMIN_PREPARED_STATEMENTS:
        pgconn.prepare_threshold = 0
    try:
        with connection.wrap_database_errors, psycopg.Cursor(pgconn) as cursor:
            yield cursor
    finally:
        pgconn.prepare_threshold = threshold


def _schedule_hooks(thread: Thread, appended: list[Appended]) -> None:
    new = [a.row.hook_view() if a.row is not None else a.event for a in appended if a.created]
    if new:
        for hook in after_append_hooks:
            # robust: the events are committed by then; a failing hook (a fold trigger) is
            # logged, and never turns the agent's successful append into an error.
            transaction.on_commit(
                # The thread as this append left it (head fields current as of the commit),
                # so a hook need not read it again on every append.
                lambda hook=hook: hook(thread, new),  # type: ignore[misc]
                robust=True,
            )


def _batch_lookups(new_events: Sequence[NewEvent], existing: Mapping[Any, Event]) -> set[str]:
    """tool_call_ids whose open calls must be read from the log: those of results that no
    earlier new call in the same batch answers. Replays are skipped, as the append skips them."""
    open_here: dict[str, int] = {}
    seen: set[str] = set()
    lookups: set[str] = set()
    for new in new_events:
        client_id = new.client_event_id
        if client_id is not None:
            if client_id in existing or client_id in seen:
                continue
            seen.add(client_id)
        call_id: str = new.data.get("tool_call_id", "")
        if new.kind == "tool_call":
            open_here[call_id] = open_here.get(call_id, 0) + 1
        elif new.kind == "tool_result":
            if open_here.get(call_id):
                open_here[call_id] -= 1
            else:
                lookups.add(call_id)
    return lookups


# The columns of a new event row, in the order _event_rows gives them (every column but id).
EVENT_COLUMNS = (
    "thread_id",
    "seq",
    "kind",
    "created_at",
    "client_event_id",
    "metadata",
    "data",
    "role",
    "tool_call_id",
    "request_digest",
    "token_count",
    "hash",
)
_EVENT_FIELDS = ("id", *EVENT_COLUMNS)


# From this many events, a batch's tokens are counted on a helper thread (tiktoken releases the
# GIL while it encodes) while this one locks the thread and hashes the chain.
TOKENS_ASIDE_MIN = 32
TOKEN_CHUNKS = 4
_token_pool: tuple[int, ThreadPoolExecutor] | None = None


class _TokenCounts:
    """Each event's token count (event_token_count) in one encoding, in order. A large batch is
    counted in a few chunks, each in one call into tiktoken that runs without the GIL: a helper
    thread starts on them at once, beside this thread's work, and result() counts the chunks
    the helper has not reached yet, then waits for it."""

    def __init__(self, new_events: Sequence[NewEvent], encoding: str) -> None:
        self.encoding = encoding
        self._events = new_events
        self._counts = [0] * len(new_events)
        self._helper: Future[None] | None = None
        size = max(TOKENS_ASIDE_MIN, -(-len(new_events) // TOKEN_CHUNKS))
        # next() on the iterator is atomic under the GIL: each chunk is counted once.
        self._chunks = iter(range(0, len(new_events), size))
        self._size = size
        if len(new_events) >= TOKENS_ASIDE_MIN:
            self._helper = _token_helper().submit(self._count)

    def _count(self) -> None:
        for start in self._chunks:
            chunk = self._events[start : start + self._size]
            texts = [render_event({"kind": new.kind, **new.data}, new.data_texts) for new in chunk]
            counts = tokens.count_texts(texts, self.encoding)
            self._counts[start : start + len(chunk)] = [
                count + tokens.MESSAGE_OVERHEAD_TOKENS for count in counts
            ]

    def result(self) -> list[int]:
        self._count()
        if self._helper is not None:
            self._helper.result()  # the chunk it was counting, and any error it met
        return self._counts

    def cancel(self) -> None:
        """Not needed after all: the helper finishes the chunk it is on and takes no other."""
        for _ in self._chunks:
            pass


def _token_helper() -> ThreadPoolExecutor:
    global _token_pool
    if _token_pool is None or _token_pool[0] != os.getpid():
        # One per process: a pool inherited through fork has no thread behind it.
        _token_pool = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="ctxadmin-tokens"))
    return _token_pool[1]


# The encoding each thread had at its last append in this process, by (workspace, the id the
# agent uses): an append starts counting in it before it has read the thread. Only a guess:
# counted in another encoding than the thread's, the events are counted again.
_encoding_guesses: dict[tuple[Any, str], str] = {}
_ENCODING_GUESSES_MAX = 10_000


def _append_locked(
    thread: Thread,
    new_events: Sequence[NewEvent],
    *,
    with_pks: bool = False,
    counts: _TokenCounts | None = None,
) -> list[Appended]:
    """`counts`: the events' token counts, already being counted (in the right encoding or
    not: a wrong one is cancelled and counted again)."""
    key = chain_key()
    if counts is None or counts.encoding != thread.encoding:
        if counts is not None:
            counts.cancel()
        counts = _TokenCounts(new_events, thread.encoding)
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    existing = (
        {
            e.client_event_id: e
            for e in Event.objects.filter(thread=thread, client_event_id__in=client_ids)
        }
        if client_ids and _may_have_replays(thread)
        else {}
    )
    open_calls, side_effect_calls = _open_calls(thread, _batch_lookups(new_events, existing))
    seq, head = thread.last_seq, thread.chain_head
    out: list[Appended] = []
    rows: list[NewRow] = []
    created: list[int] = []  # the indexes of new_events that are new
    seen_in_batch: dict[str, NewRow] = {}
    now = timezone.now()
    now_text = format_time(now)
    for index, new in enumerate(new_events):
        where = f"events[{index}]" if len(new_events) > 1 else "event"
        if new.client_event_id is not None:
            original: Event | NewRow | None = existing.get(
                new.client_event_id
            ) or seen_in_batch.get(new.client_event_id)
            if original is not None:
                if original.request_digest != new.digest:
                    raise IdempotencyConflict(
                        f"client_event_id {new.client_event_id!r} was already used with "
                        f"another body (seq {original.seq})",
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
            calls = open_calls.get(data["tool_call_id"], [])
            if not calls:
                raise NoOpenToolCall(
                    f"no open tool call with tool_call_id {data['tool_call_id']!r} in this thread",
                    fields={where: "tool_call_id has no open call"},
                )
            data = {**data, "call_seq": calls.pop()}
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
        created_at = new.created_at or now
        chained = join_canonical(
            stored_members(
                seq=seq,
                kind=new.kind,
                created_at=now_text if new.created_at is None else format_time(created_at),
                client_event_id=new.client_event_id,
                metadata_text=metadata_text,
                data_texts=data_texts,
            )
        )
        head = chain.link_hash(head, chained.encode("utf-8"), key)
        row = NewRow(
            thread,
            seq,
            new.kind,
            created_at,
            new.client_event_id,
            new.metadata,
            data,
            new.digest,
            head,
            metadata_text,
            data_text,
        )
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
    _insert_events_and_head(
        thread,
        rows,
        now,
        texts=[(row.metadata_text, row.data_text) for row in rows],
        then=_side_effect_and_approval_statements(thread, rows, side_effect_calls),
    )
    if with_pks:
        _assign_event_pks(thread, [a.event for a in out if a.created])
    return out


# Column types the database drivers take as they are; every other field is prepared by Django
# (JSON, datetimes, UUID keys).
_PLAIN_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "TextField",
    }
)


def _row_params(objs: Sequence[models.Model], connection: Any) -> tuple[str, list[list[Any]]]:
    """The quoted column list of a model's non-key fields, and each row's prepared values."""
    meta = type(objs[0])._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    plans = [
        (
            f.attname,
            f.get_internal_type() in _PLAIN_TYPES,
            bool(getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)),
            f,
        )
        for f in fields
    ]
    rows = []
    for obj in objs:
        row = []
        for attname, plain, auto, field in plans:
            value = field.pre_save(obj, True) if auto else getattr(obj, attname)
            row.append(value if plain else field.get_db_prep_save(value, connection))
        rows.append(row)
        obj._state.adding = False
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    return columns, rows


# From this many rows a batch goes in with COPY rather than a pipelined executemany.
COPY_MIN_ROWS = 50


def _event_rows(
    connection: Any,
    thread: Thread,
    events: Sequence[Event | NewRow],
    texts: Sequence[tuple[str, str]] | None,
) -> list[tuple[Any, ...]]:
    """Each new event's EVENT_COLUMNS values as the database takes them. The JSON columns go
    as their canonical text (`texts`: (metadata, data) per event, encoded here when absent),
    which PostgreSQL parses into jsonb and SQLite stores as it is."""
    thread_id = Event._meta.get_field("thread").get_db_prep_save(thread.pk, connection)
    adapt_time = connection.ops.adapt_datetimefield_value
    if texts is None:
        texts = [(canonical_text(e.metadata), canonical_text(e.data)) for e in events]
    return [
        (
            thread_id,
            e.seq,
            e.kind,
            adapt_time(e.created_at),
            e.client_event_id,
            metadata,
            data,
            e.role,
            e.tool_call_id,
            e.request_digest,
            e.token_count,
            e.hash,
        )
        for e, (metadata, data) in zip(events, texts, strict=True)
    ]


def _insert_events_and_head(
    thread: Thread,
    events: Sequence[Event | NewRow],
    now: Any,
    *,
    texts: Sequence[tuple[str, str]] | None = None,
    then: Sequence[Statement] = (),
) -> None:
    """Write the new events, move the thread's head (last_seq, chain_head, token_total), then
    run the `then` statements (rows that point at the new events).

    PostgreSQL: the rows (executemany, or COPY for a large batch before it), the head's UPDATE
    and the statements go in one psycopg pipeline, one round trip for the whole batch. SQLite
    (in-process, no round trips): one after the other.
    """
    connection = connections[router.db_for_write(Event)]
    rows = _event_rows(connection, thread, events, texts)
    quote = connection.ops.quote_name
    table = quote(Event._meta.db_table)
    columns = ", ".join(quote(name) for name in EVENT_COLUMNS)
    placeholders = ", ".join(["%s"] * len(EVENT_COLUMNS))
    insert_sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"
    update_sql, update_params = _head_update_sql(
        connection,
        thread,
        {
            "last_seq": thread.last_seq,
            "chain_head": thread.chain_head,
            "token_total": thread.token_total,
            "updated_at": now,
        },
    )
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(insert_sql, rows)
            cursor.execute(update_sql, update_params)
            for sql, params in then:
                cursor.executemany(sql, params)
        return
    started = time.monotonic()
    copy = len(rows) >= COPY_MIN_ROWS
    with _server_cursor(connection) as pg:
        if copy:
            # COPY: one stream for the rows, no per-row statement at all (COPY cannot run in
            # a pipeline: it goes first).
            with pg.copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
                for row in rows:
                    stream.write_row(row)
        # Errors surface when the pipeline syncs.
        with pg.connection.pipeline():
            if not copy:
                # The rows as parameters of one prepared INSERT.
                pg.executemany(insert_sql, rows)
            pg.execute(update_sql, update_params)
            for sql, params in then:
                pg.executemany(sql, params)
    _log_queries(
        connection,
        started,
        f"COPY {table} ({columns})" if copy else f"{len(rows)} times: {insert_sql}",
        update_sql,
        *(f"{len(params)} times: {sql}" for sql, params in then),
    )


def _log_queries(connection: Any, started: float, *sqls: str) -> None:
    """Log statements run on the raw connection as Django's debug cursor would, so that query
    counts in tests stay truthful."""
    if connection.queries_logged:
        duration = f"{time.monotonic() - started:.3f}"
        for sql in sqls:
            connection.queries_log.append({"sql": sql, "time": duration})


def _head_update_sql(
    connection: Any, thread: Thread, values: dict[str, Any]
) -> tuple[str, list[Any]]:
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(name)} = %s" for name in values)
    params = [
        cast(models.Field, Thread._meta.get_field(name)).get_db_prep_save(value, connection)
        for name, value in values.items()
    ]
    params.append(Thread._meta.pk.get_db_prep_save(thread.pk, connection))  # type: ignore[union-attr]
    return f"UPDATE {quote(Thread._meta.db_table)} SET {sets} WHERE id = %s", params


def _assign_event_pks(thread: Thread, events: list[Event]) -> None:
    """Read back the keys of just-inserted events, in one query, for rows that refer to them."""
    ids = dict(
        Event.objects.filter(
            thread=thread, seq__gte=events[0].seq, seq__lte=events[-1].seq
        ).values_list("seq", "id")
    )
    for event in events:
        event.pk = ids[event.seq]


# A statement and the parameter rows it runs for.
Statement = tuple[str, list[Sequence[Any]]]


def _side_effect_and_approval_statements(
    thread: Thread, events: Sequence[NewRow], side_effect_calls: set[int]
) -> list[Statement]:
    """Side-effect and approval rows for new calls and requests; a result of a side-effecting
    call (its seq in side_effect_calls) sets that side effect's status. Statements to run
    right after the events' INSERT, in the same round trip: rows that point at a new event
    find it by (thread, seq), so no event key is read back first."""
    new_effects: list[SideEffect] = []
    approvals: list[ApprovalRequest] = []
    results: list[NewRow] = []
    for event in events:
        if event.kind == EventKind.TOOL_CALL and event.data.get("side_effect"):
            new_effects.append(
                SideEffect(
                    thread=thread,
                    tool_call_id=event.data["tool_call_id"],
                    tool_name=event.data["tool_name"],
                    idempotency_key=event.data["idempotency_key"],
                    status=SideEffectStatus.RUNNING,
                    call_seq=event.seq,
                )
            )
        elif event.kind == EventKind.TOOL_RESULT and event.data["call_seq"] in side_effect_calls:
            results.append(event)
        elif event.kind == EventKind.APPROVAL_REQUEST:
            approvals.append(
                ApprovalRequest(
                    thread=thread,
                    action=event.data["action"],
                    tool_name=event.data.get("tool_name", ""),
                    arguments=event.data["arguments"],
                    expires_at=parse_time(event.data["expires_at"])
                    if event.data.get("expires_at")
                    else None,
                )
            )
    statements = []
    if new_effects:
        statements.append(
            _insert_referring_to_events(
                thread, new_effects, "call_event", [e.call_seq for e in new_effects]
            )
        )
    if approvals:
        seqs = [e.seq for e in events if e.kind == EventKind.APPROVAL_REQUEST]
        statements.append(_insert_referring_to_events(thread, approvals, "request_event", seqs))
    if results:
        # One statement for the whole batch, keyed by (thread, call_seq): no read first.
        connection = connections[router.db_for_write(SideEffect)]
        table = connection.ops.quote_name(SideEffect._meta.db_table)
        now = SideEffect._meta.get_field("updated_at").get_db_prep_save(timezone.now(), connection)
        thread_id = Thread._meta.pk.get_db_prep_save(thread.pk, connection)  # type: ignore[union-attr]
        statements.append(
            (
                f"UPDATE {table} SET status = %s, result_seq = %s, request_id = %s, "
                "updated_at = %s WHERE thread_id = %s AND call_seq = %s",
                [
                    (
                        RESULT_TO_SIDE_EFFECT[r.data["status"]].value,
                        r.seq,
                        r.data.get("request_id", ""),
                        now,
                        thread_id,
                        r.data["call_seq"],
                    )
                    for r in results
                ],
            )
        )
    return statements


def _insert_referring_to_events(
    thread: Thread, objs: Sequence[models.Model], event_field: str, seqs: Sequence[int]
) -> Statement:
    """The INSERT of rows whose `event_field` points at a new event of `thread`, the event of
    seqs[i] for objs[i]: its key is looked up in the statement by that seq."""
    connection = connections[router.db_for_write(type(objs[0]))]
    meta = type(objs[0])._meta
    columns, rows = _row_params(objs, connection)
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    at = fields.index(meta.get_field(event_field))  # type: ignore[arg-type]
    event_table = connection.ops.quote_name(Event._meta.db_table)
    placeholders = ["%s"] * len(fields)
    placeholders[at] = f"(SELECT id FROM {event_table} WHERE thread_id = %s AND seq = %s)"
    thread_id = Thread._meta.pk.get_db_prep_save(thread.pk, connection)  # type: ignore[union-attr]
    params: list[Sequence[Any]] = [
        [*row[:at], thread_id, seq, *row[at + 1 :]] for seq, row in zip(seqs, rows, strict=True)
    ]
    table = connection.ops.quote_name(meta.db_table)
    return f"INSERT INTO {table} ({columns}) VALUES ({', '.join(placeholders)})", params


def server_event_append(
    *, thread: Thread, kind: str, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Event:
    """Append an event that ctxadmin writes itself (approval_decision, side_effect_resolution).

    Must run inside the caller's transaction, which holds the thread's lock.
    """
    new = NewEvent(kind=kind, data=data, metadata=metadata or {})
    return _append_locked(thread, [new], with_pks=True)[0].event
