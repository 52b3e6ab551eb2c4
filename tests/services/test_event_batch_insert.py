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


def test_a_large_batch_is_stored_whole_and_chains(thread: Any) -> None:
    """Past COPY_MIN_ROWS the PostgreSQL path streams the rows with COPY."""
    from threads.services.events import COPY_MIN_ROWS
    from threads.services.integrity import integrity_check

    bodies: list[dict[str, Any]] = []
    for n in range(COPY_MIN_ROWS):
        bodies += [
            f.user(f"question {n} with a quote ' and a tab \t and é"),
            f.call(f"c{n}", "lookup", {"n": n, "nested": {"list": [1, None, "x"]}}),
            f.result(f"c{n}", value={"answer": n}, verified_facts=[{"key": "n", "value": n}]),
        ]
    events = f.append(thread, *bodies)
    assert [e.seq for e in events] == list(range(1, len(bodies) + 1))
    stored = Event.objects.get(thread=thread, seq=3)
    assert stored.data["call_seq"] == 2 and stored.data["result"] == {"answer": 0}
    assert Event.objects.get(thread=thread, seq=1).data["content"].endswith("tab \t and é")
    verdict = integrity_check(thread=thread, full=True)
    assert verdict.ok and verdict.verified_until == len(bodies)
