"""A thread's tool definitions: PUT/GET /api/v1/threads/{id}/tools/ (docs/api.md,
"Tool definitions — `PUT` and `GET /api/v1/threads/{id}/tools/`") and their place in the working
context's budget (docs/pipeline.md, "Tool definitions and repeated content")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from django.urls import path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests import factories as f
from threads.api import context as context_api
from threads.api import tools as tools_api
from threads.domain.canonical import canonical_text
from threads.domain.tokens import get_encoding
from threads.models import AuditEntry, Thread, ThreadTool
from threads.selectors import threads_in
from threads.services.triggers import capacity_trigger

pytestmark = pytest.mark.django_db

CHAT = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Look an order up by its id",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "the order's id"}},
            "required": ["order_id"],
        },
    },
}
RESPONSES = {
    "type": "function",
    "name": "search_flights",
    "description": "Search flights between two airports on a date",
    "parameters": {
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "destination": {"type": "string"},
            "date": {"type": "string", "format": "date"},
        },
    },
}
ANTHROPIC = {
    "name": "refund",
    "description": "Refund",
    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}
THREE = [CHAT, RESPONSES, ANTHROPIC]


def _url(thread: Thread) -> str:
    return f"/api/v1/threads/{thread.external_id}/tools/"


def put(client: APIClient, thread: Thread, body: Any) -> Any:
    return client.put(_url(thread), data=json.dumps(body), content_type="application/json")


def tiktoken_count(definition: Any, encoding: str = "cl100k_base") -> int:
    return len(get_encoding(encoding).encode(canonical_text(definition)))


def audits(thread: Thread) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(thread=thread, action="thread.tools_set").order_by("pk"))


def test_put_and_get_round_trip_in_the_three_shapes(agent: APIClient, thread: Thread) -> None:
    response = put(agent, thread, THREE)
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["changed"] is True
    listed = agent.get(_url(thread)).json()
    assert listed == {k: v for k, v in answer.items() if k != "changed"}
    assert [t["name"] for t in listed["tools"]] == ["get_order", "search_flights", "refund"]
    assert [t["position"] for t in listed["tools"]] == [0, 1, 2]
    assert [t["definition"] for t in listed["tools"]] == THREE
    counts = [tiktoken_count(d) for d in THREE]
    assert [t["token_count"] for t in listed["tools"]] == counts
    assert listed["token_total"] == sum(counts) and listed["count"] == 3
    assert listed["encoding"] == "cl100k_base"
    thread.refresh_from_db()
    assert thread.tool_tokens == sum(counts)


def test_counts_use_the_threads_encoding(agent: APIClient, workspace: Any) -> None:
    thread = f.make_thread(workspace, external_id="o200k", encoding="o200k_base")
    tools = put(agent, thread, [RESPONSES]).json()["tools"]
    assert tools[0]["token_count"] == tiktoken_count(RESPONSES, "o200k_base")


def test_a_put_replaces_the_whole_set(agent: APIClient, thread: Thread) -> None:
    put(agent, thread, THREE)
    answer = put(agent, thread, {"tools": [ANTHROPIC]}).json()
    assert answer["changed"] is True and [t["name"] for t in answer["tools"]] == ["refund"]
    assert list(ThreadTool.objects.filter(thread=thread).values_list("name", flat=True)) == [
        "refund"
    ]
    thread.refresh_from_db()
    assert thread.tool_tokens == tiktoken_count(ANTHROPIC)
    cleared = put(agent, thread, []).json()
    assert cleared["tools"] == [] and cleared["token_total"] == 0
    thread.refresh_from_db()
    assert thread.tool_tokens == 0 and not ThreadTool.objects.filter(thread=thread).exists()
    entries = audits(thread)
    assert [e.after for e in entries] == [
        {"tools": ["get_order", "search_flights", "refund"], "token_total": answer_total(THREE)},
        {"tools": ["refund"], "token_total": tiktoken_count(ANTHROPIC)},
        {"tools": [], "token_total": 0},
    ]
    assert entries[1].before == entries[0].after and entries[0].before == {
        "tools": [],
        "token_total": 0,
    }
    assert entries[0].actor_label.startswith("api key ")


def answer_total(tools: list[Any]) -> int:
    return sum(tiktoken_count(d) for d in tools)


def test_the_same_list_twice_changes_nothing(agent: APIClient, thread: Thread) -> None:
    first = put(agent, thread, THREE).json()
    ids = list(ThreadTool.objects.filter(thread=thread).values_list("pk", flat=True))
    # The same definitions with their keys in another order are the same set.
    shuffled = [dict(reversed(list(d.items()))) for d in THREE]
    again = put(agent, thread, shuffled)
    assert again.status_code == 200 and again.json()["changed"] is False
    assert again.json()["tools"] == first["tools"]
    assert list(ThreadTool.objects.filter(thread=thread).values_list("pk", flat=True)) == ids
    assert len(audits(thread)) == 1
    # Another order is another set.
    assert put(agent, thread, THREE[::-1]).json()["changed"] is True
    assert len(audits(thread)) == 2


def test_bad_definitions_are_named_by_index_and_nothing_is_stored(
    agent: APIClient, thread: Thread
) -> None:
    put(agent, thread, [ANTHROPIC])
    response = put(
        agent,
        thread,
        [
            CHAT,
            {"type": "function", "description": "no name"},
            "refund",
            {"type": "function", "function": {"name": "get_order"}},
            {"type": "function", "function": "get_order"},
            {"name": "   "},
        ],
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert set(error["fields"]) == {"tools[1]", "tools[2]", "tools[3]", "tools[4]", "tools[5]"}
    assert "name" in error["fields"]["tools[1]"]
    assert "tools[0]" in error["fields"]["tools[3]"]  # a name used twice names the first
    assert list(ThreadTool.objects.filter(thread=thread).values_list("name", flat=True)) == [
        "refund"
    ]
    assert len(audits(thread)) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "refund"}, "tools"),
        ("refund", "tools"),
        ([{"name": f"tool_{n}"} for n in range(257)], "tools"),
        ({"tools": [ANTHROPIC], "extra": 1}, "extra"),
    ],
)
def test_a_body_that_is_not_a_list_of_tools(
    agent: APIClient, thread: Thread, body: Any, field: str
) -> None:
    response = put(agent, thread, body)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_256_tools_are_accepted(agent: APIClient, thread: Thread) -> None:
    response = put(agent, thread, [{"name": f"tool_{n}"} for n in range(256)])
    assert response.status_code == 200 and response.json()["count"] == 256


@override_settings(CTXADMIN_MAX_EVENT_BYTES=300)
def test_a_definition_over_the_size_limit_is_413(agent: APIClient, thread: Thread) -> None:
    big = {"name": "big", "description": "x" * 400, "input_schema": {}}
    response = put(agent, thread, [ANTHROPIC, big])
    assert response.status_code == 413
    assert "tools[1]" in response.json()["error"]["fields"]
    assert not ThreadTool.objects.filter(thread=thread).exists()


def test_who_may_read_and_write(
    agent: APIClient,
    other_agent: APIClient,
    operator_client: APIClient,
    thread: Thread,
) -> None:
    put(agent, thread, THREE)
    # Another workspace: 404 for reading and writing alike.
    assert other_agent.get(_url(thread)).status_code == 404
    assert put(other_agent, thread, [ANTHROPIC]).status_code == 404
    # People read; writing the set is agents' work.
    read = operator_client.get(_url(thread))
    assert read.status_code == 200 and read.json()["count"] == 3
    csrf = operator_client.get("/threads/").cookies.get("csrftoken")
    response = operator_client.put(
        _url(thread),
        data=json.dumps([ANTHROPIC]),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=csrf.value if csrf else "",
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert ThreadTool.objects.filter(thread=thread).count() == 3
    assert agent.get("/api/v1/threads/nope/tools/").status_code == 404


def test_a_person_of_another_workspace_gets_404(agent: APIClient, thread: Thread) -> None:
    other, _ = f.make_workspace("globex")
    person = APIClient()
    person.force_login(f.make_person(other, "outsider", "admin"))
    assert person.get(_url(thread)).status_code == 404
    assert put(person, thread, [ANTHROPIC]).status_code == 404


def _context(agent: APIClient, thread: Thread, **params: Any) -> dict[str, Any]:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    response = agent.get(f"/api/v1/threads/{thread.external_id}/context/?{query}")
    assert response.status_code == 200, response.json()
    return response.json()["budget"]


def test_the_tools_are_the_fixed_input_unless_fixed_tokens_is_given(
    agent: APIClient, thread: Thread, workspace: Any
) -> None:
    f.append(thread, f.user("hello"))
    before = _context(agent, thread)
    assert before["fixed"] == 0 and "tools" not in before["sections"]
    total = put(agent, thread, THREE).json()["token_total"]
    budget = _context(agent, thread)
    assert budget["fixed"] == total and budget["sections"]["tools"] == total
    assert budget["available"] == before["available"] - total
    assert budget["used"] == budget["sections"]["summary"] + budget["sections"]["events"]
    # The request's fixed_tokens wins, 0 included: the agent counted itself.
    overridden = _context(agent, thread, fixed_tokens=123)
    assert overridden["fixed"] == 123 and overridden["sections"]["tools"] == total
    assert overridden["available"] == before["available"] - 123
    assert _context(agent, thread, fixed_tokens=0)["fixed"] == 0
    # So does the thread's own fixed_tokens.
    counted = f.make_thread(workspace, external_id="counted", fixed_tokens=900)
    f.append(counted, f.user("hello"))
    put(agent, counted, THREE)
    budget = _context(agent, counted)
    assert budget["fixed"] == 900 and budget["sections"]["tools"] == total


def test_a_thread_without_tools_answers_as_before(agent: APIClient, thread: Thread) -> None:
    f.append(thread, f.user("hello"))
    put(agent, thread, THREE)
    put(agent, thread, [])
    budget = _context(agent, thread)
    assert set(budget["sections"]) == {"summary", "events"} and budget["fixed"] == 0


def test_the_tools_count_towards_the_capacity_trigger(agent: APIClient, workspace: Any) -> None:
    """Tools that leave little room put the history over the high watermark: in the context
    answer, in the fold trigger and in the thread list's over-budget filter alike."""
    big = [{"name": f"tool_{n}", "description": "word " * 150} for n in range(5)]
    message = f.user("word " * 150)
    probe = f.make_thread(workspace, external_id="probe")
    f.append(probe, message)
    history = _context(agent, probe)["used"]
    tools = put(agent, probe, big).json()["token_total"]
    # Room for the history, but less than history / high watermark.
    thread = f.make_thread(
        workspace,
        external_id="tight",
        context_window=tools + int(history * 1.1),
        reserved_output=0,
        safety_margin=0,
    )
    f.append(thread, dict(message))
    assert capacity_trigger(thread=Thread.objects.get(pk=thread.pk)) is None
    assert not threads_in(workspace_ids=[workspace.pk], over_budget=True).filter(pk=thread.pk)
    put(agent, thread, big)
    answer = agent.get(f"/api/v1/threads/{thread.external_id}/context/").json()
    assert answer["budget"]["available"] == int(history * 1.1) and answer["needs_fold"] is True
    assert capacity_trigger(thread=Thread.objects.get(pk=thread.pk)) is not None
    assert threads_in(workspace_ids=[workspace.pk], over_budget=True).filter(pk=thread.pk)


def test_schema_of_the_tools_route_generates_without_warnings() -> None:
    GENERATOR_STATS.reset()
    routes = [
        path("api/v1/threads/<str:id>/tools/", tools_api.ThreadToolsApi.as_view()),
        path("api/v1/threads/<str:id>/context/", context_api.ThreadContextApi.as_view()),
    ]
    schema = SchemaGenerator(patterns=routes).get_schema(request=None, public=True)
    assert not GENERATOR_STATS._warn_cache, dict(GENERATOR_STATS._warn_cache)
    assert not GENERATOR_STATS._error_cache, dict(GENERATOR_STATS._error_cache)
    tools = schema["paths"]["/api/v1/threads/{id}/tools/"]
    assert set(tools) == {"get", "put"}
    assert {"200", "400", "403", "404", "413"} <= set(tools["put"]["responses"])
    listed = schema["components"]["schemas"]["ThreadTools"]["properties"]
    assert {"tools", "count", "token_total", "encoding"} <= set(listed)
    tool = schema["components"]["schemas"]["ThreadTool"]["properties"]
    assert {"name", "token_count", "definition", "position"} <= set(tool)
