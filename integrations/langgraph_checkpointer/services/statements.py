"""The statements every LangGraph put and write runs, as prepared SQL on PostgreSQL.

Each put and each write of messages locks its thread, reads the message index and the rows it
extends (the base version, the parent's checkpoint, the checkpoint a write follows); the ORM
compiled those querysets (select_for_update, select_related, ordering) again on every request,
and that compilation cost more CPU than the database's own work (docs/benchmarks.md,
"LangGraph storage — `bench/storage.py`"). Here they are built once per process and sent through a
psycopg cursor that binds and prepares on the server, as the event append's own statements are
(threads.services.events); reads one request makes together are one statement (a UNION ALL of
tagged parts), one round trip. SQLite (tests, in-process, no round trips) runs the ORM's
queries: the answers are the same.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from django.db import connections
from django.db.models import Exists, Field

from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphMessage,
    LanggraphWrite,
)
from integrations.langgraph_checkpointer.selectors.checkpoints import (
    langgraph_checkpoint_cursor,
    langgraph_thread_get,
)
from integrations.langgraph_checkpointer.selectors.messages import (
    langgraph_message_index,
    langgraph_messages_after,
    langgraph_messages_count_between,
)
from threads.models import Checkpoint, Thread, Workspace
from threads.selectors.statements import equal_or_any, postgres_for, rows_run, table_name
from threads.services.event_rows import row_params

# How many of the mirrored messages after a write's checkpoint its order check reads.
MESSAGES_AFTER_CURSOR = 100


def _index_row(
    connection: Any,
    names: list[str],
    thread: Thread,
    pk: int,
    message_id: str,
    digest: str,
    seq: int,
    last_seq: int,
) -> LanggraphMessage:
    """A message index row read as parts of a tagged statement, with its thread."""
    # The model's fields in their order: id, thread, message_id, digest, seq, last_seq.
    values = (pk, thread.pk, message_id, digest, seq, last_seq)
    message = LanggraphMessage.from_db(connection.alias, names, values)
    LanggraphMessage.thread.field.set_cached_value(message, thread)
    return message


@functools.cache
def _columns(alias: str, model: Any) -> tuple[str, str, list[str]]:
    """The model's table and its concrete columns, quoted for `alias`, and the fields'
    attnames in the same order: built once per process."""
    quote = connections[alias].ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(f"t.{quote(cast(str, f.column))}" for f in fields)
    return table_name(alias, model), columns, [f.attname for f in fields]


def thread_locked(workspace: Workspace, external_id: str) -> Thread | None:
    """The workspace's thread with this external_id, its row locked (FOR UPDATE OF the thread
    only) in the caller's transaction; None when there is none. Its `workspace` is the one
    given (the row matched it), so nothing reads it again."""
    connection = postgres_for(Thread, write=True)
    if connection is None:
        found = (
            Thread.objects.select_for_update(of=("self",))
            .filter(workspace=workspace, external_id=external_id)
            .first()
        )
    else:
        table, columns, names = _columns(connection.alias, Thread)
        sql = (
            f"SELECT {columns} FROM {table} t WHERE t.workspace_id = %s AND t.external_id = %s "
            "FOR UPDATE OF t"
        )
        rows = rows_run(connection, sql, (workspace.pk, external_id))
        # psycopg gives every column its Python type (uuid, timestamptz...): no converter.
        found = Thread.from_db(connection.alias, names, rows[0]) if rows else None
    if found is not None:
        Thread.workspace.field.set_cached_value(found, workspace)
    return found


def message_index(thread: Thread, message_ids: Iterable[str]) -> list[LanggraphMessage]:
    """The mirrored messages of the thread with these LangChain ids (every version of each),
    in log order: integrations.langgraph_checkpointer.selectors.messages.langgraph_message_index
    as one prepared statement."""
    ids = sorted(set(message_ids))
    connection = postgres_for(LanggraphMessage, write=True)
    if connection is None:
        return langgraph_message_index(thread, ids)
    if not ids:
        return []
    table, columns, names = _columns(connection.alias, LanggraphMessage)
    sql = (
        f"SELECT {columns} FROM {table} t WHERE t.thread_id = %s "
        "AND t.message_id = ANY(%s::text[]) ORDER BY t.seq"
    )
    found = []
    for row in rows_run(connection, sql, (thread.pk, ids)):
        message = LanggraphMessage.from_db(connection.alias, names, row)
        LanggraphMessage.thread.field.set_cached_value(message, thread)
        found.append(message)
    return found


def message_index_and_cursor(
    thread: Thread, message_ids: Iterable[str], checkpoint_ns: str, checkpoint_id: str
) -> tuple[list[LanggraphMessage], int | None, list[tuple[str, str]]]:
    """What a write of messages reads to check its order, in one prepared statement:
    message_index of its messages' ids, the cursor of the LangGraph checkpoint it follows (None
    when not stored), and the (message_id, digest) of the mirrored messages that end after that
    cursor, in log order (at most MESSAGES_AFTER_CURSOR)."""
    connection = postgres_for(LanggraphMessage, write=True)
    if connection is None:
        stored = langgraph_checkpoint_cursor(
            thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        later = (
            []
            if stored is None
            else [
                (m.message_id, m.digest)
                for m in langgraph_messages_after(thread, stored, MESSAGES_AFTER_CURSOR)
            ]
        )
        return message_index(thread, message_ids), stored, later
    checkpoints = table_name(connection.alias, LanggraphCheckpoint)
    messages, _, names = _columns(connection.alias, LanggraphMessage)
    # Part 0: the checkpoint's cursor; part 1: the messages after it; part 2: the index rows
    # of the ids (key, seq, last_seq, message_id, digest). NULL pads what a part lacks.
    # The ids by equal_or_any and the limit written in: with either as a parameter the server
    # planned the statement again on every write.
    ids, id_params = equal_or_any(sorted(set(message_ids)), "text")
    sql = (
        f"WITH c AS (SELECT t.cursor FROM {checkpoints} t WHERE t.thread_id = %s "
        "AND t.checkpoint_ns = %s AND t.checkpoint_id = %s) "
        "SELECT 0, NULL::bigint, c.cursor, NULL::bigint, NULL::text, NULL::text FROM c "
        "UNION ALL (SELECT 1, NULL, m.seq, NULL, m.message_id, m.digest "
        f"FROM {messages} m, c WHERE m.thread_id = %s AND m.last_seq > c.cursor "
        f"ORDER BY m.seq LIMIT {MESSAGES_AFTER_CURSOR}) UNION ALL "
        "SELECT 2, m.id, m.seq, m.last_seq, m.message_id, m.digest "
        f"FROM {messages} m WHERE m.thread_id = %s AND m.message_id {ids}"
    )
    params = (thread.pk, checkpoint_ns, checkpoint_id, thread.pk, thread.pk, *id_params)
    end: int | None = None
    after: list[tuple[int, str, str]] = []
    found = []
    for part, pk, seq, last_seq, message_id, digest in rows_run(connection, sql, params):
        if part == 0:
            end = seq
        elif part == 1:
            after.append((seq, message_id, digest))
        else:
            found.append(
                _index_row(connection, names, thread, pk, message_id, digest, seq, last_seq)
            )
    found.sort(key=lambda m: m.seq)
    return found, end, [(message_id, digest) for _, message_id, digest in sorted(after)]


def messages_count_between(thread: Thread, after: int, until: int) -> int:
    """How many mirrored messages end after `after` and at or before `until`:
    integrations.langgraph_checkpointer.selectors.messages.langgraph_messages_count_between as
    one prepared statement."""
    connection = postgres_for(LanggraphMessage, write=True)
    if connection is None:
        return langgraph_messages_count_between(thread, after, until)
    table = table_name(connection.alias, LanggraphMessage)
    sql = (
        f"SELECT COUNT(*) FROM {table} t WHERE t.thread_id = %s AND t.last_seq > %s "
        "AND t.last_seq <= %s"
    )
    return cast(int, rows_run(connection, sql, (thread.pk, after, until))[0][0])


def messages_index_insert(thread: Thread, rows: Sequence[LanggraphMessage]) -> None:
    """Insert the index rows of newly mirrored messages, in one prepared statement (the
    columns as arrays, unnested)."""
    if not rows:
        return
    connection = postgres_for(LanggraphMessage, write=True)
    if connection is None:
        LanggraphMessage.objects.bulk_create(list(rows))
        return
    table = table_name(connection.alias, LanggraphMessage)
    sql = (
        f"INSERT INTO {table} (thread_id, message_id, digest, seq, last_seq) "
        "SELECT %s, * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::bigint[])"
    )
    params = (
        thread.pk,
        [row.message_id for row in rows],
        [row.digest for row in rows],
        [row.seq for row in rows],
        [row.last_seq for row in rows],
    )
    rows_run(connection, sql, params, fetch=False)


# What a put reads of its base version: how it refers to its messages.
_REFERENCE_FIELDS = ("id", "messages_until_seq", "message_seqs", "message_count", "cursor")


def _reference_fields() -> list[Field]:
    return [
        cast(Field, LanggraphChannelVersion._meta.get_field(name)) for name in _REFERENCE_FIELDS
    ]


def _reference_from_row(
    connection: Any, thread: Thread, row: Sequence[Any]
) -> LanggraphChannelVersion:
    """A version with only its reference loaded, from the values of _REFERENCE_FIELDS (JSON
    columns as text, decoded by the field as Django's own read would)."""
    fields = _reference_fields()
    values = [
        f.from_db_value(value, None, connection) if hasattr(f, "from_db_value") else value
        for f, value in zip(fields, row, strict=True)
    ]
    found = LanggraphChannelVersion.from_db(connection.alias, [f.attname for f in fields], values)
    LanggraphChannelVersion.thread.field.set_cached_value(found, thread)
    return found


def message_index_and_base(
    thread: Thread, message_ids: Iterable[str], checkpoint_ns: str, channel: str, version: str
) -> tuple[list[LanggraphMessage], LanggraphChannelVersion | None, int | None]:
    """What a put that extends a base version reads first, in one prepared statement: the
    mirrored messages with these ids (message_index, in log order), the stored version
    (checkpoint_ns, channel, version) with only its reference to its messages loaded (the
    other fields deferred), None when not stored, and how many mirrored messages end after
    the seq it refers up to (None when it refers by explicit seqs, or on SQLite, which counts
    with messages_count_between)."""
    connection = postgres_for(LanggraphMessage, write=True)
    if connection is None:
        base = (
            LanggraphChannelVersion.objects.filter(
                thread=thread, checkpoint_ns=checkpoint_ns, channel=channel, version=version
            )
            .only(*_REFERENCE_FIELDS)
            .first()
        )
        return message_index(thread, message_ids), base, None
    messages, _, names = _columns(connection.alias, LanggraphMessage)
    versions = table_name(connection.alias, LanggraphChannelVersion)
    # The version's row (part 0: its reference, _REFERENCE_FIELDS), the index rows (part 1:
    # key, seq, last_seq, message_id, digest) and the count of the messages ending after the
    # version's seq (part 2), NULL padding what a part does not have.
    sql = (
        "WITH v AS (SELECT t.id, t.messages_until_seq, t.message_seqs, t.message_count, t.cursor "
        f"FROM {versions} t WHERE t.thread_id = %s AND t.checkpoint_ns = %s AND t.channel = %s "
        "AND t.version = %s) "
        "SELECT 0, v.id, v.messages_until_seq, v.message_seqs::text, v.message_count::bigint, "
        "v.cursor, NULL::text, NULL::text FROM v UNION ALL "
        "SELECT 1, m.id, m.seq, NULL::text, m.last_seq, NULL::bigint, m.message_id, m.digest "
        f"FROM {messages} m WHERE m.thread_id = %s AND m.message_id = ANY(%s::text[]) "
        "UNION ALL SELECT 2, COUNT(*), NULL, NULL, NULL, NULL, NULL, NULL "
        f"FROM {messages} m, v WHERE m.thread_id = %s AND m.last_seq > v.messages_until_seq"
    )
    params = (thread.pk, checkpoint_ns, channel, version, thread.pk, sorted(set(message_ids)))
    rows = rows_run(connection, sql, (*params, thread.pk))
    base = None
    after_until = None
    found = []
    for part, pk, seq_or_until, seqs, last_or_count, cursor, message_id, digest in rows:
        if part == 0:
            reference = (pk, seq_or_until, seqs, last_or_count, cursor)
            base = _reference_from_row(connection, thread, reference)
        elif part == 2:
            after_until = int(pk)
        else:
            found.append(
                _index_row(
                    connection, names, thread, pk, message_id, digest, seq_or_until, last_or_count
                )
            )
    found.sort(key=lambda m: m.seq)
    if base is None or base.messages_until_seq is None:
        after_until = None
    return found, base, after_until


def thread_found(workspace: Workspace, external_id: str) -> Thread | None:
    """The workspace's thread with this external_id, not locked (a write of bytes alone
    numbers nothing), None when there is none."""
    connection = postgres_for(Thread, write=True)
    if connection is None:
        found = langgraph_thread_get(workspace=workspace, external_id=external_id)
    else:
        table, columns, names = _columns(connection.alias, Thread)
        sql = f"SELECT {columns} FROM {table} t WHERE t.workspace_id = %s AND t.external_id = %s"
        rows = rows_run(connection, sql, (workspace.pk, external_id))
        found = Thread.from_db(connection.alias, names, rows[0]) if rows else None
    if found is not None:
        Thread.workspace.field.set_cached_value(found, workspace)
    return found


def checkpoints_insert(checkpoint: Checkpoint, row: LanggraphCheckpoint) -> None:
    """Insert a ctxadmin Checkpoint and the LangGraph checkpoint that points at it in one
    prepared statement (the second row takes the first's new key in SQL), instead of two ORM
    inserts compiled on every put. Both get their keys; the columns are the models' own, so
    the statement follows their fields."""
    connection = postgres_for(LanggraphCheckpoint, write=True)
    if connection is None:
        checkpoint.save(force_insert=True)
        row.ctxadmin_checkpoint = checkpoint
        row.save(force_insert=True)
        return
    checkpoints = table_name(connection.alias, Checkpoint)
    rows = table_name(connection.alias, LanggraphCheckpoint)
    first_columns, [first] = row_params([checkpoint], connection)
    link = cast(Field, LanggraphCheckpoint._meta.get_field("ctxadmin_checkpoint"))
    fields = [f for f in LanggraphCheckpoint._meta.concrete_fields if not f.primary_key]
    second_columns, [second] = row_params([row], connection)
    values = ", ".join("c.id" if f is link else "%s" for f in fields)
    params = [*first, *(value for f, value in zip(fields, second, strict=True) if f is not link)]
    sql = (
        f"WITH c AS (INSERT INTO {checkpoints} ({first_columns}) VALUES "
        f"({', '.join(['%s'] * len(first))}) RETURNING id) "
        f"INSERT INTO {rows} ({second_columns}) SELECT {values} FROM c RETURNING id, "
        f"{connection.ops.quote_name(link.column)}"
    )
    [(row_pk, checkpoint_pk)] = rows_run(connection, sql, params)
    checkpoint.pk = checkpoint_pk
    checkpoint._state.db = row._state.db = connection.alias
    row.pk = row_pk
    row.ctxadmin_checkpoint = checkpoint


def rows_insert_new(objs: Sequence[Any]) -> None:
    """bulk_create(objs, ignore_conflicts=True) of one model, as one prepared statement on
    PostgreSQL (a row that is there already stays as it is, and keeps no key here)."""
    if not objs:
        return
    model: Any = type(objs[0])
    connection = postgres_for(model, write=True)
    if connection is None:
        model.objects.bulk_create(list(objs), ignore_conflicts=True)
        return
    table = table_name(connection.alias, model)
    columns, rows = row_params(objs, connection)
    one = f"({', '.join(['%s'] * len(rows[0]))})"
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(rows))} "
        "ON CONFLICT DO NOTHING"
    )
    rows_run(connection, sql, [value for row in rows for value in row], fetch=False)


