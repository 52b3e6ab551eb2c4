"""Migration 0016 rebuilds the message-search index in its compact shape over the events already
stored, and going back rebuilds 0013's shape (stored column / FTS5 with positions) over them."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from threads.selectors import events_search

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0013_event_search")]


def _migrate(target: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _leaf() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _old_index_finds(phrase: str) -> list[int]:
    """Event keys 0013's index finds for a phrase, read from that index itself."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT id FROM threads_event WHERE search_vector @@ phraseto_tsquery("
                "'simple', %s) ORDER BY id",
                [phrase],
            )
        else:  # a phrase query: only an FTS5 index with positions (detail=full) answers it
            cursor.execute(
                "SELECT rowid FROM threads_event_search WHERE threads_event_search MATCH %s "
                "ORDER BY rowid",
                ['"' + phrase + '"'],
            )
        return [row[0] for row in cursor.fetchall()]


def test_stored_events_are_indexed_forwards_and_backwards() -> None:
    apps = _migrate(BEFORE)
    workspace = apps.get_model("threads", "Workspace").objects.create(name="acme")
    thread = apps.get_model("threads", "Thread").objects.create(
        workspace=workspace, external_id="old-1", chain_head="0" * 64
    )
    Event = apps.get_model("threads", "Event")
    texts = ["the quokka asked for lookup_order", "order lookup, said the quokka", "nothing"]
    events = [
        Event.objects.create(
            thread=thread,
            seq=n,
            kind="message",
            created_at=timezone.now(),
            data={"role": "user", "content": text},
            role="user",
            hash=f"{n:064d}",
        )
        for n, text in enumerate(texts, start=1)
    ]
    assert _old_index_finds("lookup order") == [events[0].pk]

    _migrate(_leaf())
    found = events_search(workspace_ids=[workspace.pk], q="quokka")
    assert [h.seq for h in found] == [2, 1]
    assert [h.seq for h in events_search(workspace_ids=[workspace.pk], q="lookup_order")] == [1]

    _migrate(BEFORE)
    assert _old_index_finds("lookup order") == [events[0].pk]
    assert _old_index_finds("quokka") == [events[0].pk, events[1].pk]

    _migrate(_leaf())
    assert [h.seq for h in events_search(workspace_ids=[workspace.pk], q="QUOKKA")] == [2, 1]
