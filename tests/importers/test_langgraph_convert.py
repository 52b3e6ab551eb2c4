"""The langgraph-postgres converter on decoded store rows (no PostgreSQL needed): how events
are named (as the live saver names them), so that importing a store again appends only what is
new."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, message_to_dict
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from integrations.langgraph_checkpointer.domain.messages import (
    message_digest,
    message_event_bodies,
    message_form,
)
from integrations.trace_imports.readers.langgraph_store import blob_decoder
from integrations.trace_imports.services.conversations import conversations_import
from threads.models import Event, Workspace

pytestmark = pytest.mark.django_db

HUMAN = "langchain_core.messages.human.HumanMessage"
AI = "langchain_core.messages.ai.AIMessage"
TOOL = "langchain_core.messages.tool.ToolMessage"


def _ai(message_id: str, *call_ids: str) -> dict[str, Any]:
    calls = [{"name": "lookup", "args": {"n": n}, "id": c} for n, c in enumerate(call_ids)]
    return {"__type__": AI, "id": message_id, "content": "", "tool_calls": calls}


def _tool(call_id: str, content: str, message_id: str | None = None) -> dict[str, Any]:
    return {"__type__": TOOL, "id": message_id, "tool_call_id": call_id, "content": content}


def _import(workspace: Workspace, conversation: dict[str, Any]) -> list[Event]:
    (result,) = conversations_import(
        workspace=workspace, conversations=[conversation], fmt="langgraph-postgres"
    )
    return list(Event.objects.filter(thread=result.thread).order_by("seq"))


def test_results_named_by_langgraph_after_the_step_come_once_bound_to_their_calls(
    workspace: Workspace,
) -> None:
    human = {"__type__": HUMAN, "id": "h1", "content": "look up two things"}
    # First import: the head holds the calls; one result is a pending write without an id,
    # which the store's reader leaves for later (read_postgres).
    paused = {"id": "t", "messages": [human, _ai("a1", "c1", "c2")]}
    first = _import(workspace, paused)
    assert [(e.kind, e.client_event_id) for e in first] == [
        ("message", "h1"),
        ("message", "a1"),
        ("tool_call", "a1/call/c1"),
        ("tool_call", "a1/call/c2"),
    ]
    # Later: LangGraph completed the step and named the ToolMessages.
    done = {
        "id": "t",
        "messages": [
            human,
            _ai("a1", "c1", "c2"),
            _tool("c1", "one", "x9"),
            _tool("c2", "two", "x10"),
        ],
    }
    second = _import(workspace, done)
    assert [e.seq for e in second[: len(first)]] == [e.seq for e in first]
    assert [(e.kind, e.client_event_id) for e in second[len(first) :]] == [
        ("tool_result", "x9"),
        ("tool_result", "x10"),
    ]
    results = [e for e in second if e.kind == "tool_result"]
    calls = {e.data["tool_call_id"]: e.seq for e in second if e.kind == "tool_call"}
    assert [r.data["call_seq"] for r in results] == [calls["c1"], calls["c2"]]
    assert _import(workspace, done) == second


def test_a_tool_call_id_repeated_in_one_message_is_two_calls(workspace: Workspace) -> None:
    conversation = {
        "id": "dup",
        "messages": [
            {"__type__": HUMAN, "id": "h1", "content": "twice"},
            _ai("a1", "same", "same"),
            _tool("same", "first", "r1"),
            _tool("same", "second", "r2"),
        ],
    }
    events = _import(workspace, conversation)
    assert [e.kind for e in events] == [
        "message",
        "message",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
    ]
    assert len({e.client_event_id for e in events}) == len(events)
    assert sorted(e.data["call_seq"] for e in events if e.kind == "tool_result") == [3, 4]
    assert _import(workspace, conversation) == events


def test_an_interrupt_becomes_an_open_question_named_by_its_id(workspace: Workspace) -> None:
    conversation = {
        "id": "ask",
        "messages": [{"__type__": HUMAN, "id": "h1", "content": "refund order 7"}],
        "interrupts": [
            {"__type__": "langgraph.types.Interrupt", "id": "i1", "value": "Approve the refund?"},
            {"__type__": "langgraph.types.Interrupt", "id": "i2", "value": {"amount": 120}},
        ],
    }
    events = _import(workspace, conversation)
    questions = [e for e in events if e.kind == "annotation"]
    assert [q.data["type"] for q in questions] == ["question", "question"]
    assert questions[0].data["payload"]["text"] == "Approve the refund?"
    assert questions[1].data["payload"]["text"] == '{"amount":120}'
    assert [q.client_event_id for q in questions] == ["lg:interrupt:i1", "lg:interrupt:i2"]


def test_a_stored_message_reads_back_as_the_form_the_saver_sends() -> None:
    messages = [
        HumanMessage("refund order 7", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "refund", "args": {"order": 7}, "id": "c1", "type": "tool_call"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 5, "total_tokens": 8},
        ),
        ToolMessage("refunded", tool_call_id="c1", id="t1", status="error"),
    ]
    stored = blob_decoder()(*JsonPlusSerializer().dumps_typed(messages))
    # What the importer reads is what the live saver sends (message_to_dict): same digest,
    # same events under the same names.
    assert [message_form(item) for item in stored] == [message_to_dict(m) for m in messages]
    assert [message_digest(message_form(item) or {}) for item in stored] == [
        message_digest(message_to_dict(m)) for m in messages
    ]


def test_a_tool_call_id_repeated_in_one_message_gets_names_and_keys_of_its_own() -> None:
    form = {
        "type": "ai",
        "data": {
            "id": "a1",
            "content": "",
            "tool_calls": [
                {"name": "refund", "args": {"order": 7}, "id": "same"},
                {"name": "refund", "args": {"order": 8}, "id": "same"},
            ],
        },
    }
    bodies = message_event_bodies(form, "a1", {"refund"})
    calls = [b for b in bodies if b["kind"] == "tool_call"]
    assert [c["client_event_id"] for c in calls] == ["a1/call/same", "a1/call/same#2"]
    assert [c["idempotency_key"] for c in calls] == ["same", "same#2"]
