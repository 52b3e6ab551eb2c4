"""Each trace format on small handwritten samples shaped like the providers' request bodies."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from integrations.trace_imports.readers import read_conversations
from integrations.trace_imports.services.conversations import conversations_import, trace_import
from tests import factories as f
from threads.models import Event, SideEffect, Thread, Workspace

pytestmark = pytest.mark.django_db


def _events(thread: Thread) -> list[dict[str, Any]]:
    rows = Event.objects.filter(thread=thread).order_by("seq")
    return [{"seq": e.seq, "kind": e.kind, **e.data, "metadata": e.metadata} for e in rows]


def _import(workspace: Workspace, conversation: Any, fmt: str, **kw: Any) -> Thread:
    (thread,) = trace_import(workspace=workspace, conversations=[conversation], fmt=fmt, **kw)
    return thread


OPENAI_CHAT = {
    "id": "chat-1",
    "tools": [{"type": "function", "function": {"name": "get_order", "parameters": {}}}],
    "messages": [
        {"role": "system", "content": "You are a shop assistant."},
        {"role": "user", "content": "Where are orders 1 and 2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "1"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": "{not json"},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "name": "get_order",
            "content": "Error: order not found",
        },
        {
            "role": "tool",
            "tool_call_id": "call_a",
            "name": "get_order",
            "content": '{"status": "shipped"}',
        },
        {"role": "assistant", "content": "Order 1 shipped; order 2 does not exist."},
        {"role": "user", "content": [{"type": "text", "text": "Check 1 again"}]},
        # A real agent reusing a closed call's id (tau-bench does this).
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": '{"status": "delivered"}'},
        # Legacy function calling: no id at all.
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "refund", "arguments": '{"order_id": "1"}'},
        },
        {"role": "function", "name": "refund", "content": "refunded"},
        {"role": "tool", "tool_call_id": "call_zzz", "content": "an orphan"},
    ],
}


def test_openai_chat(workspace: Workspace) -> None:
    thread = _import(workspace, OPENAI_CHAT, "openai-chat", side_effect_tools={"refund"})
    events = _events(thread)
    assert [(e["kind"], e.get("role") or e.get("tool_call_id")) for e in events] == [
        ("message", "system"),
        ("message", "user"),
        ("tool_call", "call_a"),
        ("tool_call", "call_b"),
        ("tool_result", "call_b"),
        ("tool_result", "call_a"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "call_a"),
        ("tool_result", "call_a"),
        ("tool_call", "function_call-9"),
        ("tool_result", "function_call-9"),
    ]
    assert thread.external_id == "chat-1" and thread.title == "Where are orders 1 and 2?"
    assert events[0]["metadata"]["tools"] == OPENAI_CHAT["tools"] and thread.fixed_tokens > 0
    assert events[2]["arguments"] == {"order_id": "1"} and events[2]["group"] == "turn-2"
    assert events[3]["arguments"] == {"_raw": "{not json"}
    assert events[3]["metadata"] == {"arguments_not_json": True}
    assert (events[4]["call_seq"], events[4]["status"]) == (4, "failed")
    assert (events[5]["call_seq"], events[5]["status"]) == (3, "succeeded")
    assert events[4]["metadata"] == {"name": "get_order"}
    assert events[10]["call_seq"] == 10 and events[10]["result"] == '{"status": "delivered"}'
    assert events[12]["call_seq"] == 12
    effect = SideEffect.objects.get(thread=thread)
    assert (effect.tool_name, effect.idempotency_key, effect.status) == (
        "refund",
        "chat-1:function_call-9",
        "succeeded",
    )
    assert Event.objects.filter(thread=thread).count() == 13  # the orphan result is left out


OPENAI_RESPONSES = {
    "id": "resp-1",
    "instructions": "Be brief.",
    "input": [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Weather in Paris and Rome?"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Two lookups needed."}],
            "encrypted_content": "gAAAA...",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_p",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_r",
            "name": "weather",
            "arguments": '{"city":"Rome"}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_r", "output": "18C rain"},
        {"type": "function_call_output", "call_id": "call_p", "output": "21C clear"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA..."},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "..."},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Paris 21C, Rome 18C."}],
        },
        {"role": "user", "content": "thanks"},
    ],
}


def test_openai_responses(workspace: Workspace) -> None:
    thread = _import(workspace, OPENAI_RESPONSES, "openai-responses")
    events = _events(thread)
    assert [e["kind"] for e in events] == [
        "message",
        "message",
        "message",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "message",
        "message",
    ]
    assert events[0] == {**events[0], "role": "system", "content": "Be brief."}
    assert events[1]["content"] == "Weather in Paris and Rome?"
    assert events[2]["metadata"]["item_type"] == "reasoning"
    assert events[3]["arguments"] == {"city": "Paris"} and events[3]["metadata"]["id"] == "fc_1"
    assert (events[5]["call_seq"], events[5]["result"]) == (5, "18C rain")
    assert (events[6]["call_seq"], events[6]["result"]) == (4, "21C clear")
    assert events[8]["content"] == "thanks"


def test_openai_responses_plain_string_input(workspace: Workspace) -> None:
    thread = _import(workspace, {"id": "r2", "input": "hello"}, "openai-responses")
    assert [(e["role"], e["content"]) for e in _events(thread)] == [("user", "hello")]


ANTHROPIC = {
    "id": "claude-1",
    "system": [{"type": "text", "text": "You manage refunds."}],
    "tools": [{"name": "refund", "description": "Refund", "input_schema": {}}],
    "messages": [
        {"role": "user", "content": "Refund order 4471"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need to call refund.", "signature": "sig"},
                {"type": "text", "text": "Refunding now."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "refund",
                    "input": {"order_id": "4471"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "gateway down",
                    "is_error": True,
                },
                {"type": "text", "text": "Try again please"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "refund",
                    "input": {"order_id": "4471"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "refunded"}],
                }
            ],
        },
    ],
}


def test_anthropic(workspace: Workspace) -> None:
    thread = _import(workspace, ANTHROPIC, "anthropic")
    events = _events(thread)
    assert [(e["kind"], e.get("role")) for e in events] == [
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", None),
        ("tool_result", None),
        ("message", "user"),
        ("tool_call", None),
        ("tool_result", None),
    ]
    assert events[0]["content"] == "You manage refunds."
    assert events[2]["content"] == "Refunding now."
    assert events[2]["metadata"] == {"thinking": ["Need to call refund."]}
    assert events[3]["arguments"] == {"order_id": "4471"}
    assert (events[4]["call_seq"], events[4]["status"]) == (4, "failed")
    assert (events[7]["call_seq"], events[7]["status"]) == (7, "succeeded")
    assert events[7]["result"] == [{"type": "text", "text": "refunded"}]


def test_jsonl_events_and_export_round_trip(workspace: Workspace, tmp_path: Path) -> None:
    source = f.make_thread(workspace, "source")
    f.append(
        source,
        f.user("hi"),
        f.call("c1", "pay", {"amount": 5}, side_effect_key="k1"),
        f.result("c1", "timeout"),
        f.annotation("constraint", "user", {"text": "no more than 5"}),
    )
    path = tmp_path / "export.jsonl"
    call_command("export_thread", "source", str(path), stdout=io.StringIO())
    other, _ = f.make_workspace("other")
    out = io.StringIO()
    call_command("import_trace", str(path), "--format", "jsonl", "--workspace", "other", stdout=out)
    copy = Thread.objects.get(workspace=other, external_id="source")
    strip = ("metadata",)
    assert [{k: v for k, v in e.items() if k not in strip} for e in _events(copy)] == [
        {k: v for k, v in e.items() if k not in strip} for e in _events(source)
    ]
    assert SideEffect.objects.get(thread=copy).status == "unknown"
    lines = tmp_path / "events.jsonl"
    lines.write_text("\n".join(json.dumps(b) for b in [f.user("a"), f.assistant("b")]))
    call_command(
        "import_trace",
        str(lines),
        "--format",
        "jsonl",
        "--workspace",
        "other",
        stdout=io.StringIO(),
    )
    assert Thread.objects.filter(workspace=other).count() == 2


def test_langgraph_messages(workspace: Workspace) -> None:
    decoded = {
        "id": "lg-thread-1",
        "messages": [
            {
                "__type__": "langchain_core.messages.human.HumanMessage",
                "content": "Weather?",
                "id": "m1",
            },
            {
                "__type__": "langchain_core.messages.ai.AIMessage",
                "content": "",
                "tool_calls": [
                    {
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                        "id": "call_w1",
                        "type": "tool_call",
                    }
                ],
            },
            {
                "__type__": "langchain_core.messages.tool.ToolMessage",
                "content": "21C",
                "tool_call_id": "call_w1",
                "name": "get_weather",
                "status": "success",
            },
            {"type": "ai", "data": {"content": "It is 21C.", "tool_calls": []}},
        ],
    }
    thread = _import(workspace, decoded, "langgraph-postgres")
    events = _events(thread)
    # As the live saver records them: the AI message that only calls is a message too.
    assert [e["kind"] for e in events] == [
        "message",
        "message",
        "tool_call",
        "tool_result",
        "message",
    ]
    assert events[2]["arguments"] == {"city": "Paris"} and events[3]["call_seq"] == 3
    assert events[4]["content"] == "It is 21C." and thread.external_id == "lg-thread-1"


def test_import_is_idempotent_and_extends_a_longer_conversation(workspace: Workspace) -> None:
    short = {"id": "grow", "messages": OPENAI_CHAT["messages"][:6]}
    first = conversations_import(workspace=workspace, conversations=[short], fmt="openai-chat")
    again = conversations_import(workspace=workspace, conversations=[short], fmt="openai-chat")
    longer = conversations_import(
        workspace=workspace,
        conversations=[{"id": "grow", "messages": OPENAI_CHAT["messages"][:9]}],
        fmt="openai-chat",
    )
    assert (first[0].created, again[0].created, longer[0].created) == (7, 0, 4)
    assert Event.objects.filter(thread__external_id="grow").count() == 11


def test_import_trace_command_reads_json_and_jsonl(workspace: Workspace, tmp_path: Path) -> None:
    array = tmp_path / "chats.json"
    array.write_text(
        json.dumps([OPENAI_CHAT, {"id": "chat-2", "messages": [{"role": "user", "content": "hi"}]}])
    )
    out = io.StringIO()
    call_command(
        "import_trace",
        str(array),
        "--format",
        "openai-chat",
        "--workspace",
        workspace.name,
        "--side-effect-tools",
        "none",
        stdout=out,
    )
    assert "Imported 2 conversations (14 new events)" in out.getvalue()
    assert not SideEffect.objects.filter(thread__workspace=workspace).exists()
    lines = tmp_path / "chats.jsonl"
    lines.write_text(json.dumps(ANTHROPIC) + "\n" + json.dumps(ANTHROPIC["messages"]) + "\n")
    out = io.StringIO()
    call_command(
        "import_trace",
        str(lines),
        "--format",
        "anthropic",
        "--workspace",
        workspace.name,
        stdout=out,
    )
    assert "Imported 2 conversations" in out.getvalue()
    assert read_conversations(str(lines), "anthropic")[1] == ANTHROPIC["messages"]


def test_a_file_of_messages_one_a_line_is_one_conversation(
    workspace: Workspace, tmp_path: Path
) -> None:
    path = tmp_path / "messages.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in OPENAI_CHAT["messages"]))
    out = io.StringIO()
    call_command(
        "import_trace",
        str(path),
        "--format",
        "openai-chat",
        "--workspace",
        workspace.name,
        stdout=out,
    )
    assert "Imported 1 conversations (13 new events)" in out.getvalue()


def test_import_trace_command_errors(workspace: Workspace, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"no": "messages"}]))
    with pytest.raises(CommandError, match="no `messages`"):
        call_command(
            "import_trace",
            str(bad),
            "--format",
            "openai-chat",
            "--workspace",
            workspace.name,
            stdout=io.StringIO(),
        )
    with pytest.raises(CommandError, match="no workspace"):
        call_command(
            "import_trace",
            str(bad),
            "--format",
            "openai-chat",
            "--workspace",
            "nope",
            stdout=io.StringIO(),
        )
