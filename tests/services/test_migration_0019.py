"""Migration 0019 (the event table's index diet, docs/scale.md, "What one database holds") both
ways, over a log already stored: back to 0018 the full tool-call index and the thread's own index
return, forward again the partial index replaces the one and the other goes; the events, the log's
seal and the search index are untouched either way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests import factories as f
from threads.models import Event, Thread
from threads.selectors import events_search
from threads.selectors.events import closing_events_for_calls

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0018_event_retraction_index")]
TABLE = Event._meta.db_table


def _migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def _leaf() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _indexes() -> dict[str, Any]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, TABLE)
    return {name: c for name, c in found.items() if c["index"] and not c["primary_key"]}


def _by_columns(columns: list[str]) -> list[str]:
    return [name for name, c in _indexes().items() if c["columns"] == columns and not c["unique"]]


def _tool_call_index_sql() -> str:
    """The definition of the index over (thread, tool_call_id, seq), as the database holds it."""
    (name,) = _by_columns(["thread_id", "tool_call_id", "seq"])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_get_indexdef(%s::regclass)", [name])
        else:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [name]
            )
        return str(cursor.fetchone()[0])


def _event_triggers() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [TABLE],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [TABLE]
            )
        return {row[0] for row in cursor.fetchall()}


def _log(thread: Thread) -> list[tuple[int, str, str]]:
    return list(
        Event.objects.filter(thread=thread).order_by("seq").values_list("seq", "kind", "hash")
    )


def test_the_index_diet_goes_back_and_forth_over_a_stored_log(thread: Thread) -> None:
    f.append(
        thread,
        f.user("please refund the quokka order"),
        f.call("c1", "refund", {"order": 7}, side_effect_key="refund-7"),
        f.result("c1", "succeeded", {"refunded": 7}),
        f.assistant("done"),
    )
    # Written before salted digests: 0027 is unapplied only over a v1 log.
    f.as_chain_v1(thread)
    stored = _log(thread)
    triggers = _event_triggers()
    assert triggers  # the append-only seal (and on SQLite the search index's triggers)
    assert _by_columns(["thread_id"]) == []
    assert "tool_call_id" in _tool_call_index_sql().split("WHERE", 1)[-1]

    _migrate(BEFORE)
    assert len(_by_columns(["thread_id"])) == 1
    assert "WHERE" not in _tool_call_index_sql().upper()
    # The seal stays (on PostgreSQL one trigger for both again: 0027 and 0028 split it).
    assert _event_triggers()
    assert _log(thread) == stored

    _migrate(_leaf())
    assert _by_columns(["thread_id"]) == []
    assert "tool_call_id" in _tool_call_index_sql().split("WHERE", 1)[-1]
    assert _event_triggers() == triggers
    assert _log(thread) == stored
    # The reads still find the log's calls, results and words.
    closing = closing_events_for_calls(thread=thread, call_ids={"c1"}, after=0)
    assert [seq for seq, _, _ in closing] == [3]
    assert [h.seq for h in events_search(workspace_ids=[thread.workspace_id], q="quokka")] == [1]
