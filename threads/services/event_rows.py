"""Writing an append's rows (docs/event-log.md, "Event log"): the new events, the thread's head, and
the side-effect and approval rows that point at new events, in as few round trips as the database
allows.

PostgreSQL: a large batch streams with COPY, a small one goes as one prepared, pipelined INSERT;
the head's UPDATE and the rows that point at new events follow in the same pipeline, and find
their events by seq rather than reading keys back. SQLite (in-process, no round trips): one
statement after the other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import connections, models, router
from django.utils import timezone

from threads.domain.canonical import canonical_text
from threads.domain.events import parse_time
from threads.domain.ledger import DUPLICATE_OF, RESULT_STATUS
from threads.models import (
    ApprovalRequest,
    Event,
    EventKind,
    SideEffect,
    SideEffectStatus,
    Thread,
)
from threads.selectors.statements import log_queries, rows_run, server_cursor


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
    # A tool result's: whether the call it answers has a side effect (the append knows it
    # from binding the result; the fold triggers need not read the call again). None for
    # other kinds.
    call_side_effect: bool | None = None
    # The secrets found in its text (threads.domain.secrets), None when none was found.
    secrets: list[dict[str, str]] | None = None
    # Chain v2 (threads.domain.chain): the salt (hex) and the content digest the link commits to.
    content_salt: str | None = None
    content_digest: str | None = None

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
            EVENT_FIELDS,
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
                self.secrets,
                self.content_salt,
                self.content_digest,
            ),
        )
        Event.thread.field.set_cached_value(event, self.thread)
        return event

    def hook_view(self) -> dict[str, Any]:
        """What the append hooks read of an event: seq, kind and the kind's fields; a tool
        result's also `call_side_effect` (HOOK_CALL_SIDE_EFFECT)."""
        view = {"seq": self.seq, "kind": self.kind, **self.data}
        if self.call_side_effect is not None:
            view[HOOK_CALL_SIDE_EFFECT] = self.call_side_effect
        return view


# The key of a tool result's hook view that says whether its call has a side effect.
HOOK_CALL_SIDE_EFFECT = "call_side_effect"


# The columns of a new event row, in the order _event_rows gives them (all but id).
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
    # Derived at ingest, outside the chain (docs/event-log.md, "Secrets at ingest"): NULL for
    # most rows.
    "secrets",
    # Chain v2 (docs/event-log.md, "Hash chain and canonical JSON").
    "content_salt",
    "content_digest",
)
EVENT_FIELDS = ("id", *EVENT_COLUMNS)

# A statement and the parameter rows it runs for.
Statement = tuple[str, list[Sequence[Any]]]


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


def row_params(objs: Sequence[models.Model], connection: Any) -> tuple[str, list[list[Any]]]:
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
    which PostgreSQL parses into jsonb and SQLite stores as it is; `secrets` as NULL when the
    event has none."""
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
            canonical_text(e.secrets) if e.secrets else None,
            e.content_salt,
            e.content_digest,
        )
        for e, (metadata, data) in zip(events, texts, strict=True)
    ]


def insert_events_and_head(
    thread: Thread,
    events: Sequence[Event | NewRow],
    now: Any,
    *,
    texts: Sequence[tuple[str, str]] | None = None,
    then: Sequence[Statement] = (),
) -> None:
    """Write the new events, move the thread's head (last_seq, chain_head, token_total,
    events_with_secrets, and agent_appended_at, the run status's "running", as `thread` holds
    them; inside `head_deferred`, once at its end), then run the `then` statements (rows that
    point at the new events).

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
    deferred: HeadDeferral | None = getattr(thread, DEFERRED_HEAD, None)
    if deferred is not None and deferred.deferring:
        deferred.updated_at = now  # written later: by a later append, or when the batch ends
        head: list[tuple[str, list[Any]]] = []
    else:
        head = [_head_update_sql(connection, thread, _head_values(thread, now))]
        if deferred is not None:
            deferred.updated_at = None  # this head holds whatever was deferred
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(insert_sql, rows)
            for sql, params in head:
                cursor.execute(sql, params)
            for sql, params in then:
                cursor.executemany(sql, params)
        return
    started = time.monotonic()
    copy = len(rows) >= COPY_MIN_ROWS
    with server_cursor(connection) as pg:
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
            for sql, params in head:
                pg.execute(sql, params)
            for sql, params in then:
                pg.executemany(sql, params)
    log_queries(
        connection,
        started,
        f"COPY {table} ({columns})" if copy else f"{len(rows)} times: {insert_sql}",
        *(sql for sql, _ in head),
        *(f"{len(params)} times: {sql}" for sql, params in then),
    )


# The attribute of a locked Thread inside `head_deferred`.
DEFERRED_HEAD = "deferred_head"


@dataclass(slots=True)
class HeadDeferral:
    """What `head_deferred` keeps on the thread: whether appends still leave the head to later,
    and the time of the last append whose head is not written yet (None when none is)."""

    deferring: bool = True
    updated_at: Any = None

    def resume(self) -> None:
        """Appends from here on write the head as usual, and with it every one deferred: called
        before a batch's last operation, whose own append then writes the head in its round
        trip (a batch of one operation defers nothing)."""
        self.deferring = False


