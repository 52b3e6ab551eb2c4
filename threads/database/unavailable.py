"""A database that refuses writes for a while (docs/api.md, "Codes" `database_unavailable`).

Two faults look alike to a caller and to a worker: SQLite whose write lock another process
holds past the busy timeout (`database is locked`, an OperationalError), and PostgreSQL that is
read-only (`default_transaction_read_only`, a hot standby, SQLSTATE 25006) or unreachable. Both
pass: the same request or task succeeds once the database takes writes again. The API answers
503 with `Retry-After`, dashboard pages a 503 page, and tasks retry later
(threads.middleware, threads.api.errors, threads.tasks); nothing is half-written because every
write is one transaction that the error rolls back.
"""

from __future__ import annotations

from django.db import DatabaseError, InternalError, OperationalError, connection

# The Retry-After of a 503 database_unavailable, and a task's first retry delay (seconds).
RETRY_AFTER = 5
READ_ONLY_SQLSTATE = "25006"  # read_only_sql_transaction


def _sqlstate(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    return str(getattr(cause, "sqlstate", "") or getattr(cause, "pgcode", "") or "")


def database_unavailable(exc: BaseException) -> bool:
    """The database could not take this write now, and will again: locked, read-only or gone.
    On SQLite only a lock counts (`no such table` is an OperationalError too, and a bug)."""
    if isinstance(exc, OperationalError):
        return connection.vendor != "sqlite" or "locked" in str(exc)
    return isinstance(exc, InternalError | DatabaseError) and (_sqlstate(exc) == READ_ONLY_SQLSTATE)


def database_unavailable_reset(exc: BaseException) -> None:
    """Drop the connection after a read-only refusal: a PostgreSQL session keeps the
    `default_transaction_read_only` it started with, so only a new one sees the database
    take writes again. Django reconnects on the next query."""
    if _sqlstate(exc) == READ_ONLY_SQLSTATE or isinstance(exc, OperationalError):
        connection.close()
