"""GET /api/v1/threads/{id}/context/ (docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`")."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import Thread
from threads.services import folding

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}


def _url(thread: Thread, **params: Any) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/v1/threads/{thread.external_id}/context/" + (f"?{query}" if query else "")


def _units(thread: Thread, count: int, *, start: int = 0, words: int = 5) -> None:
    for n in range(start, start + count):
        f.append(
            thread,
            f.user(f"question {n} " + "word " * words),
            f.call(f"c{n}", "lookup", {"n": n}),
            f.result(f"c{n}", value="x " * words),
            f.assistant(f"answer {n}"),
        )


def _assert_guarantees(answer: dict[str, Any]) -> None:
    summary = answer["summary"]
    covered = summary["covered_until"] if summary else 0
    seqs = [e["seq"] for e in answer["events"]]
    assert covered <= answer["read_until"]
    assert seqs == sorted(seqs)
    # No event is both inside the summary's range and in events.
    assert all(covered < s <= answer["read_until"] for s in seqs)
    # Everything in (covered_until, read_until] is either sent or in a trimmed unit.
    trimmed = {s for u in answer["trimmed_units"] for s in range(u["from_seq"], u["to_seq"] + 1)}
    assert set(seqs) | trimmed == set(range(covered + 1, answer["read_until"] + 1))
    assert not set(seqs) & trimmed
    # No orphan: every result sent has its call sent or folded.
    sent = set(seqs)
    for event in answer["events"]:
        if event["kind"] == "tool_result":
            assert event["call_seq"] in sent or event["call_seq"] <= covered
    budget = answer["budget"]
    assert budget["used"] == budget["sections"]["summary"] + budget["sections"]["events"]
    assert budget["sections"]["events"] == sum(e["token_count"] for e in answer["events"])


def test_without_summary_every_event_with_thread_defaults(agent: APIClient, thread: Thread) -> None:
    _units(thread, 2)
    answer = agent.get(_url(thread)).json()
    assert answer["summary"] is None
    assert [e["seq"] for e in answer["events"]] == list(range(1, 9))
    assert answer["read_until"] == 8 and answer["trimmed_units"] == []
    budget = answer["budget"]
    assert (budget["window"], budget["reserved_output"], budget["safety_margin"]) == (
        thread.context_window,
        thread.reserved_output,
        thread.safety_margin,
    )
    assert budget["available"] == (
        thread.context_window
        - thread.fixed_tokens
        - thread.reserved_output
        - thread.reasoning_reserve
        - thread.safety_margin
    )
    assert answer["needs_fold"] is False
    assert {"seq", "kind", "hash", "token_count", "created_at"} <= set(answer["events"][0])
    _assert_guarantees(answer)


def test_after_a_fold_the_summary_and_only_later_events(agent: APIClient, thread: Thread) -> None:
    _units(thread, 2)
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None
    _units(thread, 1, start=2)
    answer = agent.get(_url(thread)).json()
    summary = answer["summary"]
    assert summary["version"] == version.version and summary["covered_until"] == 8
    assert summary["checksum"] == version.checksum and summary["content"] == version.content
    assert summary["rendered"] == version.rendered
    assert [e["seq"] for e in answer["events"]] == [9, 10, 11, 12]
    assert answer["budget"]["sections"]["summary"] == version.tokens
    _assert_guarantees(answer)


def test_query_parameters_override_the_budget(agent: APIClient, thread: Thread) -> None:
    _units(thread, 1)
    budget = agent.get(
        _url(
            thread,
            window=9000,
            fixed_tokens=1000,
            reserved_output=500,
            reasoning_reserve=250,
            safety_margin=100,
        )
    ).json()["budget"]
    assert budget == {
        **budget,
        "window": 9000,
        "fixed": 1000,
        "reserved_output": 500,
        "reasoning_reserve": 250,
        "safety_margin": 100,
        "available": 7150,
    }


def test_bad_query_parameter_is_a_validation_error(agent: APIClient, thread: Thread) -> None:
    response = agent.get(_url(thread, window=-5))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert "window" in response.json()["error"]["fields"]


def test_small_window_trims_whole_closed_units_oldest_first(
    agent: APIClient, thread: Thread
) -> None:
    _units(thread, 6, words=40)
    full = agent.get(_url(thread)).json()
    unit_tokens = sum(e["token_count"] for e in full["events"][:4])
    window = full["budget"]["used"] - 2 * unit_tokens + 10
    answer = agent.get(_url(thread, window=window, reserved_output=0, safety_margin=0)).json()
    assert answer["trimmed_units"], answer["budget"]
    assert answer["trimmed_units"][0]["from_seq"] == 1
    assert answer["budget"]["used"] <= answer["budget"]["available"]
    assert answer["needs_fold"] is True
    _assert_guarantees(answer)


def test_pinned_content_over_budget_is_422_with_numbers(agent: APIClient, thread: Thread) -> None:
    f.append(thread, f.user("refund " * 50), f.call("r", "refund", {}, "refund-1"))
    response = agent.get(_url(thread, window=60, reserved_output=0, safety_margin=0))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "budget_too_small"
    assert error["fields"]["available"] == 60
    assert error["fields"]["pinned"] > 60
    assert str(error["fields"]["pinned"]) in error["message"]


def test_another_workspaces_thread_is_404(other_agent: APIClient, thread: Thread) -> None:
    assert other_agent.get(_url(thread)).status_code == 404


def test_people_of_the_workspace_may_read(operator_client: APIClient, thread: Thread) -> None:
    _units(thread, 1)
    assert operator_client.get(_url(thread)).status_code == 200


def test_reads_only_events_after_the_summary_in_constant_queries(
    agent: APIClient, workspace: Any
) -> None:
    def count(thread: Thread) -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            answer = agent.get(_url(thread)).json()
        return len(queries), len(answer["events"])

    short = f.make_thread(workspace, "short")
    long = f.make_thread(workspace, "long")
    _units(short, 2)
    _units(long, 30)
    folding.fold_run(thread_id=long.pk, trigger=MANUAL)
    _units(long, 2, start=30)
    count(short)  # warm-up: the first request of a key records its last use
    count(long)  # and an agent's first read of a thread, its read (run status)
    short_queries, short_events = count(short)
    long_queries, long_events = count(long)
    assert short_events == long_events == 8
    assert long_queries == short_queries  # the summary comes with the head, in one query


def test_the_selector_reads_head_summary_and_events_in_two_queries(
    thread: Thread, django_assert_num_queries: Any
) -> None:
    from threads.selectors import working_context

    _units(thread, 3)
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    _units(thread, 1, start=3)
    with django_assert_num_queries(2):
        answer = working_context(thread=thread, overrides={})
    assert answer["summary"]["covered_until"] == 12 and len(answer["events"]) == 4


def test_snapshot_bounds_events_by_read_until(thread: Thread) -> None:
    from threads.selectors import working_context

    _units(thread, 2)
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    stale = Thread.objects.get(pk=thread.pk)
    _units(thread, 1, start=2)  # appended after the caller loaded its thread object
    answer = working_context(thread=stale, overrides={})
    assert answer["read_until"] == 12  # read from the row, not the stale object
    _assert_guarantees(answer)
