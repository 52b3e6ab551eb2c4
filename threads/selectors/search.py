"""Message search over the index of threads/database/search_index.py (docs/design.md §17): one
selector for the API and the dashboard.

A hit is an event whose search text holds every term of the query: its whitespace-separated
parts, each a word or a phrase of words (`lookup_order`), whole words, any case; on PostgreSQL
words as its `simple` text search parser splits them, on SQLite as FTS5's unicode61 tokenizer
does. Hits come newest first (by the event's key, which follows append order), a page
at a time; the next page starts below the last hit's key (`before`), so a page costs the same
wherever it is. Snippets are made for the page's hits only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from django.db import connections, router
from psycopg.pq import TransactionStatus

from threads.database.search_index import MARK_END, MARK_START, PG_CONFIG, PG_LESS_THAN, PG_VECTOR
from threads.domain.search import (
    SnippetPart,
    fts5_query,
    has_phrase,
    holds_phrases,
    search_terms,
    snippet_parts,
)
from threads.models import Event

MAX_HITS = 100
# ts_headline: 15..35 words around the best match.
_PG_HEADLINE = f"StartSel={MARK_START}, StopSel={MARK_END}, MinWords=15, MaxWords=35"
# FTS5 snippet(): about 24 tokens around the hits.
_SQLITE_SNIPPET_TOKENS = 24


@dataclass(frozen=True, slots=True)
class SearchHit:
    event_id: int
    thread_id: uuid.UUID
    external_id: str
    title: str
    workspace_id: int
    seq: int
    kind: str
    snippet: list[SnippetPart]


def workspace_keys(workspace_ids: Iterable[Any]) -> list[int]:
    """Workspace keys from ints or `values("workspace_id")` rows (member_workspace_ids)."""
    return [int(w["workspace_id"]) if isinstance(w, dict) else int(w) for w in workspace_ids]


def events_search(
    *,
    workspace_ids: Iterable[Any],
    q: str,
    limit: int = 50,
    before: int | None = None,
) -> list[SearchHit]:
    """Events of the given workspaces' threads whose search text holds every term of `q`,
    newest first, at most `limit` (≤ MAX_HITS); `before`: only events with a smaller key (the
    last hit's `event_id` of the previous page). A query without words finds nothing."""
    ids, terms = workspace_keys(workspace_ids), search_terms(q)
    if not terms or not ids:
        return []
    limit = max(1, min(limit, MAX_HITS))
    connection = connections[router.db_for_read(Event)]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with _without_parallel_workers(connection, cursor):
                rows = _postgres_hits(cursor, ids, terms, limit, before)
        else:
            rows = _sqlite_hits(cursor, ids, terms, limit, before)
    return [
        SearchHit(
            event_id=row[0],
            thread_id=row[1] if isinstance(row[1], uuid.UUID) else uuid.UUID(row[1]),
            external_id=row[2],
            title=row[3],
            workspace_id=row[4],
            seq=row[5],
            kind=row[6],
            snippet=snippet_parts((row[7] or "").replace(PG_LESS_THAN, "<"), MARK_START, MARK_END),
        )
        for row in rows
    ]


@contextmanager
def _without_parallel_workers(connection: Any, cursor: Any) -> Iterator[None]:
    """The search's statements planned without parallel workers, and the session's setting
    back after them. A search reads a page of hits: starting the workers of a parallel plan
    costs more than the scan they would share (measured at 10M events, bench/scale.py: the
    GIN index's few matches read in 4.8 ms, 21.7 ms with two workers started for them). A
    failed transaction is not touched: its rollback undoes the SET."""
    cursor.execute("SET max_parallel_workers_per_gather = 0")
    try:
        yield
    finally:
        if connection.connection.info.transaction_status != TransactionStatus.INERROR:
            cursor.execute("RESET max_parallel_workers_per_gather")


def _in_list(ids: list[Any]) -> str:
    return ", ".join(["%s"] * len(ids))


def _pg_query(terms: list[str]) -> str:
    """The tsquery of every term, each a phrase (one parameter per term)."""
    return " && ".join([f"phraseto_tsquery('{PG_CONFIG}', %s)"] * len(terms))


# The newest events are searched first (docs/design.md §17), a window of RECENT_WINDOW keys,
# then further windows while the hits found so far say they are cheaper than reading every
# match from the GIN index (a key of window costs about 1/FETCH_VS_WALK of a match fetched). At
# most RARE_CAP matches are read from the index; beyond that (a word rare lately but common long
# ago), the rest of the log is one last window.
RECENT_WINDOW = 2_000
FETCH_VS_WALK = 10
RARE_CAP = 20_000


def _postgres_hits(
    cursor: Any, ids: list[int], terms: list[str], limit: int, before: int | None
) -> list[tuple[Any, ...]]:
    """The page's hits, chosen by a strategy that does not depend on the planner's guess of
    how many events hold a word: it has statistics only for common words, guesses a thousand
    events for any other (a rare one, or one no event holds), and then walks the whole log
    backwards for a page that is not there.

    1. Go through the newest events (of the workspaces, below `before`) a window of keys at a
       time: the window's extent is read from the key's index, then its hits are asked for
       within that key range. The planner answers a range of a few thousand keys either by
       intersecting the GIN index's matches with the key range (a BitmapAnd: only the
       window's hits are read from the heap) or, for a word it knows to be common, by walking
       the range backwards testing each row until the page is full. No row stores its vector
       (the index is on the expression), so a row's lowercased text must first hold every
       lexeme of the query as a substring (`LIKE`, a scan of bytes) before it is parsed:
       without that, a word held by a few per cent of events parsed hundreds of rows in vain
       (the `simple` configuration's lexemes are lowercased pieces of the text, so the test
       never drops a hit). Both ways cost about what the window holds. After
       each window, the hits so far estimate how many keys the rest of the page needs and how
       many matches the index holds below; the windows go on while they are the cheaper.
    2. Else: read every match below the windows from the GIN index (a bitmap scan; `e.id + 0`
       keeps the key's index out of it) and pick the workspaces' newest.
    3. More than RARE_CAP matches: the rest of the log is one last window.
    Then the page's rows are read with their headline."""
    query = _pg_query(terms)
    cursor.execute(
        f"SELECT ARRAY(SELECT DISTINCT w FROM unnest(%s::text[]) t, "
        f"unnest(tsvector_to_array(to_tsvector('{PG_CONFIG}', t))) w)",
        [terms],
    )
    patterns = ["%" + _like_escape(lexeme) + "%" for lexeme in cursor.fetchone()[0]]
    in_window = f"""
        SELECT e.id FROM threads_event e JOIN threads_thread t ON t.id = e.thread_id
        WHERE {PG_VECTOR} @@ ({query}) AND e.id >= %s AND e.id < %s
            AND lower(ctxadmin_event_search_text(e.kind, e.data)) LIKE ALL (%s::text[])
            AND t.workspace_id IN ({_in_list(ids)})
        ORDER BY e.id DESC LIMIT %s
    """
    floor = before if before is not None else 2**63 - 1
    page: list[int] = []
    window, walked, complete = RECENT_WINDOW, 0, False
    while len(page) < limit:
        cursor.execute(
            "SELECT COUNT(*), MIN(id) FROM (SELECT id FROM threads_event "
            "WHERE id < %s ORDER BY id DESC LIMIT %s) k",
            [floor, window],
        )
        rows, lowest = cursor.fetchone()
        if rows < window:  # the window reaches the start of the log: every hit is in
            lowest, complete = 0, True
        cursor.execute(in_window, [*terms, lowest, floor, patterns, *ids, limit - len(page)])
        page += [row[0] for row in cursor.fetchall()]
        if complete or len(page) >= limit:
            break
        floor, walked = lowest, walked + window
        density = len(page) / walked
        needed = (limit - len(page)) / density if density else float("inf")
        if needed > FETCH_VS_WALK * density * floor:
            break
        window = int(needed * 1.5) + 1
    if len(page) < limit and not complete:
        cursor.execute(
            f"SELECT e.id, e.thread_id FROM threads_event e WHERE {PG_VECTOR} @@ ({query}) "
            "AND e.id + 0 < %s LIMIT %s",
            [*terms, floor, RARE_CAP + 1],
        )
        matches = cursor.fetchall()
        if len(matches) <= RARE_CAP:
            allowed: set[Any] = set()
            if matches:
                cursor.execute(
                    "SELECT id FROM threads_thread WHERE id = ANY(%s) AND workspace_id = ANY(%s)",
                    [list({thread for _, thread in matches}), ids],
                )
                allowed = {row[0] for row in cursor.fetchall()}
            page += sorted((e for e, thread in matches if thread in allowed), reverse=True)[
                : limit - len(page)
            ]
        else:
            cursor.execute(in_window, [*terms, 0, floor, patterns, *ids, limit - len(page)])
            page += [row[0] for row in cursor.fetchall()]
    if not page:
        return []
    # The headline for the page's rows only: ts_headline re-parses the whole text.
    cursor.execute(
        f"""
        SELECT e.id, t.id, t.external_id, t.title, t.workspace_id, e.seq, e.kind,
            ts_headline('{PG_CONFIG}',
                replace(ctxadmin_event_search_text(e.kind, e.data), '<', %s), {query}, %s)
        FROM threads_event e JOIN threads_thread t ON t.id = e.thread_id
        WHERE e.id = ANY(%s)
        ORDER BY e.id DESC
        """,
        [PG_LESS_THAN, *terms, _PG_HEADLINE, page],
    )
    return cast(list[tuple[Any, ...]], cursor.fetchall())


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# A query with a phrase term reads FTS5's candidates (every word anywhere) this many per page
# wanted, and keeps those where the words stand together.
PHRASE_BATCH = 4


def _sqlite_hits(
    cursor: Any, ids: list[int], terms: list[str], limit: int, before: int | None
) -> list[tuple[Any, ...]]:
    """The page's hits from FTS5, newest first. The index holds no positions (`detail =
    none`): a query of single words is answered by it alone; a phrase term needs its rows'
    text, read for FTS5's candidates a batch at a time until the page is full or the
    candidates end. Snippets are made for the page's rows only."""
    match = fts5_query(terms)
    scope = f"""
        FROM threads_event_search s
        JOIN threads_event e ON e.id = s.rowid
        JOIN threads_thread t ON t.id = e.thread_id
        WHERE threads_event_search MATCH %s AND t.workspace_id IN ({_in_list(ids)})
    """
    if has_phrase(terms):
        page: list[int] = []
        batch = limit * PHRASE_BATCH
        while len(page) < limit:
            below = "AND s.rowid < %s" if before is not None else ""
            cursor.execute(
                f"SELECT s.rowid, s.body {scope} {below} ORDER BY s.rowid DESC LIMIT %s",
                [match, *ids, *([before] if before is not None else []), batch],
            )
            candidates = cursor.fetchall()
            page += [row for row, body in candidates if holds_phrases(body or "", terms)]
            if len(candidates) < batch:
                break
            before = candidates[-1][0]
        if not page:
            return []
        restrict, params = f"AND s.rowid IN ({_in_list(page[:limit])})", page[:limit]
    else:
        restrict = "AND s.rowid < %s" if before is not None else ""
        params = [before] if before is not None else []
    cursor.execute(
        f"""
        SELECT e.id, t.id, t.external_id, t.title, t.workspace_id, e.seq, e.kind,
            snippet(threads_event_search, 0, %s, %s, '…', {_SQLITE_SNIPPET_TOKENS})
        {scope} {restrict}
        ORDER BY s.rowid DESC LIMIT %s
        """,
        [MARK_START, MARK_END, match, *ids, *params, limit],
    )
    return cast(list[tuple[Any, ...]], cursor.fetchall())
