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
from typing import Any, cast

from django.db import connections, router

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
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            rows = _postgres_hits(cursor, ids, terms, limit, before)
        else:
            cursor.execute(*_sqlite_sql(ids, terms, limit, before))
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


# The newest events are walked first (docs/design.md §17), RECENT_WINDOW of them, then further
# while the hits found so far say the walk is cheaper than reading every match from the GIN
# index (a row walked costs about 1/FETCH_VS_WALK of a match fetched). At most RARE_CAP matches
# are read from the index; beyond that (a word rare lately but common long ago), the walk goes
# on to the start of the log.
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

    1. Walk the newest events (of the workspaces, below `before`) backwards, a window at a
       time, testing each row's stored vector with ts_match_vq (the function form of @@, which
       the planner does not match to the index): a common word fills its page within a few
       hundred rows. After each window, the hits so far estimate how many rows the rest of the
       page needs and how many matches the index holds below; the walk goes on while it is
       the cheaper of the two.
    2. Else: read every match below the walk from the GIN index (a bitmap scan; `e.id + 0`
       keeps the key's index out of it) and pick the workspaces' newest.
    3. More than RARE_CAP matches: walk the rest of the log.
    Then the page's rows are read with their headline."""
    query = _pg_query(terms)
    walk = f"""
        SELECT r.id FROM (
            SELECT e.id, e.thread_id, e.search_vector FROM threads_event e
            WHERE e.id < %s ORDER BY e.id DESC {{window}}
        ) r JOIN threads_thread t ON t.id = r.thread_id
        WHERE ts_match_vq(r.search_vector, ({query})) AND t.workspace_id IN ({_in_list(ids)})
        ORDER BY r.id DESC LIMIT %s
    """
    floor = before if before is not None else 2**63 - 1
    page: list[int] = []
    window, walked, complete = RECENT_WINDOW, 0, False
    while len(page) < limit:
        # One statement: the window's hits (the walk stops at the page's last one) and the
        # window's extent, read from the key's index alone.
        cursor.execute(
            f"SELECT ARRAY({walk.format(window='LIMIT %s')}), w.n, w.lowest FROM ("
            "SELECT COUNT(*) AS n, MIN(id) AS lowest FROM (SELECT id FROM threads_event "
            "WHERE id < %s ORDER BY id DESC LIMIT %s) k) w",
            [floor, window, *terms, *ids, limit - len(page), floor, window],
        )
        found, rows, lowest = cursor.fetchone()
        page += list(found)
        if rows < window:  # the walk reached the start of the log: every hit is in
            complete = True
            break
        if len(page) >= limit:
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
            cursor.execute(walk.format(window=""), [floor, *terms, *ids, limit - len(page)])
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
