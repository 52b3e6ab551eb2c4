"""Appending to a thread's event log (DESIGN §2).

Numbering and chaining happen under the thread's lock: `select_for_update()` on the thread row on
PostgreSQL; on SQLite every transaction is BEGIN IMMEDIATE, which serialises writers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from threads.domain import chain, tokens
from threads.domain.errors import IdempotencyConflict, InvalidEvent, NoOpenToolCall, NotFound
from threads.domain.events import NewEvent, parse_time, stored_form
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

# Called after commit with (thread or its id, appended events); the pipeline registers its
# triggers.
after_append_hooks: list[Callable[[Any, list[Event]], None]] = []


@dataclass
class Appended:
    event: Event
    created: bool  # False when an idempotent replay answered with the original
    # A new event's stored form with token_count and hash (INTERFACES "event dicts"), kept
    # from the append so that answering it costs nothing; None for a replay.
    stored: dict[str, Any] | None = None


def event_token_count(stored: dict[str, Any], encoding: str) -> int:
    return tokens.count_text(render_event(stored), encoding) + tokens.MESSAGE_OVERHEAD_TOKENS


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
    with transaction.atomic(durable=True):
        locked = _thread_lock_for_workspace(workspace, thread_id, new_events)
        appended = _append_locked(locked, new_events)
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
    params: list[Any] = []
    columns = "t.*"
    if client_ids:
        columns += (
            f", (SELECT COUNT(*) FROM {event_table} e WHERE e.thread_id = t.id AND "
            f"e.client_event_id IN ({', '.join(['%s'] * len(client_ids))})) AS replays, "
            f"COALESCE((SELECT MAX(e.seq) FROM {event_table} e WHERE e.thread_id = t.id), 0) "
            "AS log_seq"
        )
        params += client_ids
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
        params += [Thread._meta.pk.get_db_prep_value(uid, connection), thread_id]  # type: ignore[union-attr]
    lock = " FOR UPDATE OF t" if connection.features.has_select_for_update_of else ""
    found = list(
        Thread.objects.raw(f"SELECT {columns} FROM {thread_table} t WHERE {where}{lock}", params)
    )
    if not found:
        raise NotFound("thread not found")
    # The UUID wins over an external_id that happens to spell another thread's UUID.
    found.sort(key=lambda t: t.pk != uid)
    return found[0]


def _schedule_hooks(thread: Thread, appended: list[Appended]) -> None:
    new = [a.event for a in appended if a.created]
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


def _append_locked(
    thread: Thread, new_events: Sequence[NewEvent], *, with_pks: bool = False
) -> list[Appended]:
    key = chain_key()
    client_ids = {e.client_event_id for e in new_events if e.client_event_id is not None}
    existing = (
        {
            e.client_event_id: e
            for e in Event.objects.filter(thread=thread, client_event_id__in=client_ids)
        }
        if client_ids and _may_have_replays(thread)
        else {}
    )
    open_calls, side_effect_calls = _open_calls(
        thread, {e.data["tool_call_id"] for e in new_events if e.kind == "tool_result"}
    )
    seq, head = thread.last_seq, thread.chain_head
    out: list[Appended] = []
    to_insert: list[Event] = []
    stored_forms: list[dict[str, Any]] = []
    seen_in_batch: dict[str, Event] = {}
    now = timezone.now()
    for index, new in enumerate(new_events):
        where = f"events[{index}]" if len(new_events) > 1 else "event"
        if new.client_event_id is not None:
            original = existing.get(new.client_event_id) or seen_in_batch.get(new.client_event_id)
            if original is not None:
                if original.request_digest != new.digest:
                    raise IdempotencyConflict(
                        f"client_event_id {new.client_event_id!r} was already used with "
                        f"another body (seq {original.seq})",
                        fields={where: "client_event_id reused with a different body"},
                    )
                out.append(Appended(original, created=False))
                continue
        seq += 1
        data = dict(new.data)
        if new.kind == "tool_result":
            pending = open_calls.get(data["tool_call_id"], [])
            if not pending:
                raise NoOpenToolCall(
                    f"no open tool call with tool_call_id {data['tool_call_id']!r} in this thread",
                    fields={where: "tool_call_id has no open call"},
                )
            data["call_seq"] = pending.pop()
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
        stored = stored_form(
            seq=seq,
            kind=new.kind,
            created_at=created_at,
            client_event_id=new.client_event_id,
            metadata=new.metadata,
            data=data,
        )
        head = chain.link_hash(head, chain.event_canonical(stored), key)
        event = Event(
            thread=thread,
            seq=seq,
            kind=new.kind,
            created_at=created_at,
            client_event_id=new.client_event_id,
            metadata=new.metadata,
            data=data,
            role=data.get("role", ""),
            tool_call_id=data.get("tool_call_id", ""),
            request_digest=new.digest,
            hash=head,
        )
        stored_forms.append(stored)
        to_insert.append(event)
        out.append(Appended(event, created=True, stored=stored))
        if new.client_event_id is not None:
            seen_in_batch[new.client_event_id] = event
    if not to_insert:
        return out
    # One by one: tiktoken's batch API starts a thread pool per call, slower than a loop here.
    for event, stored in zip(to_insert, stored_forms, strict=True):
        event.token_count = event_token_count(stored, thread.encoding)
        stored["token_count"], stored["hash"] = event.token_count, event.hash
    thread.last_seq, thread.chain_head = seq, head
    thread.token_total += sum(e.token_count for e in to_insert)
    _insert_events_and_head(thread, to_insert, now)
    if with_pks or any(
        e.kind == EventKind.APPROVAL_REQUEST
        or (e.kind == EventKind.TOOL_CALL and e.data.get("side_effect"))
        for e in to_insert
    ):
        _assign_event_pks(thread, to_insert)
    _record_side_effects_and_approvals(thread, to_insert, side_effect_calls)
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


def _insert_rows(objs: Sequence[models.Model]) -> None:
    """Insert rows of one model with one prepared INSERT run for every row (executemany).

    A constant number of statements however large the batch: bulk_create splits SQLite
    batches at Django's 999-parameter limit, and on PostgreSQL it binds arrays (UNNEST) that
    the client-side cursor quotes in Python, slower than psycopg's pipelined executemany.
    Primary keys are not read back (see _assign_event_pks).
    """
    if not objs:
        return
    connection = connections[router.db_for_write(type(objs[0]))]
    columns, rows = _row_params(objs, connection)
    table = connection.ops.quote_name(type(objs[0])._meta.db_table)
    placeholders = ", ".join(["%s"] * len(rows[0]))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", rows)


# From this many rows a batch goes in with COPY rather than a pipelined executemany.
COPY_MIN_ROWS = 50


def _insert_events_and_head(thread: Thread, events: list[Event], now: Any) -> None:
    """Write the new events and move the thread's head (last_seq, chain_head, token_total).

    PostgreSQL: the rows (executemany) and the head's UPDATE go in one psycopg pipeline, one
    round trip for the whole batch. SQLite (in-process, no round trips): one after the other.
    """
    connection = connections[router.db_for_write(Event)]
    head = Thread.objects.filter(pk=thread.pk)
    values = {
        "last_seq": thread.last_seq,
        "chain_head": thread.chain_head,
        "token_total": thread.token_total,
        "updated_at": now,
    }
    if connection.vendor != "postgresql":
        _insert_rows(events)
        head.update(**values)
        return
    columns, rows = _row_params(events, connection)
    table = connection.ops.quote_name(Event._meta.db_table)
    placeholders = ", ".join(["%s"] * len(rows[0]))
    update_sql, update_params = _head_update_sql(connection, thread, values)
    insert_sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"
    connection.ensure_connection()
    started = time.monotonic()
    # A server-side-binding cursor (Django's own binds on the client, quoting every value
    # into the SQL text in Python): the rows travel as parameters of one prepared INSERT.
    # Errors surface when the pipeline syncs: wrap_database_errors turns them into Django's
    # own classes (IntegrityError...), as for any other query.
    pgconn = connection.connection
    threshold = pgconn.prepare_threshold
    # Django turns psycopg's prepared statements off (prepare_threshold=None, for poolers
    # that do not support them); unprepared, the server parses and plans each of a batch's
    # INSERTs again, several times the cost of the insert itself. The batch's statement is
    # prepared for this call only, and the connection is left as Django configured it.
    prepare = settings.CTXADMIN_PREPARE_BATCH_INSERTS and len(rows) > 1
    pgconn.prepare_threshold = 0 if prepare else threshold
    if len(rows) >= COPY_MIN_ROWS:
        # COPY: one stream for the rows, no per-row statement at all; then the head.
        with connection.wrap_database_errors, psycopg.Cursor(pgconn) as cursor:
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cursor.execute(update_sql, update_params)
        if connection.queries_logged:
            duration = f"{time.monotonic() - started:.3f}"
            connection.queries_log.append({"sql": f"COPY {table} ({columns})", "time": duration})
            connection.queries_log.append({"sql": update_sql, "time": duration})
        return
    try:
        with (
            connection.wrap_database_errors,
            pgconn.pipeline(),
            psycopg.Cursor(pgconn) as cursor,
        ):
            cursor.executemany(insert_sql, rows)
            cursor.execute(update_sql, update_params)
    finally:
        pgconn.prepare_threshold = threshold
    if connection.queries_logged:
        # Logged as Django's debug cursor would, so query counts in tests stay truthful.
        duration = f"{time.monotonic() - started:.3f}"
        connection.queries_log.append({"sql": f"{len(rows)} times: {insert_sql}", "time": duration})
        connection.queries_log.append({"sql": update_sql, "time": duration})


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


def _record_side_effects_and_approvals(
    thread: Thread, events: list[Event], side_effect_calls: set[int]
) -> None:
    """Side-effect and approval rows for new calls and requests; a result of a side-effecting
    call (its seq in side_effect_calls) sets that side effect's status."""
    new_effects: list[SideEffect] = []
    approvals: list[ApprovalRequest] = []
    results: list[Event] = []
    for event in events:
        if event.kind == EventKind.TOOL_CALL and event.data.get("side_effect"):
            new_effects.append(
                SideEffect(
                    thread=thread,
                    call_event=event,
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
                    request_event=event,
                    action=event.data["action"],
                    tool_name=event.data.get("tool_name", ""),
                    arguments=event.data["arguments"],
                    expires_at=parse_time(event.data["expires_at"])
                    if event.data.get("expires_at")
                    else None,
                )
            )
    _insert_rows(new_effects)
    _insert_rows(approvals)
    if not results:
        return
    # One statement for the whole batch, keyed by (thread, call_seq): no read first
    # (bulk_update would also split it on SQLite).
    connection = connections[router.db_for_write(SideEffect)]
    table = connection.ops.quote_name(SideEffect._meta.db_table)
    now = SideEffect._meta.get_field("updated_at").get_db_prep_save(timezone.now(), connection)
    thread_id = Thread._meta.pk.get_db_prep_save(thread.pk, connection)  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        cursor.executemany(
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


def server_event_append(
    *, thread: Thread, kind: str, data: dict[str, Any], metadata: dict[str, Any] | None = None
) -> Event:
    """Append an event that ctxadmin writes itself (approval_decision, side_effect_resolution).

    Must run inside the caller's transaction, which holds the thread's lock.
    """
    new = NewEvent(kind=kind, data=data, metadata=metadata or {})
    return _append_locked(thread, [new], with_pks=True)[0].event
