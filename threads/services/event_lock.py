"""The thread row an append locks (threads.services.events): found by UUID or external_id and
locked in one statement, with the count of the events that already carry one of the batch's
client_event_ids, so that new events cost no query of their own.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Sequence
from typing import Any, cast

from django.db import connections, router
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from threads.domain.errors import NotFound
from threads.domain.events import NewEvent
from threads.models import Event, Thread, Workspace
from threads.selectors.statements import (
    IN_LIST_MAX,
    equal_or_any,
    log_queries,
    server_cursor,
)


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
    thread_table, event_table, columns, names = _lock_sql_parts(connection.alias)
    client_ids = sorted({e.client_event_id for e in new_events if e.client_event_id is not None})
    postgres = connection.vendor == "postgresql"
    fields = Thread._meta.concrete_fields
    params: list[Any] = []
    if client_ids:
        if postgres and len(client_ids) > IN_LIST_MAX:
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
            # A few ids spelled out: on PostgreSQL by equal_or_any, so that the server keeps
            # one plan of the prepared lock (a single event's one id as an array made it plan
            # the lock again on every append).
            ids, id_params = (
                equal_or_any(client_ids, "text")
                if postgres
                else (f"IN ({', '.join(['%s'] * len(client_ids))})", client_ids)
            )
            replays = (
                f"SELECT COUNT(*) FROM {event_table} e WHERE e.thread_id = t.id AND "
                f"e.client_event_id {ids}"
            )
            params += id_params
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
        with server_cursor(connection) as pg, pg.connection.pipeline():
            pg.execute(sql, params)
            rows = pg.fetchall()
        log_queries(connection, time.monotonic(), sql)
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


@functools.cache
def _lock_sql_parts(alias: str) -> tuple[str, str, str, list[str]]:
    """The thread and event tables, the thread's column list and its fields' attnames, quoted
    for the connection `alias`: built once per process, not on every append (quoting 30
    columns cost a tenth of a one-event append's CPU)."""
    quote = connections[alias].ops.quote_name
    fields = Thread._meta.concrete_fields
    columns = ", ".join(f"t.{quote(cast(str, f.column))}" for f in fields)
    return (
        quote(Thread._meta.db_table),
        quote(Event._meta.db_table),
        columns,
        [f.attname for f in fields],
    )