@contextmanager
def head_deferred(thread: Thread) -> Iterator[HeadDeferral]:
    """Within: appends to `thread` — the row the caller's transaction locked — write their
    events and the rows that point at them, but not the thread row's head, until `resume()`;
    an append after it writes the head, and leaving without an error writes it if no append
    did since. A batch of a LangGraph saver's puts and writes appends once per put: each
    UPDATE of the row made a new version of it, indexed again by every index of the thread
    table, 32 per batch where one says the same. Nothing inside may read the head from the
    database (the appends keep it on `thread`; threads.services.events.event_append_batch
    appends to `thread` itself); a refusal rolls the transaction back, and nothing is written."""
    deferral = HeadDeferral()
    setattr(thread, DEFERRED_HEAD, deferral)
    try:
        yield deferral
    finally:
        delattr(thread, DEFERRED_HEAD)
    if deferral.updated_at is None:
        return
    connection = connections[router.db_for_write(Thread)]
    sql, params = _head_update_sql(connection, thread, _head_values(thread, deferral.updated_at))
    if connection.vendor == "postgresql":
        rows_run(connection, sql, params, fetch=False)
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def _head_values(thread: Thread, now: Any) -> dict[str, Any]:
    """The thread row's head as `thread` holds it after an append made at `now`."""
    return {
        "last_seq": thread.last_seq,
        "chain_head": thread.chain_head,
        "token_total": thread.token_total,
        "events_with_secrets": thread.events_with_secrets,
        "updated_at": now,
        "agent_appended_at": thread.agent_appended_at,
    }


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


def side_effect_and_approval_statements(
    thread: Thread, events: Sequence[NewRow], side_effect_calls: set[int]
) -> list[Statement]:
    """Side-effect and approval rows for new calls and requests; a result of a side-effecting
    call (its seq in side_effect_calls) sets that side effect's status. Statements to run
    right after the events' INSERT, in the same round trip: rows that point at a new event
    find it by (thread, seq), so no event key is read back first."""
    new_effects: list[SideEffect] = []
    keys: set[str] = set()
    approvals: list[ApprovalRequest] = []
    results: list[NewRow] = []
    for event in events:
        if event.kind == EventKind.TOOL_CALL and event.data.get("side_effect"):
            if event.data["idempotency_key"] in keys:
                continue  # a retry within the batch: the key's record is its first call's
            keys.add(event.data["idempotency_key"])
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
        elif (
            event.kind == EventKind.TOOL_RESULT
            and event.data["call_seq"] in side_effect_calls
            and DUPLICATE_OF not in event.data
        ):
            # A second result of a call (flagged DUPLICATE_OF) never moves its record: the
            # record stays the first result's outcome, or a resolution's.
            results.append(event)
        elif event.kind == EventKind.APPROVAL_REQUEST:
            approvals.append(
                ApprovalRequest(
                    thread=thread,
                    # A fork's copy of a redacted request has neither (docs/event-log.md,
                    # "Redaction").
                    action=event.data.get("action", ""),
                    tool_name=event.data.get("tool_name", ""),
                    arguments=event.data.get("arguments", {}),
                    expires_at=parse_time(event.data["expires_at"])
                    if event.data.get("expires_at")
                    else None,
                )
            )
    statements = []
    if new_effects:
        # One record per idempotency key of the thread (docs/repairs.md, "Side effects"): a later
        # call with a recorded key is a retry, kept in the log but adding no record. The rows are
        # written under the thread's lock, so NOT EXISTS sees every earlier call's record.
        statements.append(
            _insert_referring_to_events(
                thread,
                new_effects,
                "call_event",
                [e.call_seq for e in new_effects],
                unless_same="idempotency_key",
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
                # A resolution recorded while the call ran overrides its result
                # (docs/repairs.md, "Side effects"):
                # only a running record takes the result's status.
                f"UPDATE {table} SET status = CASE WHEN status = %s THEN %s ELSE status END, "
                "result_seq = %s, request_id = %s, updated_at = %s "
                "WHERE thread_id = %s AND call_seq = %s",
                [
                    (
                        SideEffectStatus.RUNNING.value,
                        # A timeout says nothing about whether the effect happened: unknown.
                        RESULT_STATUS[r.data["status"]],
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
    thread: Thread,
    objs: Sequence[models.Model],
    event_field: str,
    seqs: Sequence[int],
    unless_same: str = "",
) -> Statement:
    """The INSERT of rows whose `event_field` points at a new event of `thread`, the event of
    seqs[i] for objs[i]: its key is looked up in the statement by that seq. With
    `unless_same` (a field name), a row whose non-empty value of that field the thread
    already has is not inserted."""
    connection = connections[router.db_for_write(type(objs[0]))]
    meta = type(objs[0])._meta
    columns, rows = row_params(objs, connection)
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
    if not unless_same:
        return f"INSERT INTO {table} ({columns}) VALUES ({', '.join(placeholders)})", params
    same = fields.index(meta.get_field(unless_same))  # type: ignore[arg-type]
    column = connection.ops.quote_name(str(fields[same].column))
    guarded: list[Sequence[Any]] = [
        [*p, thread_id, row[same]] for p, row in zip(params, rows, strict=True)
    ]
    return (
        f"INSERT INTO {table} ({columns}) SELECT {', '.join(placeholders)} "
        # The key's own term repeats the unique index's condition (side_effect_key_unique),
        # so SQLite, which proves a partial index usable only from identical terms, probes
        # that index rather than every record of the thread.
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE thread_id = %s AND {column} = %s "
        f"AND NOT ({column} = ''))",
        guarded,
    )
