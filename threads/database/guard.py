"""The database refuses to update or delete events (docs/event-log.md, "Event log").

PostgreSQL: a trigger raises on UPDATE or DELETE of an event row (TRUNCATE, which only a
table owner's maintenance runs, is not a row change). SQLite: triggers call the per-connection
function `ctxadmin_log_sealed()`, which answers 1; a connection without it (the sqlite3 shell)
fails the trigger too, so the refusal holds there as well. Only test code opens the seal, to
flush test databases and to simulate tampering.

The one UPDATE allowed is a redaction's (docs/event-log.md, "Redaction"), and only as the
redaction service opens it for one event, `<thread id>:<seq>`: PostgreSQL reads the
transaction-local setting `ctxadmin.redacting` (SET LOCAL), SQLite the per-connection function
`ctxadmin_redacting()`. The new row must keep seq, kind, created_at, client_event_id, role,
tool_call_id, request digest, hash and content digest, lose its salt (and its secret flags),
hold `{}` as metadata and a `redacted` marker in its data, which the old row had not: a second
redaction, or any other change, is refused. Migration 0027_redaction installs it.

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
        install_sqlite_redaction_function(connection.connection)


def _redacting() -> str | None:
    return getattr(_state, "redacting", None)


def install_sqlite_redaction_function(connection: Any) -> None:
    connection.create_function("ctxadmin_redacting", 0, _redacting, deterministic=False)


@contextlib.contextmanager
def redaction_opened(connection: Any, thread_id: Any, seq: int) -> Iterator[None]:
    """For the redaction service only: let the one redacting UPDATE of event (thread, seq)
    through, inside the caller's transaction."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('ctxadmin.redacting', %s, true)", [f"{thread_id}:{seq}"]
            )
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('ctxadmin.redacting', '', true)")
        return
    _state.redacting = f"{getattr(thread_id, 'hex', thread_id)}:{seq}"
    try:
        yield
    finally:
        _state.redacting = None


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
# Retention (threads migration 0028, after 0027_redaction made the UPDATE side a trigger of its
# own and left `threads_event_append_only` for DELETE alone): DELETE gets a trigger and a
# function of its own, which let through only the rows of the thread `ctxadmin.retention`
# names. Only the DELETE side changes here.
POSTGRES_RETENTION_SQL = """
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
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
CREATE TRIGGER threads_event_append_only
  BEFORE DELETE ON threads_event
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

# --- 0027_redaction: the UPDATE side allows a redaction, the DELETE side is as before ---------

POSTGRES_REDACTION_SQL = """
CREATE OR REPLACE FUNCTION ctxadmin_check_event_update() RETURNS trigger AS $$
BEGIN
  IF coalesce(current_setting('ctxadmin.redacting', true), '')
       = NEW.thread_id::text || ':' || NEW.seq::text
     AND NEW.id = OLD.id AND NEW.thread_id = OLD.thread_id AND NEW.seq = OLD.seq
     AND NEW.kind = OLD.kind AND NEW.created_at = OLD.created_at
     AND NEW.client_event_id IS NOT DISTINCT FROM OLD.client_event_id
     AND NEW.role = OLD.role AND NEW.tool_call_id = OLD.tool_call_id
     AND NEW.request_digest = OLD.request_digest AND NEW.hash = OLD.hash
     AND NEW.content_digest IS NOT DISTINCT FROM OLD.content_digest
     AND NEW.content_salt IS NULL AND NEW.secrets IS NULL
     AND NEW.metadata = '{}'::jsonb AND NEW.data ? 'redacted' AND NOT (OLD.data ? 'redacted')
  THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'ctxadmin events are append-only: % refused on threads_event', TG_OP
    USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
CREATE TRIGGER threads_event_append_only
  BEFORE DELETE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_change();
CREATE TRIGGER threads_event_update_guard
  BEFORE UPDATE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_check_event_update();
"""
POSTGRES_REDACTION_REVERSE = """
DROP TRIGGER IF EXISTS threads_event_update_guard ON threads_event;
DROP FUNCTION IF EXISTS ctxadmin_check_event_update();
DROP TRIGGER IF EXISTS threads_event_append_only ON threads_event;
CREATE TRIGGER threads_event_append_only
  BEFORE UPDATE OR DELETE ON threads_event
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_refuse_event_change();
"""
SQLITE_REDACTION_SQL = [
    "DROP TRIGGER IF EXISTS threads_event_no_update;",
    """CREATE TRIGGER threads_event_no_update BEFORE UPDATE ON threads_event
       WHEN ctxadmin_log_sealed() = 1 AND NOT (
         coalesce(ctxadmin_redacting(), '') = NEW.thread_id || ':' || NEW.seq
         AND NEW.id IS OLD.id AND NEW.thread_id IS OLD.thread_id AND NEW.seq IS OLD.seq
         AND NEW.kind IS OLD.kind AND NEW.created_at IS OLD.created_at
         AND NEW.client_event_id IS OLD.client_event_id
         AND NEW.role IS OLD.role AND NEW.tool_call_id IS OLD.tool_call_id
         AND NEW.request_digest IS OLD.request_digest AND NEW.hash IS OLD.hash
         AND NEW.content_digest IS OLD.content_digest
         AND NEW.content_salt IS NULL AND NEW.secrets IS NULL
         AND json(NEW.metadata) = '{}'
         AND json_type(NEW.data, '$.redacted') = 'object'
         AND json_type(OLD.data, '$.redacted') IS NULL)
       BEGIN SELECT RAISE(ABORT, 'ctxadmin events are append-only: UPDATE refused'); END;""",
]
SQLITE_REDACTION_REVERSE = [
    "DROP TRIGGER IF EXISTS threads_event_no_update;",
    SQLITE_SQL[0],
]
