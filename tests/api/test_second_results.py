"""A second result for a call that has one is stored and flagged, never dropped (docs/api.md,
"Append — `POST` (agents)"): visible on the integrity page, on the side-effect card and in /metrics;
the ledger keeps the first outcome (or a resolution); the working context gives the model one result
per call, a resolution standing for a result that never came (docs/api.md,
"Working context — `GET /api/v1/threads/{id}/context/`")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as BrowserClient
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from tests import factories
from tests.api.conftest import post_json
from threads.models import SideEffect, Thread
from threads.services.checkpoints import pending_at
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db


def second_results_total(settings: Any) -> float:
    settings.CTXADMIN_METRICS_TOKEN = "t"
    page = BrowserClient().get("/metrics", HTTP_AUTHORIZATION="Bearer t")
    assert page.status_code == 200
    for family in text_string_to_metric_families(page.content.decode()):
        for sample in family.samples:
            if sample.name == "ctxadmin_second_tool_results_total":
                return sample.value
    raise AssertionError("no ctxadmin_second_tool_results counter")


def context(agent: APIClient, thread: Thread) -> dict[str, Any]:
    answer = agent.get(f"/api/v1/threads/{thread.pk}/context/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_a_second_result_is_stored_flagged_and_moves_nothing(
    agent: APIClient, thread: Thread, events_url: str, workspace: Any, settings: Any
) -> None:
    before = second_results_total(settings)
    post_json(
        agent,
        events_url,
        {
            "events": [
                factories.user("Refund order 10086"),
                factories.call("c1", "refund", {"amount": 120}, side_effect_key="r-10086"),
                factories.result("c1", status="timeout", value="no answer from the bank"),
            ]
        },
    )
    # The agent ran the refund again and reports a second result for the same call.
    second = post_json(agent, events_url, factories.result("c1", value="refunded $120"))
    assert second.status_code == 201, second.content
    assert (second.json()["call_seq"], second.json()["duplicate_of"]) == (2, 3)
    assert second_results_total(settings) == before + 1

    # The ledger's record stays the first outcome: unknown, until a person resolves it.
    effect = SideEffect.objects.get(thread=thread)
    assert (effect.status, effect.result_seq) == ("unknown", 3)
    rows = agent.get("/api/v1/side-effects/", {"idempotency_key": "r-10086"}).json()
    assert [r["status"] for r in rows] == ["unknown"]
    assert rows[0]["second_results"] == [{"seq": 4, "status": "succeeded"}]
    assert agent.get("/api/v1/side-effects/", {"idempotency_key": "other"}).json() == []
    # Checkpoints still count the effect as open.
    assert [p["kind"] for p in pending_at(thread=thread, cursor=4)] == ["side_effect"]

    # The model reads one result per call: the first.
    answer = context(agent, thread)
    results = [e for e in answer["events"] if e["kind"] == "tool_result"]
    assert [r["seq"] for r in results] == [3]

    # People see it: the integrity page and the side effect's card.
    person = BrowserClient()
    person.force_login(factories.make_person(workspace, "olga", "operator"))
    integrity = person.get("/integrity/").content.decode()
    assert "Second results" in integrity and "order-10086 · #4" in integrity
    card = person.get("/side-effects/?status=unknown").content.decode()
    assert "second result" in card and "?seq=4" in card

    side_effect_resolve(
        side_effect=effect,
        actor=factories.make_person(workspace, "oscar", "operator"),
        status="succeeded",
        evidence="bank ref 7781",
    )
    effect.refresh_from_db()
    assert effect.status == "succeeded"
    assert pending_at(thread=thread, cursor=5) == []


def test_a_resolution_stands_for_a_result_that_never_came(
    agent: APIClient, thread: Thread, events_url: str, workspace: Any
) -> None:
    post_json(
        agent,
        events_url,
        {
            "events": [
                factories.user("Refund order 10086"),
                factories.assistant("Refunding now."),
                factories.call("c1", "refund", {"amount": 120}, side_effect_key="r-10086"),
                factories.call("c2", "lookup", {"order": "10086"}),
            ]
        },
    )
    # The run died inside both tools; the user wrote again meanwhile.
    post_json(agent, events_url, factories.user("Hello? Did it work?"))
    answer = context(agent, thread)
    assert [(c["tool_call_id"], c["side_effect"]) for c in answer["unanswered_calls"]] == [
        ("c1", True),
        ("c2", False),
    ]
    assert answer["unanswered_calls"][0]["idempotency_key"] == "r-10086"

    effect = SideEffect.objects.get(thread=thread)
    side_effect_resolve(
        side_effect=effect,
        actor=factories.make_person(workspace, "olga", "operator"),
        status="succeeded",
        evidence="bank ref 7781: $120 returned",
    )
    answer = context(agent, thread)
    kinds = [(e["kind"], e.get("tool_call_id")) for e in answer["events"]]
    # Right after the call, a result built from the resolution takes the resolution's place.
    assert kinds == [
        ("message", None),
        ("message", None),
        ("tool_call", "c1"),
        ("tool_result", "c1"),
        ("tool_call", "c2"),
        ("message", None),
    ]
    built = answer["events"][3]
    assert built["status"] == "succeeded" and built["from_resolution"] == 6
    assert built["result"]["evidence"] == "bank ref 7781: $120 returned"
    assert built["call_seq"] == 3
    assert [c["tool_call_id"] for c in answer["unanswered_calls"]] == ["c2"]
    # The dashboard's view of the working context shows it too.
    person = BrowserClient()
    person.force_login(factories.make_person(workspace, "oscar", "operator"))
    page = person.get(f"/threads/{thread.pk}/context/")
    assert page.status_code == 200
    assert "bank ref 7781: $120 returned" in page.content.decode()


def test_a_result_for_a_call_that_never_was_is_still_refused(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    refused = post_json(agent, events_url, factories.result("nobody"))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "no_open_tool_call"
    assert thread.events.count() == 0
