"""The PostgreSQL batch insert prepares its statement for the call only."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests import factories as f
from threads.models import Event

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("prepare", [True, False])
def test_batch_insert_leaves_the_connection_as_django_configured_it(
    thread: Any, settings: Any, prepare: bool
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are psycopg's; SQLite has no round trips to save")
    settings.CTXADMIN_PREPARE_BATCH_INSERTS = prepare
    connection.ensure_connection()
    before = connection.connection.prepare_threshold
    f.append(thread, *[f.user(f"message {n}") for n in range(20)])
    assert connection.connection.prepare_threshold == before
    assert list(Event.objects.filter(thread=thread).values_list("seq", flat=True)) == list(
        range(1, 21)
    )
