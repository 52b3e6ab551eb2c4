"""The statements every LangGraph put and write runs, as prepared SQL on PostgreSQL.

Each put and each write of messages locks its thread, reads the message index and asks whether
its checkpoint is stored; the ORM compiled those querysets (select_for_update, select_related,
ordering) again on every request, and that compilation cost more CPU than the database's own
work (docs/benchmarks.md, "LangGraph storage"). Here they are built once per process and sent
through a psycopg cursor that binds and prepares on the server, as the event append's own
statements are (threads.services.events). SQLite (tests, in-process, no round trips) runs the
ORM's queries: the answers are the same.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from typing import Any, cast

from django.db import connections, router

from threads.models import LanggraphCheckpoint, LanggraphMessage, Thread, Workspace
from threads.services.event_rows import log_queries, server_cursor


def _postgres(model: Any) -> Any | None:
    connection = connections[router.db_for_write(model)]
    return connection if connection.vendor == "postgresql" else None


@functools.cache
def _columns(alias: str, model: Any) -> tuple[str, str, list[str]]:
    """The model's table and its concrete columns, quoted for `alias`, and the fields'
    attnames in the same order: built once per process."""
    quote = connections[alias].ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(f"t.{quote(cast(str, f.column))}" for f in fields)
    return quote(model._meta.db_table), columns, [f.attname for f in fields]


def _run(connection: Any, sql: str, params: Any) -> list[tuple[Any, ...]]:
    started = time.monotonic()
    with server_cursor(connection) as pg, pg.connection.pipeline():
        # In a pipeline: a transaction's BEGIN goes in the same round trip as the query.
        pg.execute(sql, params)
        rows = pg.fetchall()
    log_queries(connection, started, sql)
    return rows


def thread_locked(workspace: Workspace, external_id: str) -> Thread | None:
    """The workspace's thread with this external_id, its row locked (FOR UPDATE OF the thread
    only) in the caller's transaction; None when there is none. Its `workspace` is the one
    given (the row matched it), so nothing reads it again."""
    connection = _postgres(Thread)
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
        rows = _run(connection, sql, (workspace.pk, external_id))
        # psycopg gives every column its Python type (uuid, timestamptz...): no converter.
        found = Thread.from_db(connection.alias, names, rows[0]) if rows else None
    if found is not None:
        Thread.workspace.field.set_cached_value(found, workspace)
    return found


def message_index(thread: Thread, message_ids: Iterable[str]) -> list[LanggraphMessage]:
    """The mirrored messages of the thread with these LangChain ids (every version of each),
    in log order: threads.selectors.langgraph.lg_message_index as one prepared statement."""
    ids = sorted(set(message_ids))
    connection = _postgres(LanggraphMessage)
    if connection is None:
        return list(
            LanggraphMessage.objects.filter(thread=thread, message_id__in=ids).order_by("seq")
        )
    if not ids:
        return []
    table, columns, names = _columns(connection.alias, LanggraphMessage)
    sql = (
        f"SELECT {columns} FROM {table} t WHERE t.thread_id = %s "
        "AND t.message_id = ANY(%s::text[]) ORDER BY t.seq"
    )
    found = []
    for row in _run(connection, sql, (thread.pk, ids)):
        message = LanggraphMessage.from_db(connection.alias, names, row)
        LanggraphMessage.thread.field.set_cached_value(message, thread)
        found.append(message)
    return found


def checkpoint_stored(thread: Thread, checkpoint_ns: str, checkpoint_id: str) -> int | None:
    """The key of the thread's LangGraph checkpoint (namespace, id), None when not stored."""
    connection = _postgres(LanggraphCheckpoint)
    if connection is None:
        return (
            LanggraphCheckpoint.objects.filter(
                thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
            )
            .values_list("pk", flat=True)
            .first()
        )
    table, _, _ = _columns(connection.alias, LanggraphCheckpoint)
    sql = (
        f"SELECT t.id FROM {table} t WHERE t.thread_id = %s AND t.checkpoint_ns = %s "
        "AND t.checkpoint_id = %s"
    )
    rows = _run(connection, sql, (thread.pk, checkpoint_ns, checkpoint_id))
    return cast(int, rows[0][0]) if rows else None


def checkpoint_cursor_and_after(
    thread: Thread, checkpoint_ns: str, checkpoint_id: str, limit: int = 100
) -> tuple[int | None, list[tuple[str, str]]]:
    """The cursor of the LangGraph checkpoint (None when not stored) and the (message_id,
    digest) of the mirrored messages that end after it, in log order (at most `limit`): what a
    write of messages checks its order against, in one statement."""
    connection = _postgres(LanggraphCheckpoint)
    if connection is None:
        from threads.selectors.langgraph import lg_checkpoint_cursor, lg_messages_after

        stored = lg_checkpoint_cursor(
            thread=thread, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        if stored is None:
            return None, []
        return stored, [(m.message_id, m.digest) for m in lg_messages_after(thread, stored, limit)]
    checkpoints, _, _ = _columns(connection.alias, LanggraphCheckpoint)
    messages, _, _ = _columns(connection.alias, LanggraphMessage)
    # The checkpoint's row comes first (seq NULL), then the messages after its cursor.
    sql = (
        f"WITH c AS (SELECT t.cursor FROM {checkpoints} t WHERE t.thread_id = %s "
        "AND t.checkpoint_ns = %s AND t.checkpoint_id = %s) "
        "SELECT NULL::bigint, c.cursor, NULL::text, NULL::text FROM c UNION ALL "
        f"(SELECT m.seq, NULL, m.message_id, m.digest FROM {messages} m, c "
        "WHERE m.thread_id = %s AND m.last_seq > c.cursor ORDER BY m.seq LIMIT %s)"
    )
    rows = _run(connection, sql, (thread.pk, checkpoint_ns, checkpoint_id, thread.pk, limit))
    end: int | None = None
    after: list[tuple[int, str, str]] = []
    for seq, cursor, message_id, digest in rows:
        if seq is None:
            end = cursor
        else:
            after.append((seq, message_id, digest))
    return end, [(message_id, digest) for _, message_id, digest in sorted(after)]


def messages_count_between(thread: Thread, after: int, until: int) -> int:
    """How many mirrored messages end after `after` and at or before `until`:
    threads.selectors.langgraph.lg_messages_count_between as one prepared statement."""
    connection = _postgres(LanggraphMessage)
    if connection is None:
        return LanggraphMessage.objects.filter(
            thread=thread, last_seq__gt=after, last_seq__lte=until
        ).count()
    table, _, _ = _columns(connection.alias, LanggraphMessage)
    sql = (
        f"SELECT COUNT(*) FROM {table} t WHERE t.thread_id = %s AND t.last_seq > %s "
        "AND t.last_seq <= %s"
    )
    return cast(int, _run(connection, sql, (thread.pk, after, until))[0][0])


def messages_index_insert(thread: Thread, rows: Sequence[LanggraphMessage]) -> None:
    """Insert the index rows of newly mirrored messages, in one prepared statement (the
    columns as arrays, unnested)."""
    if not rows:
        return
    connection = _postgres(LanggraphMessage)
    if connection is None:
        LanggraphMessage.objects.bulk_create(list(rows))
        return
    table, _, _ = _columns(connection.alias, LanggraphMessage)
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
    started = time.monotonic()
    with server_cursor(connection) as pg:
        pg.execute(sql, params)
    log_queries(connection, started, sql)
