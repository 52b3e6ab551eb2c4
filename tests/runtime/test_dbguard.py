"""The database itself refuses to change or remove an event (docs/event-log.md, "Event log"),
whatever SQL is sent."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from tests import factories
from threads.models import Event, Thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(thread: Any) -> list[Event]:
    return factories.append(
        thread, factories.user("cancel my order"), factories.assistant("it is cancelled")
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE threads_event SET data = '{}' WHERE thread_id = %s AND seq = %s",
        "DELETE FROM threads_event WHERE thread_id = %s AND seq = %s",
    ],
    ids=["update", "delete"],
)
def test_raw_sql_cannot_change_an_event(stored: list[Event], sql: str) -> None:
    event = stored[0]
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            thread_id = Thread._meta.pk.get_db_prep_value(event.thread_id, connection)
            cursor.execute(sql, [thread_id, event.seq])
    again = Event.objects.get(thread_id=event.thread_id, seq=event.seq)
    assert again.data == event.data and again.hash == event.hash
    assert Event.objects.filter(thread_id=event.thread_id).count() == 2


def test_the_orm_cannot_change_an_event_either(stored: list[Event]) -> None:
    rows = Event.objects.filter(thread_id=stored[1].thread_id, seq=stored[1].seq)
    assert rows.count() == 1
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        rows.update(token_count=0)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        rows.delete()


def test_postgresql_has_the_trigger(stored: list[Event]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (the PostgreSQL run of ./scripts/test sets DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname, tgenabled FROM pg_trigger WHERE tgname IN "
            "('threads_event_update_guard', 'threads_event_no_delete') ORDER BY tgname"
        )
        # The UPDATE guard (0027) and the DELETE guard (0028), enabled for ordinary sessions.
        assert cursor.fetchall() == [
            ("threads_event_no_delete", "O"),
            ("threads_event_update_guard", "O"),
        ]


@pytest.mark.django_db(transaction=True)
def test_sqlite_refuses_a_connection_that_is_not_ctxadmin(stored: list[Event]) -> None:
    """The sqlite3 shell, or any program without ctxadmin's seal function, is refused too."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL's trigger needs no function per connection")
    outsider = sqlite3.connect(connection.settings_dict["NAME"], timeout=30)
    try:
        for statement in ("UPDATE threads_event SET token_count = 0", "DELETE FROM threads_event"):
            with pytest.raises(sqlite3.OperationalError, match="ctxadmin_log_sealed"):
                outsider.execute(statement)
    finally:
        outsider.close()
    assert Event.objects.count() == 2