def checkpoint_writes_locked(
    thread: Thread, checkpoint_ns: str, checkpoint_id: str, task_id: str
) -> tuple[int, bytes, bool] | None:
    """The LangGraph checkpoint's key and packed writes, its row locked (FOR UPDATE) in the
    caller's transaction, and whether the task has a writes row of its own (writes that came
    before the checkpoint): what a write merges into, in one statement. None when the
    checkpoint is not stored."""
    connection = postgres_for(LanggraphCheckpoint, write=True)
    if connection is None:
        found = (
            LanggraphCheckpoint.objects.select_for_update()
            .filter(thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id)
            .annotate(
                task_row=Exists(
                    LanggraphWrite.objects.filter(
                        thread=thread,
                        checkpoint_ns=checkpoint_ns,
                        checkpoint_id=checkpoint_id,
                        task_id=task_id,
                    )
                )
            )
            .values_list("pk", "writes_z", "task_row")
            .first()
        )
        if found is None:
            return None
        return int(found[0]), bytes(found[1] or b""), bool(found[2])
    checkpoints = table_name(connection.alias, LanggraphCheckpoint)
    writes = table_name(connection.alias, LanggraphWrite)
    sql = (
        f"SELECT t.id, t.writes_z, EXISTS (SELECT 1 FROM {writes} w "
        "WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns "
        "AND w.checkpoint_id = t.checkpoint_id "
        f"AND w.task_id = %s) FROM {checkpoints} t WHERE t.thread_id = %s "
        "AND t.checkpoint_ns = %s AND t.checkpoint_id = %s FOR UPDATE OF t"
    )
    rows = rows_run(connection, sql, (task_id, thread.pk, checkpoint_ns, checkpoint_id))
    if not rows:
        return None
    pk, packed, task_row = rows[0]
    return int(pk), bytes(packed or b""), bool(task_row)


