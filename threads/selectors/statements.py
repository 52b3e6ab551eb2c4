"""Statements sent on PostgreSQL through a psycopg cursor that binds and prepares on the server.

Django's own cursors quote every value into the SQL text in Python, and its querysets are
compiled again on every request; on the hot paths (the event append, a checkpointer's put and
restore) both cost more CPU than the database's own work (docs/benchmarks.md,
"LangGraph storage — `bench/storage.py`"). Those paths build their SQL once per process and send it
here; SQLite (tests, in-process, no round trips) keeps the ORM.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import connections, router
from django.db.models import JSONField
from psycopg import pq


def postgres_for(model: Any, *, write: bool = False) -> Any | None:
    """The connection that reads `model` (that writes it, with `write`), when it is
    PostgreSQL; else None."""
    alias = router.db_for_write(model) if write else router.db_for_read(model)
    connection = connections[alias]
    return connection if connection.vendor == "postgresql" else None


def table_name(alias: str, model: Any) -> str:
    """The model's table, quoted for the connection `alias`."""
    return str(connections[alias].ops.quote_name(model._meta.db_table))


@contextmanager
def server_cursor(connection: Any) -> Iterator[psycopg.Cursor[Any]]:
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


# The longest list equal_or_any spells out, one parameter a value.
IN_LIST_MAX = 8


def equal_or_any(values: Sequence[Any], sql_type: str) -> tuple[str, list[Any]]:
    """The right-hand side of a prepared statement's condition on `values`, and the parameters
    it takes: `= %s` for one value, `IN (%s, …)` for up to IN_LIST_MAX, else (none, or more)
    `= ANY(%s::sql_type[])` with the list as one parameter. A short list as an array makes the
    server's custom plan look cheaper than its generic plan's ten-element guess, so it plans the
    statement again on every run, often for longer than the statement runs
    (`bench/ingest.py --statements`); spelled out, each count of values is a statement of its
    own that the server plans once."""
    if 0 < len(values) <= IN_LIST_MAX:
        if len(values) == 1:
            return "= %s", [values[0]]
        return f"IN ({', '.join(['%s'] * len(values))})", list(values)
    return f"= ANY(%s::{sql_type}[])", [list(values)]


def log_queries(connection: Any, started: float, *sqls: str) -> None:
    """Log statements run on the raw connection as Django's debug cursor would, so that query
    counts in tests stay truthful."""
    if connection.queries_logged:
        duration = f"{time.monotonic() - started:.3f}"
        for sql in sqls:
            connection.queries_log.append({"sql": sql, "time": duration})


def rows_read(connection: Any, sql: str, params: Any) -> list[tuple[Any, ...]]:
    """The rows of one statement, prepared."""
    started = time.monotonic()
    with server_cursor(connection) as pg:
        pg.execute(sql, params)
        rows = pg.fetchall()
    log_queries(connection, started, sql)
    return rows


def rows_run(
    connection: Any, sql: str, params: Any, *, fetch: bool = True
) -> list[tuple[Any, ...]]:
    """One statement of a write's transaction, prepared, and its rows (none unless `fetch`):
    the transaction's first statement goes in a pipeline with its BEGIN, one round trip."""
    started = time.monotonic()
    with server_cursor(connection) as pg:
        if pg.connection.info.transaction_status == pq.TransactionStatus.IDLE:
            with pg.connection.pipeline():
                pg.execute(sql, params)
                rows = pg.fetchall() if fetch else []
        else:
            # Later ones alone: leaving a pipeline costs a round trip of its own (its Sync).
            pg.execute(sql, params)
            rows = pg.fetchall() if fetch else []
    log_queries(connection, started, sql)
    return rows


@functools.cache
def select_list(alias: str, model: Any, prefix: str) -> str:
    """The model's concrete columns (prefixed by a table alias) as a SELECT list, its JSON
    columns as their text, in the order `model_from_row` reads them: built once per process."""
    quote = connections[alias].ops.quote_name
    return ", ".join(
        f"{prefix}.{quote(cast(str, f.column))}::text"
        if isinstance(f, JSONField)
        else f"{prefix}.{quote(cast(str, f.column))}"
        for f in model._meta.concrete_fields
    )


def model_from_row(connection: Any, model: Any, values: Sequence[Any]) -> Any:
    """An instance from the columns of `select_list`, its JSON fields decoded by the field as
    Django's own read would (psycopg gives the other columns their Python types)."""
    fields = model._meta.concrete_fields
    return model.from_db(
        connection.alias,
        [f.attname for f in fields],
        [
            f.from_db_value(value, cast(Any, None), connection)
            if isinstance(f, JSONField)
            else value
            for f, value in zip(fields, values, strict=True)
        ],
    )
