"""The database itself refuses to change or remove an event (DESIGN §2), whatever SQL is sent."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from tests import factories
from threads.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(thread: Any) -> list[Event]:
    return factories.append(
        thread, factories.user("cancel my order"), factories.assistant("it is cancelled")
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE threads_event SET data = %s WHERE id = %s",
        "DELETE FROM threads_event WHERE id = %s AND %s IS NOT NULL",
    ],
    ids=["update", "delete"],
)
def test_raw_sql_cannot_change_an_event(stored: list[Event], sql: str) -> None:
    event = stored[0]
    params: list[Any] = ['{"role": "user", "content": "refund me"}', event.pk]
    if sql.startswith("DELETE"):
        params = [event.pk, "x"]
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    again = Event.objects.get(pk=event.pk)
    assert again.data == event.data and again.hash == event.hash
    assert Event.objects.filter(thread=event.thread).count() == 2


def test_the_orm_cannot_change_an_event_either(stored: list[Event]) -> None:
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(pk=stored[1].pk).update(token_count=0)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(pk=stored[1].pk).delete()


def test_postgresql_has_the_trigger(stored: list[Event]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (the PostgreSQL run of ./scripts/test sets DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgenabled FROM pg_trigger WHERE tgname = 'threads_event_append_only'"
        )
        assert cursor.fetchall() == [("O",)]  # enabled for ordinary sessions


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
