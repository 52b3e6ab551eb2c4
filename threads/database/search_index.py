"""The message-search index, kept by the database itself (docs/search.md, "Message search").

What an event makes searchable is its *search text*: a message's content, a tool call's name and
arguments, a tool result's result, an annotation's payload, an approval request's action, tool
name and arguments (other kinds have none). Objects and lists count as their JSON text, so the
keys and values of arguments are words too. Only the first SEARCH_TEXT_LIMIT characters of an
event's text are indexed: a tool result of megabytes must not make its append fail (a tsvector
holds at most 1 MB).

PostgreSQL: a GIN expression index on `to_tsvector('simple', ctxadmin_event_search_text(kind,
data))`, an immutable SQL function of the row's own columns. It is written by the INSERT (or
COPY) that writes the event, in its transaction: no code path has to remember it, a rolled back
append leaves nothing, and a fork's or an import's events are indexed like any other. No row
stores its vector (0013 had a stored generated column: it was as big as the events' JSON
again): the selector's walk of the newest events tests a row by substring first and parses
only the rows that hold every word. The GIN's pending list is kept small
(`gin_pending_list_limit = 256` kB): with the default 4 MB, a small log never flushed it, and
an unflushed pending list holds one entry per word of each event, a few times the bytes of the
merged index. A smaller list costs appends more, though: each flush merges fewer events' words
at once (docs/benchmarks.md, "Message search — `bench/search.py`": 141 µs per event at 4 MB, 177 at
256 kB, 224 at 64 kB, 551 with fastupdate off, on a loaded machine); 256 kB is the compromise.
SQLite: an external-content FTS5 table `threads_event_search` (rowid = the event's id, text read
through the view `threads_event_search_text`) filled by an AFTER INSERT trigger on the event
table, which runs inside the inserting statement's transaction too. It keeps which events hold
a word and nothing else (`detail = none`: no token positions; `columnsize = 0`: no size table,
one B-tree row less per event): phrase terms are checked against the candidates' text by the
selector, snippets re-tokenise the page's texts (which they did anyway).

Highlighting marks are two private-use characters that the search text never holds (the
function and the trigger strip them, and a third that PostgreSQL's headline uses for `<`), so
whatever the agent wrote, the only marks in a snippet are the database's:
`threads.domain.search.snippet_parts` splits on them, and the template escapes every part.
"""

from __future__ import annotations

from typing import Any

SEARCH_TEXT_LIMIT = 100_000
MARK_START = "\ue000"
MARK_END = "\ue001"
# PostgreSQL's headline drops what its parser takes for XML tags (`<b>`); a `<` goes into
# ts_headline as this character instead, and comes back as `<` in the snippet.
PG_LESS_THAN = "\ue002"

# --- PostgreSQL --------------------------------------------------------------------------------

# The text search configuration: no stemming, no stop words, any language.
PG_CONFIG = "simple"

