"""Concurrent writers on one thread: seq stays gapless, the chain verifies, nothing is lost.

Each writer is a Python thread with its own database connection, posting batches through the
append service at the same moment as the others (a barrier releases them together).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections

from tests import factories
from threads.domain.events import normalize_event
from threads.models import Event, Thread
from threads.services.events import event_append_batch
from threads.services.integrity import integrity_check

BATCHES = 6


def writer_batch(writer: int, batch: int) -> list[dict[str, Any]]:
    """A user turn with a tool call, its result and a reply; ids say who wrote them."""
    tag = f"w{writer}-b{batch}"
    bodies = [
        factories.user(f"writer {writer} asks question {batch}"),
        factories.call(f"{tag}-call", "search", {"q": f"question {batch}"}),
        factories.result(f"{tag}-call", value={"hits": [tag] * 5}),
        factories.assistant(f"writer {writer} answers {batch}"),
    ]
    for index, body in enumerate(bodies):
        body["client_event_id"] = f"{tag}-{index}"
    return bodies


def run_writers(thread: Thread, writers: int) -> None:
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            barrier.wait()
            for batch in range(BATCHES):
                new = [normalize_event(b, max_bytes=1 << 20) for b in writer_batch(writer, batch)]
                event_append_batch(thread=Thread.objects.get(pk=thread.pk), new_events=new)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
        finally:
            connections.close_all()

    pool = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=300)
    assert not errors, errors
    assert not any(t.is_alive() for t in pool)


def assert_log_whole(thread: Thread, writers: int) -> None:
    total = writers * BATCHES * 4
    seqs = list(Event.objects.filter(thread=thread).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))  # gapless, no duplicates
    thread.refresh_from_db()
    assert thread.last_seq == total
    assert thread.token_total == sum(
        Event.objects.filter(thread=thread).values_list("token_count", flat=True)
    )

    rows = {
        e.client_event_id: e
        for e in Event.objects.filter(thread=thread).only("seq", "client_event_id", "data", "kind")
    }
    expected = {
        body["client_event_id"]
        for w in range(writers)
        for b in range(BATCHES)
        for body in writer_batch(w, b)
    }
    assert set(rows) == expected  # nothing lost, nothing invented
    for w in range(writers):
        own = [rows[f"w{w}-b{b}-{i}"].seq for b in range(BATCHES) for i in range(4)]
        assert own == sorted(own)  # each writer's events keep its order
        for b in range(BATCHES):
            # every result bound to its own writer's call, whatever interleaved
            assert rows[f"w{w}-b{b}-2"].data["call_seq"] == rows[f"w{w}-b{b}-1"].seq
            # a batch is all or nothing and numbered as one block
            block = [rows[f"w{w}-b{b}-{i}"].seq for i in range(4)]
            assert block == list(range(block[0], block[0] + 4))

    verdict = integrity_check(thread=thread, full=True)
    assert verdict.ok, verdict.detail
    assert verdict.verified_until == total


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_writers_on_postgresql(workspace: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (the PostgreSQL run of ./scripts/test sets DATABASE_URL)")
    thread = factories.make_thread(workspace, "busy")
    run_writers(thread, writers=8)
    assert_log_whole(thread, writers=8)


@pytest.mark.django_db(transaction=True)
def test_four_writers_on_sqlite(workspace: Any) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: the PostgreSQL run has its own eight-writer test")
    # WAL lets readers go on while a writer holds the lock; IMMEDIATE makes writers queue at
    # BEGIN instead of failing with "database is locked" on a lock upgrade.
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
    thread = factories.make_thread(workspace, "busy")
    run_writers(thread, writers=4)
    assert_log_whole(thread, writers=4)
