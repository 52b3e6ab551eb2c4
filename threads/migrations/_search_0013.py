"""The message-search index as migration 0013_event_search made it: the parts that
0016_search_compact changed are kept here, so that 0013 keeps building what it built and 0016
can go back to it; the parts both share (the text function, the view, the triggers) come from
threads/database/search_index.py. (A module whose name starts with `_` is not a migration.)

PostgreSQL: a stored generated column `search_vector` and a GIN index on it. SQLite: an
external-content FTS5 table with full detail (token positions) and a size table.
"""

from __future__ import annotations

from threads.database import search_index as searchindex

POSTGRES_COLUMN = f"""
ALTER TABLE threads_event ADD COLUMN IF NOT EXISTS search_vector tsvector
  GENERATED ALWAYS AS (to_tsvector('{searchindex.PG_CONFIG}'::regconfig,
    ctxadmin_event_search_text(kind, data))) STORED;
CREATE INDEX IF NOT EXISTS threads_event_search ON threads_event USING gin (search_vector);
"""
POSTGRES_SQL = searchindex.POSTGRES_FUNCTION + POSTGRES_COLUMN
# The column goes with its index (and is dropped without touching a row: no trigger fires).
POSTGRES_DROP_COLUMN = "ALTER TABLE threads_event DROP COLUMN IF EXISTS search_vector;"
POSTGRES_REVERSE = POSTGRES_DROP_COLUMN + searchindex.POSTGRES_DROP_FUNCTION

SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS threads_event_search USING fts5(body, "
    "content = 'threads_event_search_text', content_rowid = 'id', "
    "tokenize = 'unicode61 remove_diacritics 0')"
)
SQLITE_INDEX = [
    SQLITE_TABLE,
    *searchindex.SQLITE_TRIGGERS,
    searchindex.SQLITE_BACKFILL,
    searchindex.SQLITE_OPTIMIZE,
]
SQLITE_SQL = [searchindex.SQLITE_VIEW, *SQLITE_INDEX]
SQLITE_REVERSE = searchindex.SQLITE_REVERSE
