"""Retraction and reset over the API: appended and checked (docs/api.md,
"Append — `POST` (agents)"), and how they change the working context (docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`")."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.conftest import log_state, post_json
from threads.models import SideEffect, SideEffectStatus, Thread
from threads.services import folding
from threads.services.approvals import approval_decide
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}


def _context(agent: APIClient, thread: Thread) -> dict[str, Any]:
    answer = agent.get(f"/api/v1/threads/{thread.external_id}/context/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def _seqs(answer: dict[str, Any]) -> list[int]:
    return [e["seq"] for e in answer["events"]]


def retraction(seq: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "retraction", "retracts": seq, **extra}


def test_a_retraction_is_appended_and_counts_no_tokens(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    f.append(thread, f.user("hello"), f.assistant("hi"))
    answer = post_json(agent, events_url, retraction(2, client_event_id="pop-1"))
    assert answer.status_code == 201, answer.content
    event = answer.json()
    assert (event["seq"], event["kind"], event["retracts"]) == (3, "retraction", 2)
    assert event["token_count"] == 0
    # Replayed by its client_event_id like every event.
    again = post_json(agent, events_url, retraction(2, client_event_id="pop-1"))
    assert again.status_code == 200 and again.json()["replayed"] is True
    reset = post_json(agent, events_url, {"kind": "reset"})
    assert reset.status_code == 201 and reset.json()["token_count"] == 0


@pytest.mark.parametrize(
    ("bodies", "target", "why"),
    [
        ([], 99, "earlier event"),  # no such event
        ([], 3, "earlier event"),  # its own seq
        ([retraction(2)], 3, "is a retraction event"),  # a marker
        ([{"kind": "reset"}], 3, "is a reset event"),  # a marker
        ([retraction(2)], 2, "already retracted by #3"),
    ],
)
def test_invalid_retraction_targets_are_422(
    agent: APIClient,
    thread: Thread,
    events_url: str,
    bodies: list[dict[str, Any]],
    target: int,
    why: str,
) -> None:
    f.append(thread, f.user("hello"), f.assistant("hi"), *bodies)
    before = log_state(thread)
    answer = post_json(agent, events_url, retraction(target))
    assert answer.status_code == 422, answer.content
    error = answer.json()["error"]
    assert error["code"] == "invalid_retraction"
    assert why in error["fields"]["retracts"]
    assert log_state(thread) == before


def test_a_server_event_cannot_be_retracted(
    agent: APIClient, thread: Thread, events_url: str, workspace: Any
) -> None:
    request = {"kind": "approval_request", "action": "refund", "arguments": {}}
    f.append(thread, f.user("refund?"), request)
    reviewer = f.make_person(workspace, "rita", "reviewer")
    approval_decide(
        approval=thread.approvals.get(), actor=reviewer, decision="approve", reason="ok"
    )
    thread.refresh_from_db()
    answer = post_json(agent, events_url, retraction(thread.last_seq))
    assert answer.status_code == 422
    assert "approval_decision" in answer.json()["error"]["fields"]["retracts"]


def test_a_batch_may_retract_its_own_events_but_not_twice(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    ok = post_json(agent, events_url, {"events": [f.user("typo"), retraction(1), f.user("fixed")]})
    assert ok.status_code == 201, ok.content
    before = log_state(thread)
    twice = post_json(agent, events_url, {"events": [f.user("x"), retraction(4), retraction(4)]})
    assert twice.status_code == 422
    assert twice.json()["error"]["message"].startswith("events[2]: ")
    assert log_state(thread) == before  # all or nothing


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (3, 2, "#2 is already retracted with its tool_result #3 by #4"),
        (2, 3, "#3 is already retracted with its tool_call #2 by #4"),
    ],
)
def test_a_tool_call_and_its_result_are_retracted_once(
    agent: APIClient, thread: Thread, events_url: str, first: int, second: int, why: str
) -> None:
    """Retracting either side takes the pair out (docs/api.md,
    "Working context — `GET /api/v1/threads/{id}/context/`"), so the other side is already
    retracted: a second retraction would change nothing and is refused."""
    f.append(thread, f.user("look up order 1"), f.call("c1", "lookup", {}), f.result("c1"))
    assert post_json(agent, events_url, retraction(first)).status_code == 201  # 4
    before = log_state(thread)
    answer = post_json(agent, events_url, retraction(second))
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"]["fields"]["retracts"] == why
    assert log_state(thread) == before


def test_a_batch_may_not_retract_both_sides_of_its_own_pair(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    f.append(thread, f.user("look up order 1"), f.call("c1", "lookup", {}))  # 1, 2
    before = log_state(thread)
    batch = [f.result("c1"), retraction(3), retraction(2)]  # 3, 4, 5
    answer = post_json(agent, events_url, {"events": batch})
    assert answer.status_code == 422, answer.content
    error = answer.json()["error"]
    assert error["message"].startswith("events[2]: ")
    assert error["fields"]["retracts"] == "#2 is already retracted with its tool_result #3 by #4"
    assert log_state(thread) == before
    # Another call with the same tool_call_id is an item of its own.
    again = [f.result("c1"), retraction(3), f.call("c1", "lookup", {}), retraction(5)]
    assert post_json(agent, events_url, {"events": again}).status_code == 201


def test_a_reset_takes_no_fields(agent: APIClient, thread: Thread, events_url: str) -> None:
    answer = post_json(agent, events_url, {"kind": "reset", "retracts": 1})
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"retracts": "unknown field for a reset event"}
    bad = post_json(agent, events_url, {"kind": "retraction", "retracts": True})
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"retracts": "must be a positive seq number"}


def test_context_after_a_pop_leaves_out_the_item_and_both_sides_of_a_call(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    f.append(
        thread,
        f.user("look up order 1"),  # 1
        f.call("c1", "lookup", {"n": 1}),  # 2
        f.result("c1", value="found"),  # 3
        f.assistant("it is found"),  # 4
        f.user("and order 2"),  # 5
    )
    assert post_json(agent, events_url, retraction(5)).status_code == 201  # 6
    answer = _context(agent, thread)
    assert _seqs(answer) == [1, 2, 3, 4]
    assert answer["reset_at"] is None
    assert post_json(agent, events_url, retraction(3)).status_code == 201  # 7: the result
    answer = _context(agent, thread)
    assert _seqs(answer) == [1, 4]  # the call leaves with its result
    assert answer["budget"]["sections"]["events"] == sum(e["token_count"] for e in answer["events"])


def test_context_after_a_reset_leaves_out_the_summary_and_earlier_events(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    f.append(thread, f.user("old question"), f.assistant("old answer"))
    folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert _context(agent, thread)["summary"]["covered_until"] == 2
    f.append(thread, f.user("newer"), {"kind": "reset"}, f.user("fresh start"))
    answer = _context(agent, thread)
    assert answer["summary"] is None and answer["reset_at"] == 4
    assert _seqs(answer) == [5]
    assert answer["budget"]["sections"]["summary"] == 0


def test_side_effects_survive_a_reset_and_a_pop(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    f.append(
        thread,
        f.user("refund"),
        f.call("c1", "refund", {"amount": 5}, side_effect_key="r-1"),
        f.result("c1", status="timeout"),
    )
    assert post_json(agent, events_url, retraction(2)).status_code == 201
    assert post_json(agent, events_url, {"kind": "reset"}).status_code == 201
    effect = SideEffect.objects.get(thread=thread)
    assert effect.status == SideEffectStatus.UNKNOWN and effect.call_seq == 2
    assert _seqs(_context(agent, thread)) == []


def test_the_chain_verifies_and_exports_with_both_kinds(
    agent: APIClient, thread: Thread, events_url: str, tmp_path: Path
) -> None:
    f.append(thread, f.user("a"), f.assistant("b"))
    post_json(agent, events_url, {"events": [retraction(2), {"kind": "reset"}, f.user("c")]})
    thread.refresh_from_db()
    verdict = integrity_check(thread=thread, full=True)
    assert verdict.ok and verdict.verified_until == 5
    path = tmp_path / "thread.jsonl"
    call_command("export_thread", thread.external_id, str(path), stdout=io.StringIO())
    lines = path.read_text("utf-8").splitlines()
    assert '"retracts":2' in lines[3] and '"kind":"reset"' in lines[4]
    out = io.StringIO()
    call_command("verify_export", str(path), stdout=out, stderr=io.StringIO())
    assert "5" in out.getvalue()


def test_the_schema_names_both_kinds_and_the_new_fields(agent: APIClient) -> None:
    schema = agent.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]
    # One variant per kind, each naming its kind and its own fields.
    variants = {
        variant["properties"]["kind"]["enum"][0]: variant["properties"]
        for variant in components["EventInput"]["oneOf"]
        if "properties" in variant
    }
    assert {"retraction", "reset"} <= set(variants)
    assert variants["retraction"]["retracts"]["type"] == "integer"
    assert "reset_at" in components["WorkingContext"]["properties"]
