"""Migration 0026 (secrets at ingest, docs/event-log.md, "Secrets at ingest") both ways over a log
already stored: the event table is never rewritten (the same storage before and after, its
append-only and search-index triggers kept), no event's content changes, events stored before
it read no flag and still verify, and an append after it flags as it should."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests import factories as f
from threads.models import Event, Thread
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("threads", "0025_integrations_move_out")]
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"


def _migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def _leaf() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _storage(table: str) -> Any:
    """What identifies a table's storage: a rewrite (a remade table) changes it."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", [table])
        else:
            cursor.execute(
                "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = %s", [table]
            )
        return cursor.fetchone()[0]


def _triggers(table: str) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [table],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table]
            )
        return {row[0] for row in cursor.fetchall()}


def _columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, table)}


def _log(thread_id: Any) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq, kind, created_at, client_event_id, metadata, data, token_count, hash "
            "FROM threads_event WHERE thread_id = %s ORDER BY seq",
            [Thread._meta.pk.get_db_prep_value(thread_id, connection)],  # type: ignore[union-attr]
        )
        return cursor.fetchall()


def test_the_columns_come_without_rewriting_the_log(thread: Thread) -> None:
    events, threads = Event._meta.db_table, Thread._meta.db_table
    f.append(
        thread,
        f.user("please read the config"),
        f.call("c1", "read_config", {"path": "staging.env"}),
        f.result("c1", value={"aws_access_key_id": AWS_KEY_ID}),
    )
    # A log stored before 0026 was chained v1 (no salted digests: 0027_redaction), and 0027
    # cannot be unapplied over v2 events.
    f.as_chain_v1(thread)
    # Back to before 0026: the log stays, its flags go with the column.
    _migrate(BEFORE)
    assert "secrets" not in _columns(events)
    assert "events_with_secrets" not in _columns(threads)
    stored = _log(thread.pk)
    assert [row[0] for row in stored] == [1, 2, 3]
    seal, storage, thread_storage = _triggers(events), _storage(events), _storage(threads)
    assert seal

    # Forward over that stored log: columns added, not a row rewritten (0026 alone: a later
    # migration may change the triggers, as 0027_redaction does).
    _migrate([("threads", "0026_event_secrets")])
    assert "secrets" in _columns(events) and "events_with_secrets" in _columns(threads)
    assert _storage(events) == storage
    if connection.vendor == "postgresql":
        assert _storage(threads) == thread_storage  # SQLite remakes the thread table (0026)
    # The seal is kept; on PostgreSQL 0028 (retention) gives DELETE a trigger of its own.
    assert _triggers(events) >= seal
    assert _log(thread.pk) == stored
    _migrate(_leaf())
    # Stored before: no flag, nothing counted; the chain verifies as before.
    assert list(Event.objects.filter(thread=thread).values_list("secrets", flat=True)) == [None] * 3
    thread.refresh_from_db()
    assert thread.events_with_secrets == 0
    assert integrity_check(thread=thread, full=True).ok
    # Appended after: flagged and counted, and the chain still verifies.
    (row,) = f.append(thread, f.assistant(f"it was {AWS_KEY_ID}"))
    assert row.secrets == [{"type": "AWS Access Key", "field": "content"}]
    thread.refresh_from_db()
    assert thread.events_with_secrets == 1
    assert integrity_check(thread=thread, full=True).ok
