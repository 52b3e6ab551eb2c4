"""A LangGraph thread imported from a checkpoint store, then continued live through `CtxadminSaver`:
the import and the saver name and record each message alike (one conversion,
integrations.langgraph_checkpointer.domain.messages), so the log holds every message, call and
result once.

The first test's store is LangGraph's InMemorySaver, read back with the importer's own blob
decoder (the bytes a PostgresSaver keeps in `checkpoint_blobs` are the same serde's), so it runs
on both databases; the second imports a real PostgreSQL store (`import_trace --format
langgraph-postgres`, the PostgreSQL run only).
"""

from __future__ import annotations

import io
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from ctxadmin_client.langgraph import CtxadminSaver
from django.core.management import call_command
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver

from integrations.langgraph_checkpointer.domain.messages import MESSAGES_CHANNEL
from integrations.trace_imports.readers.langgraph_store import blob_decoder
from integrations.trace_imports.services.conversations import conversations_import
from tests.importers.test_langgraph_postgres import store_dsn
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import ToolFakeChatModel, get_weather, tool_loop_graph
from threads.models import Event, Thread

__all__ = ["store_dsn"]  # the fixture: a fresh LangGraph PostgreSQL store

REFUNDS: list[int] = []


@tool
def refund(order: int) -> str:
    """Refund an order (a side effect: each call is counted)."""
    REFUNDS.append(order)
    return f"refunded order {order}"


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _graph(checkpointer: Any, script: list[AIMessage]) -> Any:
    return tool_loop_graph(
        checkpointer, ToolFakeChatModel(messages=iter(script)), [refund, get_weather]
    )


def _stored_conversation(store: InMemorySaver, config: RunnableConfig) -> dict[str, Any]:
    """The thread's head as the importer reads a store: its messages channel's blob decoded
    without building any object."""
    head = store.get_tuple(config)
    assert head is not None
    thread_id = config["configurable"]["thread_id"]
    version = head.checkpoint["channel_versions"][MESSAGES_CHANNEL]
    blob = store.blobs[(thread_id, "", MESSAGES_CHANNEL, version)]
    messages = blob_decoder()(*blob)
    assert all(type(m) is dict for m in messages)
    return {"id": thread_id, "messages": messages, "interrupts": [], "unread": []}


def _counts(thread: Thread) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """How many message events carry each LangChain message id, and how many calls and
    results each tool_call_id has."""
    events = Event.objects.filter(thread=thread)
    messages: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    results: Counter[str] = Counter()
    for event in events:
        if event.kind == "message":
            messages[event.metadata["langchain"]["data"]["id"]] += 1
        elif event.kind == "tool_call":
            calls[event.data["tool_call_id"]] += 1
        elif event.kind == "tool_result":
            results[event.data["tool_call_id"]] += 1
            messages[event.metadata["langchain"]["data"]["id"]] += 1
    return messages, calls, results


def _expected(messages: list[BaseMessage]) -> tuple[Counter[str], Counter[str], Counter[str]]:
    calls = Counter(str(c["id"]) for m in messages for c in getattr(m, "tool_calls", []) or [])
    results = Counter(str(m.tool_call_id) for m in messages if isinstance(m, ToolMessage))
    return Counter(str(m.id) for m in messages), calls, results


@pytest.fixture
def refund_saver(server: Server) -> Iterator[CtxadminSaver]:
    """The live saver, with `refund` a side-effecting tool (as the import is told)."""
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    yield saver
    saver.close()


def _run_in_store(store: Any, config: RunnableConfig) -> Any:
    """The agent's first turn, run on its own LangGraph store: a refund (a side effect) and
    the answer. Returns the store's head checkpoint."""
    REFUNDS.clear()
    _graph(
        store,
        [
            AIMessage("Refunding order 7.", tool_calls=[_call("refund", {"order": 7}, "call_r1")]),
            AIMessage("Order 7 is refunded."),
        ],
    ).invoke({"messages": [HumanMessage("Refund order 7")]}, config)
    head = store.get_tuple(config)
    assert head is not None and REFUNDS == [7]
    return head


def _continue_live(saver: CtxadminSaver, config: RunnableConfig, head: Any) -> list[BaseMessage]:
    """The agent moves to ctxadmin: its head checkpoint is put through the live saver, which
    mirrors the messages the import recorded already; then its next turn runs there. Returns
    the thread's messages."""
    thread_id = config["configurable"]["thread_id"]
    saver.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        head.checkpoint,
        head.metadata,
        head.checkpoint["channel_versions"],
    )
    live = _graph(
        saver,
        [
            AIMessage("", tool_calls=[_call("get_weather", {"city": "Paris"}, "call_w1")]),
            AIMessage("It is 21C and clear in Paris."),
        ],
    )
    live.invoke({"messages": [HumanMessage("And the weather in Paris?")]}, config)
    messages: list[BaseMessage] = live.get_state(config).values["messages"]
    assert [m.content for m in messages[:4]] == [
        m.content for m in head.checkpoint["channel_values"][MESSAGES_CHANNEL]
    ]
    assert len(messages) == 8
    assert REFUNDS == [7]  # the refund was not run again
    return messages


def test_a_thread_imported_then_continued_live_appends_nothing_twice(
    server: Server, refund_saver: CtxadminSaver
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"moved-{uuid.uuid4().hex[:8]}"}}
    store = InMemorySaver()
    head = _run_in_store(store, config)

    (imported,) = conversations_import(
        workspace=server.workspace,
        conversations=[_stored_conversation(store, config)],
        fmt="langgraph-postgres",
        side_effect_tools={"refund"},
    )
    thread = imported.thread
    assert imported.created == Event.objects.filter(thread=thread).count() == 5
    assert Event.objects.get(thread=thread, kind="tool_call").data["side_effect"] is True

    final = _continue_live(refund_saver, config, head)

    assert Thread.objects.filter(workspace=server.workspace).count() == 1
    # Every message, call and result of the thread is in the log exactly once.
    assert _counts(thread) == _expected(final)
    assert Event.objects.filter(thread=thread).count() == 6 + 2 + 2  # messages, calls, results


def test_a_thread_imported_from_a_postgres_store_then_continued_live_appends_nothing_twice(
    server: Server, refund_saver: CtxadminSaver, store_dsn: str
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"moved-{uuid.uuid4().hex[:8]}"}}
    with PostgresSaver.from_conn_string(store_dsn) as store:
        head = _run_in_store(store, config)

    call_command(
        "import_trace",
        store_dsn,
        format="langgraph-postgres",
        workspace=server.workspace.name,
        side_effect_tools="refund",
        stdout=io.StringIO(),
    )
    (thread,) = Thread.objects.filter(workspace=server.workspace)
    assert Event.objects.filter(thread=thread).count() == 5

    final = _continue_live(refund_saver, config, head)

    assert _counts(thread) == _expected(final)
    assert Event.objects.filter(thread=thread).count() == 6 + 2 + 2  # messages, calls, results
