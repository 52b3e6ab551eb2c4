"""Message search over the index of threads/searchindex.py (docs/design.md §17): one selector
for the API and the dashboard.

A hit is an event whose search text holds every term of the query: its whitespace-separated
parts, each a word or a phrase of words (`lookup_order`), whole words, any case; on PostgreSQL
words as its `simple` text search parser splits them, on SQLite as FTS5's unicode61 tokenizer
does. Hits come newest first (by the event's key, which follows append order), a page
at a time; the next page starts below the last hit's key (`before`), so a page costs the same
wherever it is. Snippets are made for the page's hits only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.models.expressions import RawSQL

from threads.domain.search import SnippetPart, fts5_query, search_terms, snippet_parts
from threads.models import Event
from threads.searchindex import MARK_END, MARK_START, PG_CONFIG, PG_LESS_THAN, PG_VECTOR

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


def _ids(workspace_ids: Iterable[Any]) -> list[int]:
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
    ids, terms = _ids(workspace_ids), search_terms(q)
    if not terms or not ids:
        return []
    limit = max(1, min(limit, MAX_HITS))
    connection = connections[router.db_for_read(Event)]
    if connection.vendor == "postgresql":
        sql, params = _postgres_sql(ids, terms, limit, before)
    else:
        sql, params = _sqlite_sql(ids, terms, limit, before)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
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


def _in_list(ids: list[Any]) -> str:
    return ", ".join(["%s"] * len(ids))


def _pg_query(terms: list[str]) -> str:
    """The tsquery of every term, each a phrase (one parameter per term)."""
    return " && ".join([f"phraseto_tsquery('{PG_CONFIG}', %s)"] * len(terms))


def _postgres_sql(
    ids: list[int], terms: list[str], limit: int, before: int | None
) -> tuple[str, list[Any]]:
    # The page's keys first (the index, the workspace filter, the order and the limit), then
    # the headline for those rows only: ts_headline re-parses the whole text.
    below = "AND e.id < %s" if before is not None else ""
    sql = f"""
        WITH page AS (
            SELECT e.id, e.thread_id, e.seq, e.kind, e.data
            FROM threads_event e JOIN threads_thread t ON t.id = e.thread_id
            WHERE {PG_VECTOR} @@ ({_pg_query(terms)})
                AND t.workspace_id IN ({_in_list(ids)}) {below}
            ORDER BY e.id DESC LIMIT %s
        )
        SELECT page.id, t.id, t.external_id, t.title, t.workspace_id, page.seq, page.kind,
            ts_headline('{PG_CONFIG}',
                replace(ctxadmin_event_search_text(page.kind, page.data), '<', %s),
                {_pg_query(terms)}, %s)
        FROM page JOIN threads_thread t ON t.id = page.thread_id
        ORDER BY page.id DESC
    """
    params: list[Any] = [*terms, *ids]
    if before is not None:
        params.append(before)
    return sql, [*params, limit, PG_LESS_THAN, *terms, _PG_HEADLINE]


def _sqlite_sql(
    ids: list[int], terms: list[str], limit: int, before: int | None
) -> tuple[str, list[Any]]:
    below = "AND s.rowid < %s" if before is not None else ""
    sql = f"""
        SELECT e.id, t.id, t.external_id, t.title, t.workspace_id, e.seq, e.kind,
            snippet(threads_event_search, 0, %s, %s, '…', {_SQLITE_SNIPPET_TOKENS})
        FROM threads_event_search s
        JOIN threads_event e ON e.id = s.rowid
        JOIN threads_thread t ON t.id = e.thread_id
        WHERE threads_event_search MATCH %s AND t.workspace_id IN ({_in_list(ids)}) {below}
        ORDER BY s.rowid DESC LIMIT %s
    """
    params: list[Any] = [MARK_START, MARK_END, fts5_query(terms), *ids]
    if before is not None:
        params.append(before)
    return sql, [*params, limit]


def threads_with_hits(q: str) -> RawSQL | None:
    """The keys of threads with at least one event matching `q`, as a subquery for the thread
    list's `content` filter (None: a query without words matches no event)."""
    terms = search_terms(q)
    if not terms:
        return None
    connection = connections[router.db_for_read(Event)]
    if connection.vendor == "postgresql":
        return RawSQL(
            f"SELECT e.thread_id FROM threads_event e WHERE {PG_VECTOR} @@ ({_pg_query(terms)})",
            terms,
        )
    return RawSQL(
        "SELECT e.thread_id FROM threads_event_search s JOIN threads_event e ON e.id = s.rowid "
        "WHERE threads_event_search MATCH %s",
        [fts5_query(terms)],
    )
