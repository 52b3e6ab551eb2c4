"""The PostgreSQL append path prepares its statements for the call only."""

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
    settings.CTXADMIN_PREPARED_STATEMENTS = prepare
    connection.ensure_connection()
    before = connection.connection.prepare_threshold
    f.append(thread, *[f.user(f"message {n}") for n in range(20)])
    assert connection.connection.prepare_threshold == before
    seqs = Event.objects.filter(thread=thread).order_by("seq").values_list("seq", flat=True)
    assert list(seqs) == list(range(1, 21))


def test_a_large_batch_is_stored_whole_and_chains(thread: Any) -> None:
    """Past COPY_MIN_ROWS the PostgreSQL path streams the rows with COPY."""
    from threads.services.event_rows import COPY_MIN_ROWS
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


def test_the_append_lock_reads_the_thread_as_the_orm_does(thread: Any) -> None:
    """The lock's query builds the thread from raw rows (no converters on PostgreSQL): every
    field must come out as Django's own read gives it."""
    from django.db import transaction

    from threads.domain.events import NewEvent
    from threads.models import Thread
    from threads.services.event_lock import _thread_lock_for_workspace

    f.append(thread, f.user("hello"))
    expected = Thread.objects.get(pk=thread.pk)
    for thread_id in (str(thread.pk), thread.external_id):
        for ids in ([], ["m-1", "m-2"]):
            new = [NewEvent(kind="message", data={}, client_event_id=i) for i in ids]
            with transaction.atomic():
                locked = _thread_lock_for_workspace(thread.workspace, thread_id, new)
            for field in Thread._meta.concrete_fields:
                got, want = getattr(locked, field.attname), getattr(expected, field.attname)
                assert (got, type(got)) == (want, type(want)), field.attname
            if ids:
                assert (locked.replays, locked.log_seq) == (0, 1)  # type: ignore[attr-defined]


def test_a_batch_counted_on_the_helper_thread_counts_as_one_by_one(thread: Any) -> None:
    """Past TOKENS_ASIDE_MIN the batch's tokens are counted on two threads at once."""
    from threads.services.event_tokens import TOKENS_ASIDE_MIN, event_token_count

    bodies: list[dict[str, Any]] = []
    for n in range(TOKENS_ASIDE_MIN):
        bodies += [
            f.user(f"question {n} " + "word " * n),
            f.call(f"c{n}", "lookup", {"n": n, "text": "é" * n}),
            f.result(f"c{n}", value={"answer": list(range(n))}),
        ]
    events = f.append(thread, *bodies)
    assert len(events) > TOKENS_ASIDE_MIN
    for event in Event.objects.filter(thread=thread):
        expected = event_token_count({"kind": event.kind, **event.data}, thread.encoding)
        assert event.token_count == expected, event.seq


def test_counting_started_in_a_guessed_encoding_is_redone_in_the_threads_own(
    thread: Any,
) -> None:
    """The API starts counting before it reads the thread, in the encoding the thread had at its
    last append here (cl100k_base when none): a wrong guess is counted again."""
    from threads.domain.events import normalize_event
    from threads.models import Thread
    from threads.services.event_tokens import TOKENS_ASIDE_MIN, event_token_count
    from threads.services.events import thread_events_append

    Thread.objects.filter(pk=thread.pk).update(encoding="o200k_base")
    text = "Ünïcödé 数据 tokens differ between encodings " * 5
    for round_ in range(2):  # the first guess is wrong, the second right
        batch = [
            normalize_event(
                {**f.user(f"{text} {round_} {n}"), "client_event_id": f"g-{round_}-{n}"},
                max_bytes=1 << 20,
            )
            for n in range(TOKENS_ASIDE_MIN)
        ]
        thread_events_append(workspace=thread.workspace, thread_id=str(thread.pk), new_events=batch)
    stored = list(Event.objects.filter(thread=thread).order_by("seq"))
    assert len(stored) == 2 * TOKENS_ASIDE_MIN
    for event in stored:
        data = {"kind": event.kind, **event.data}
        assert (
            event.token_count
            == event_token_count(data, "o200k_base")
            != event_token_count(data, "cl100k_base")
        )
