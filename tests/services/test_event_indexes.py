"""The event table keeps only what its reads probe (docs/scale.md, "What one database holds",
migration `0019_event_index_diet`): the tool-call index holds the events with a tool call id, every
read by a tool call id reaches it, the thread has no index of its own beside `(thread, seq)`, and
only an event with a `client_event_id` stores the digest its repeats are compared with."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests import factories as f
from tests.views.test_thread_list_indexes import plan
from threads.domain.errors import IdempotencyConflict
from threads.models import Event, SideEffect, Thread
from threads.selectors.events import closing_events_for_calls
from threads.selectors.metrics import unknown_side_effect_spans
from threads.selectors.queues import side_effect_rows
from threads.services.event_lookups import _open_calls
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db


def _thread_with_calls(thread: Thread) -> Thread:
    for n in range(30):
        f.append(
            thread,
            f.user(f"question {n}"),
            f.call(f"c{n}", "refund", {"order": n}, side_effect_key=f"refund-{n}"),
            f.result(f"c{n}", "timeout" if n % 3 == 0 else "succeeded", {"n": n}),
            f.assistant(f"answer {n}"),
        )
    effect = SideEffect.objects.get(thread=thread, tool_call_id="c0")
    side_effect_resolve(side_effect=effect, actor=None, status="failed", evidence="the ledger")
    return thread


def _reads_the_index(statements: list[dict[str, Any]], params: Any = ()) -> None:
    """The one captured statement that reads events by tool call id reads the index."""
    (sql,) = [s["sql"] for s in statements if "tool_call_id" in s["sql"] and "WHERE" in s["sql"]]
    assert "event_tool_call" in plan(sql, "seqscan", params=params)


def test_open_calls_are_read_off_the_tool_call_index(thread: Thread) -> None:
    _thread_with_calls(thread)
    f.append(thread, f.call("c99", "lookup"))
    with CaptureQueriesContext(connection) as seen:
        found = _open_calls(thread, {"c99", "c3"})
    assert found.open == {"c99": [thread.last_seq]}
    # c3 is answered: what a second result for it would bind to, and it has a side effect.
    assert list(found.answered) == ["c3"]
    assert found.side_effects == {found.answered["c3"][0]}
    # The raw statement of PostgreSQL is logged with its placeholders.
    params = (thread.pk, "c3", "c99") if connection.vendor == "postgresql" else ()
    _reads_the_index(seen.captured_queries, params)


def test_a_tool_results_open_call_is_read_off_the_tool_call_index(thread: Thread) -> None:
    """One id, as a tool result's append asks: an equality (the statement the server keeps
    one plan of), off the same index."""
    _thread_with_calls(thread)
    f.append(thread, f.call("c99", "lookup"))
    with CaptureQueriesContext(connection) as seen:
        found = _open_calls(thread, {"c99"})
    assert found.open == {"c99": [thread.last_seq]}
    assert found.answered == {}
    params = (thread.pk, "c99") if connection.vendor == "postgresql" else ()
    _reads_the_index(seen.captured_queries, params)


def test_many_open_calls_are_read_off_the_tool_call_index_in_one_array(thread: Thread) -> None:
    """Past IN_LIST_MAX ids (a large batch of results) the ids go as one array: the same
    index, the same answer."""
    from threads.selectors.statements import IN_LIST_MAX

    _thread_with_calls(thread)
    ids = {f"c{n}" for n in range(IN_LIST_MAX + 2)}
    with CaptureQueriesContext(connection) as seen:
        found = _open_calls(thread, ids)
    assert found.open == {}
    assert set(found.answered) == ids
    params = (thread.pk, sorted(ids)) if connection.vendor == "postgresql" else ()
    _reads_the_index(seen.captured_queries, params)


def test_results_and_resolutions_of_calls_are_read_off_the_tool_call_index(
    thread: Thread,
) -> None:
    _thread_with_calls(thread)
    with CaptureQueriesContext(connection) as seen:
        found = closing_events_for_calls(thread=thread, call_ids={"c0", "c1"}, after=0)
    assert [kind for _, kind, _ in found] == [
        "tool_result",
        "tool_result",
        "side_effect_resolution",
    ]
    _reads_the_index(seen.captured_queries)


def test_side_effect_resolutions_are_read_off_the_tool_call_index(thread: Thread) -> None:
    _thread_with_calls(thread)
    effects = list(SideEffect.objects.filter(thread=thread, tool_call_id__in=["c0", "c3"]))
    with CaptureQueriesContext(connection) as seen:
        rows = side_effect_rows(effects)
    assert {r["tool_call_id"]: len(r["resolutions"]) for r in rows} == {"c0": 1, "c3": 0}
    _reads_the_index(seen.captured_queries)


def test_unknown_spans_find_their_resolution_off_the_tool_call_index(thread: Thread) -> None:
    _thread_with_calls(thread)
    since = timezone.now() - timedelta(hours=1)
    with CaptureQueriesContext(connection) as seen:
        spans = unknown_side_effect_spans(workspace_ids=[thread.workspace_id], since=since)
    assert len(spans) == 10  # c0, c3, … c27 timed out
    assert sum(1 for _, left in spans if left is not None) == 1  # c0 was resolved
    _reads_the_index(seen.captured_queries)


def test_the_thread_has_no_index_of_its_own_beside_its_seq_constraint() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Event._meta.db_table)
    leading = {
        name: c["columns"]
        for name, c in constraints.items()
        if (c["index"] or c["unique"]) and c["columns"][:1] == ["thread_id"]
    }
    assert ["thread_id"] not in leading.values()
    assert ["thread_id", "seq"] in leading.values()
    assert leading["event_tool_call"] == ["thread_id", "tool_call_id", "seq"]


def test_only_an_event_with_a_client_id_keeps_its_request_digest(thread: Thread) -> None:
    keyed, plain = f.append(thread, {**f.user("keyed"), "client_event_id": "m-1"}, f.user("plain"))
    stored = dict(Event.objects.filter(thread=thread).values_list("seq", "request_digest"))
    assert len(stored[keyed.seq]) == 64
    assert stored[plain.seq] == ""
    # The digest still tells a repeat from a different body under the same id.
    (again,) = f.append(thread, {**f.user("keyed"), "client_event_id": "m-1"})
    assert again.seq == keyed.seq
    with pytest.raises(IdempotencyConflict):
        f.append(thread, {**f.user("another body"), "client_event_id": "m-1"})
