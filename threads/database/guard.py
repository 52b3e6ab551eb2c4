"""The database refuses to update or delete events (docs/event-log.md, "Event log").

PostgreSQL: a trigger raises on UPDATE or DELETE of an event row (TRUNCATE, which only a
table owner's maintenance runs, is not a row change). SQLite: triggers call the per-connection
function `ctxadmin_log_sealed()`, which answers 1; a connection without it (the sqlite3 shell)
fails the trigger too, so the refusal holds there as well. Only test code opens the seal, to
flush test databases and to simulate tampering.

The one DELETE allowed is retention's, of one whole thread's events (docs/operations.md,
"Retention"), opened by `retention_delete_opened(thread_id)` inside the retention service's
transaction only: on PostgreSQL a transaction-local `ctxadmin.retention` setting naming the
thread, which the DELETE trigger checks row by row; on SQLite the per-connection function
`ctxadmin_retention_thread()`, which names the thread while it is open. A row of any other
thread is still refused, and an UPDATE never passes this way.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

_state = threading.local()


def _sealed() -> int:
    return 0 if getattr(_state, "open", False) else 1


def install_sqlite_function(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(
            "ctxadmin_log_sealed", 0, _sealed, deterministic=False
        )


def _retention_thread() -> str | None:
    return getattr(_state, "retention", None)


def install_sqlite_retention_function(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_function(
            "ctxadmin_retention_thread", 0, _retention_thread, deterministic=False
        )


@contextlib.contextmanager
def retention_delete_opened(connection: Any, thread_id: uuid.UUID) -> Iterator[None]:
    """Let `connection`, inside its open transaction, delete the events of this one thread."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('ctxadmin.retention', %s, true)", [str(thread_id)])
        # Not in a `finally`: after a failed statement the transaction is aborted, and the
        # setting, local to it, ends with its rollback.
        yield
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('ctxadmin.retention', '', true)")
        return
    # SQLite stores a UUID as 32 hex digits.
    _state.retention = thread_id.hex
    try:
        yield
    finally:
        _state.retention = None


@contextlib.contextmanager
def log_seal_opened() -> Iterator[None]:
    """For tests only: let this thread's SQLite connection change event rows."""
    _state.open = True
    try:
        yield
    finally:
        _state.open = False


POSTGRES_SQL = """
CREATE OR REPLACE FUNCTION ctxadmin_refuse_event_change() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'ctxadmin events are append-only: % refused on threads_event', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER threads_event_append_only
  BEFORE UPDATE OR DELETE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_change();
"""
POSTGRES_REVERSE = """
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
DROP FUNCTION IF EXISTS ctxadmin_refuse_event_change();
"""
SQLITE_SQL = [
    """CREATE TRIGGER threads_event_no_update BEFORE UPDATE ON threads_event
       WHEN ctxadmin_log_sealed() = 1
       BEGIN SELECT RAISE(ABORT, 'ctxadmin events are append-only: UPDATE refused'); END;""",
    """CREATE TRIGGER threads_event_no_delete BEFORE DELETE ON threads_event
       WHEN ctxadmin_log_sealed() = 1
       BEGIN SELECT RAISE(ABORT, 'ctxadmin events are append-only: DELETE refused'); END;""",
]
# Retention (threads migration 0028): DELETE gets a trigger and a function of its own, which
# let through only the rows of the thread `ctxadmin.retention` names; UPDATE keeps the trigger
# above. Only the DELETE side changes here.
POSTGRES_RETENTION_SQL = """
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
CREATE TRIGGER threads_event_append_only
  BEFORE UPDATE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_change();
CREATE OR REPLACE FUNCTION ctxadmin_refuse_event_delete() RETURNS trigger AS $$
BEGIN
  IF OLD.thread_id::text = current_setting('ctxadmin.retention', true) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'ctxadmin events are append-only: DELETE refused on threads_event'
    USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER threads_event_no_delete
  BEFORE DELETE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_delete();
"""
POSTGRES_RETENTION_REVERSE = """
DROP TRIGGER IF EXISTS threads_event_no_delete ON threads_event;
DROP FUNCTION IF EXISTS ctxadmin_refuse_event_delete();
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
CREATE TRIGGER threads_event_append_only
  BEFORE UPDATE OR DELETE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_change();
"""
# `IS NOT`: with no thread opened the function answers NULL, and the row is refused.
SQLITE_RETENTION_SQL = [
    "DROP TRIGGER IF EXISTS threads_event_no_delete;",
    """CREATE TRIGGER threads_event_no_delete BEFORE DELETE ON threads_event
       WHEN ctxadmin_log_sealed() = 1 AND old.thread_id IS NOT ctxadmin_retention_thread()
       BEGIN SELECT RAISE(ABORT, 'ctxadmin events are append-only: DELETE refused'); END;""",
]
SQLITE_RETENTION_REVERSE = [
    "DROP TRIGGER IF EXISTS threads_event_no_delete;",
    SQLITE_SQL[1],
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS threads_event_no_update;",
    "DROP TRIGGER IF EXISTS threads_event_no_delete;",
]
