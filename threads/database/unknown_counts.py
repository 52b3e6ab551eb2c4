"""Each thread's count of unknown side effects, kept by the database (docs/scale.md,
"What one database holds").

`Thread.unknown_side_effects` is the number of the thread's side effects whose status is
`unknown`. Triggers on the side-effect table keep it: every writer of side effects (the
append's statements, a resolution, a status check, a fork, an import) moves it in its own
statement's transaction without knowing, as the search index is kept (docs/search.md,
"Message search"). Every such writer holds the thread's row lock already (docs/event-log.md,
"Event log"), so the trigger's update of that row waits for no one. The thread list filters on it
through a partial index instead of asking every thread whether one of its side effects is unknown.

On SQLite, Django remakes a table for most changes of it, and the copy has no triggers: a
migration that changes the side-effect table must create SQLITE_SQL again (the tests of the
count fail without them).
"""

from __future__ import annotations

POSTGRES_SQL = """
CREATE OR REPLACE FUNCTION ctxadmin_thread_unknown_count() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.thread_id = NEW.thread_id THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'unknown' THEN
    UPDATE threads_thread SET unknown_side_effects = unknown_side_effects - 1
      WHERE id = OLD.thread_id;
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status = 'unknown' THEN
    UPDATE threads_thread SET unknown_side_effects = unknown_side_effects + 1
      WHERE id = NEW.thread_id;
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER threads_sideeffect_unknown_count
  AFTER INSERT OR DELETE OR UPDATE OF status, thread_id ON threads_sideeffect
  FOR EACH ROW EXECUTE FUNCTION ctxadmin_thread_unknown_count();
"""

POSTGRES_REVERSE = """
DROP TRIGGER IF EXISTS threads_sideeffect_unknown_count ON threads_sideeffect;
DROP FUNCTION IF EXISTS ctxadmin_thread_unknown_count();
"""

SQLITE_SQL = [
    """CREATE TRIGGER threads_sideeffect_unknown_insert AFTER INSERT ON threads_sideeffect
    WHEN NEW.status = 'unknown' BEGIN
      UPDATE threads_thread SET unknown_side_effects = unknown_side_effects + 1
        WHERE id = NEW.thread_id;
    END""",
    """CREATE TRIGGER threads_sideeffect_unknown_delete AFTER DELETE ON threads_sideeffect
    WHEN OLD.status = 'unknown' BEGIN
      UPDATE threads_thread SET unknown_side_effects = unknown_side_effects - 1
        WHERE id = OLD.thread_id;
    END""",
    """CREATE TRIGGER threads_sideeffect_unknown_update
    AFTER UPDATE OF status, thread_id ON threads_sideeffect
    WHEN (OLD.status = 'unknown') <> (NEW.status = 'unknown') OR OLD.thread_id <> NEW.thread_id
    BEGIN
      UPDATE threads_thread SET unknown_side_effects = unknown_side_effects - 1
        WHERE id = OLD.thread_id AND OLD.status = 'unknown';
      UPDATE threads_thread SET unknown_side_effects = unknown_side_effects + 1
        WHERE id = NEW.thread_id AND NEW.status = 'unknown';
    END""",
]

SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS threads_sideeffect_unknown_insert",
    "DROP TRIGGER IF EXISTS threads_sideeffect_unknown_delete",
    "DROP TRIGGER IF EXISTS threads_sideeffect_unknown_update",
]

# Every thread's count from its side effects: the migration's, and the check of a test.
RECOUNT_SQL = """
UPDATE threads_thread SET unknown_side_effects = (
  SELECT COUNT(*) FROM threads_sideeffect s
  WHERE s.thread_id = threads_thread.id AND s.status = 'unknown'
)
"""