POSTGRES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION ctxadmin_event_search_text(kind text, data jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT translate(left(CASE kind
    WHEN 'message' THEN CASE WHEN jsonb_typeof(data -> 'content') = 'string'
      THEN data ->> 'content' ELSE (data -> 'content')::text END
    WHEN 'tool_call' THEN coalesce(data ->> 'tool_name', '') || ' '
      || coalesce((data -> 'arguments')::text, '')
    WHEN 'tool_result' THEN CASE WHEN jsonb_typeof(data -> 'result') = 'string'
      THEN data ->> 'result' ELSE (data -> 'result')::text END
    WHEN 'annotation' THEN (data -> 'payload')::text
    WHEN 'approval_request' THEN coalesce(data ->> 'action', '') || ' '
      || coalesce(data ->> 'tool_name', '') || ' ' || coalesce((data -> 'arguments')::text, '')
  END, {SEARCH_TEXT_LIMIT}), U&'\\E000\\E001\\E002', '')
$$;
"""
POSTGRES_DROP_FUNCTION = "DROP FUNCTION IF EXISTS ctxadmin_event_search_text;"

# The indexed expression, for queries: `e` is the event table's alias. A query must spell it
# exactly so for the planner to match it to the index.
PG_VECTOR = f"to_tsvector('{PG_CONFIG}'::regconfig, ctxadmin_event_search_text(e.kind, e.data))"

# A pending list of at most 256 kB: see the module docstring.
GIN_STORAGE = "fastupdate = on, gin_pending_list_limit = 256"
POSTGRES_INDEX = f"""
CREATE INDEX IF NOT EXISTS threads_event_search ON threads_event USING gin
  ((to_tsvector('{PG_CONFIG}'::regconfig, ctxadmin_event_search_text(kind, data))))
  WITH ({GIN_STORAGE});
"""
POSTGRES_SQL = POSTGRES_FUNCTION + POSTGRES_INDEX
POSTGRES_DROP_INDEX = "DROP INDEX IF EXISTS threads_event_search;"
POSTGRES_REVERSE = POSTGRES_DROP_INDEX + POSTGRES_DROP_FUNCTION

# --- SQLite ------------------------------------------------------------------------------------


def _sqlite_text(row: str) -> str:
    """The search text of the event row named `row` (new, old, e) as an SQLite expression."""
    return f"""replace(replace(substr(CASE {row}.kind
    WHEN 'message' THEN json_extract({row}.data, '$.content')
    WHEN 'tool_call' THEN coalesce(json_extract({row}.data, '$.tool_name'), '') || ' '
      || coalesce(json_extract({row}.data, '$.arguments'), '')
    WHEN 'tool_result' THEN CAST(json_extract({row}.data, '$.result') AS TEXT)
    WHEN 'annotation' THEN json_extract({row}.data, '$.payload')
    WHEN 'approval_request' THEN coalesce(json_extract({row}.data, '$.action'), '') || ' '
      || coalesce(json_extract({row}.data, '$.tool_name'), '') || ' '
      || coalesce(json_extract({row}.data, '$.arguments'), '')
  END, 1, {SEARCH_TEXT_LIMIT}), char(57344), ''), char(57345), '')"""


SQLITE_KINDS = "('message', 'tool_call', 'tool_result', 'annotation', 'approval_request')"

# External content: the FTS5 table stores only its index; snippets read the text through the
# view, which computes it from the event row, so no event's text is stored twice.
SQLITE_VIEW = (
    "CREATE VIEW IF NOT EXISTS threads_event_search_text AS SELECT e.id AS id, "
    f"{_sqlite_text('e')} AS body FROM threads_event e WHERE e.kind IN {SQLITE_KINDS}"
)
SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS threads_event_search USING fts5(body, "
    "content = 'threads_event_search_text', content_rowid = 'id', "
    "tokenize = 'unicode61 remove_diacritics 0', detail = none, columnsize = 0)"
)
_SQLITE_DELETE_OLD = (
    "INSERT INTO threads_event_search (threads_event_search, rowid, body) "
    f"SELECT 'delete', old.id, {_sqlite_text('old')} WHERE old.kind IN {SQLITE_KINDS};"
)
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER IF NOT EXISTS threads_event_search_insert AFTER INSERT ON threads_event
       WHEN new.kind IN {SQLITE_KINDS}
       BEGIN INSERT INTO threads_event_search (rowid, body)
       VALUES (new.id, {_sqlite_text("new")}); END;""",
    # Events are never deleted or changed (the append-only guard refuses it); only test code
    # that opens the seal does either, and the index follows it there too.
    f"""CREATE TRIGGER IF NOT EXISTS threads_event_search_delete AFTER DELETE ON threads_event
       BEGIN {_SQLITE_DELETE_OLD} END;""",
    f"""CREATE TRIGGER IF NOT EXISTS threads_event_search_update AFTER UPDATE ON threads_event
       BEGIN {_SQLITE_DELETE_OLD}
       INSERT INTO threads_event_search (rowid, body) SELECT new.id, {_sqlite_text("new")}
       WHERE new.kind IN {SQLITE_KINDS}; END;""",
]
# Existing events, indexed once by the migration (and by bench/search.py after a bulk build).
SQLITE_BACKFILL = "INSERT INTO threads_event_search (threads_event_search) VALUES ('rebuild')"
# The rebuild leaves its index in many segments of one level; every later append would then
# pay for merging them (FTS5 merges a crowded level inside the writing transaction). Merged
# once here, appends only merge the small segments they write.
SQLITE_OPTIMIZE = "INSERT INTO threads_event_search (threads_event_search) VALUES ('optimize')"
SQLITE_INDEX = [SQLITE_TABLE, *SQLITE_TRIGGERS, SQLITE_BACKFILL, SQLITE_OPTIMIZE]
SQLITE_SQL = [SQLITE_VIEW, *SQLITE_INDEX]
SQLITE_DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS threads_event_search_insert;",
    "DROP TRIGGER IF EXISTS threads_event_search_delete;",
    "DROP TRIGGER IF EXISTS threads_event_search_update;",
]
# The index alone (the view stays): what 0016_search_compact replaces.
SQLITE_DROP_INDEX = [*SQLITE_DROP_TRIGGERS, "DROP TABLE IF EXISTS threads_event_search;"]
SQLITE_REVERSE = [*SQLITE_DROP_INDEX, "DROP VIEW IF EXISTS threads_event_search_text;"]


def fts_purge(connection: Any) -> None:
    """After a redaction (docs/event-log.md, "Redaction"). PostgreSQL: nothing to do, the
    expression index follows the row (its old entries go with VACUUM). SQLite: the update
    trigger has told the external-content FTS5 table to delete the old text, which leaves the
    old words in the segments already written until they are merged; 'optimize' merges them
    now, so the index holds no word of the redacted text."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(SQLITE_OPTIMIZE)
