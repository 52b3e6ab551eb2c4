"""The database refuses to update or delete events (docs/event-log.md, "Event log").

PostgreSQL: a trigger raises on UPDATE or DELETE of an event row (TRUNCATE, which only a
table owner's maintenance runs, is not a row change). SQLite: triggers call the per-connection
function `ctxadmin_log_sealed()`, which answers 1; a connection without it (the sqlite3 shell)
fails the trigger too, so the refusal holds there as well. Only test code opens the seal, to
flush test databases and to simulate tampering.
"""

from __future__ import annotations

import contextlib
import threading
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
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS threads_event_no_update;",
    "DROP TRIGGER IF EXISTS threads_event_no_delete;",
]
