"""Statements sent on PostgreSQL through a psycopg cursor that binds and prepares on the server.

Django's own cursors quote every value into the SQL text in Python, and its querysets are
compiled again on every request; on the hot paths (the event append, the LangGraph put and
restore) both cost more CPU than the database's own work (docs/benchmarks.md, "LangGraph
storage"). Those paths build their SQL once per process and send it here; SQLite (tests,
in-process, no round trips) keeps the ORM.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import connections, router


def postgres_for(model: Any) -> Any | None:
    """The connection that reads `model`, when it is PostgreSQL; else None."""
    connection = connections[router.db_for_read(model)]
    return connection if connection.vendor == "postgresql" else None


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


def log_queries(connection: Any, started: float, *sqls: str) -> None:
    """Log statements run on the raw connection as Django's debug cursor would, so that query
    counts in tests stay truthful."""
    if connection.queries_logged:
        duration = f"{time.monotonic() - started:.3f}"
        for sql in sqls:
            connection.queries_log.append({"sql": sql, "time": duration})


def rows_read(connection: Any, sql: str, params: Any) -> list[tuple[Any, ...]]:
    """The rows of one read statement, prepared."""
    started = time.monotonic()
    with server_cursor(connection) as pg:
        pg.execute(sql, params)
        rows = pg.fetchall()
    log_queries(connection, started, sql)
    return rows