def checkpoint_writes_update(pk: int, packed: bytes) -> None:
    """Store the LangGraph checkpoint's packed writes (its row locked by the caller)."""
    connection = postgres_for(LanggraphCheckpoint, write=True)
    if connection is None:
        LanggraphCheckpoint.objects.filter(pk=pk).update(writes_z=packed)
        return
    table = table_name(connection.alias, LanggraphCheckpoint)
    rows_run(
        connection, f"UPDATE {table} SET writes_z = %s WHERE id = %s", (packed, pk), fetch=False
    )


def checkpoints_carrying(
    thread: Thread, checkpoint_ns: str, checkpoint_ids: Sequence[str], waiting_for: str
) -> tuple[list[LanggraphCheckpoint], list[tuple[int, list[dict[str, Any]]]]]:
    """The namespace's LangGraph checkpoints with these ids, with only what a put reads to
    carry small values forward (their checkpoint JSON and their small values; the rest
    deferred), and the (key, interrupts) of the task writes rows after checkpoint
    `waiting_for` that hold interrupts waiting for its put, in arrival order: one prepared
    statement."""
    connection = postgres_for(LanggraphCheckpoint, write=True)
    if connection is None:
        rows = list(
            LanggraphCheckpoint.objects.filter(
                thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id__in=checkpoint_ids
            ).only("checkpoint_id", "checkpoint_z", "values_z")
        )
        waiting = (
            LanggraphWrite.objects.filter(
                thread=thread,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=waiting_for,
                interrupts__isnull=False,
            )
            .order_by("pk")
            .values_list("pk", "interrupts")
        )
        return rows, [(int(pk), list(interrupts or [])) for pk, interrupts in waiting]
    table = table_name(connection.alias, LanggraphCheckpoint)
    writes = table_name(connection.alias, LanggraphWrite)
    names = ["id", "checkpoint_id", "checkpoint_z", "values_z"]  # the model's field order
    # Part 0: the checkpoints; part 1: the writes rows with waiting interrupts (JSON as text).
    ids, id_params = equal_or_any(list(checkpoint_ids), "text")
    sql = (
        "SELECT 0, t.id, t.checkpoint_id, t.checkpoint_z, t.values_z, NULL::text "
        f"FROM {table} t WHERE t.thread_id = %s AND t.checkpoint_ns = %s "
        f"AND t.checkpoint_id {ids} UNION ALL "
        "SELECT 1, w.id, NULL, NULL, NULL, w.interrupts::text "
        f"FROM {writes} w WHERE w.thread_id = %s AND w.checkpoint_ns = %s "
        "AND w.checkpoint_id = %s AND w.interrupts IS NOT NULL"
    )
    params = (thread.pk, checkpoint_ns, *id_params, thread.pk, checkpoint_ns, waiting_for)
    found: list[LanggraphCheckpoint] = []
    waiting_rows: list[tuple[int, list[dict[str, Any]]]] = []
    for part, pk, checkpoint_id, checkpoint_z, values_z, interrupts in rows_run(
        connection, sql, params
    ):
        if part == 0:
            values = (pk, checkpoint_id, checkpoint_z, values_z)
            found.append(LanggraphCheckpoint.from_db(connection.alias, names, values))
        else:
            waiting_rows.append((int(pk), json.loads(interrupts)))
    return found, sorted(waiting_rows, key=lambda row: row[0])
