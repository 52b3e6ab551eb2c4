"""A redacted event's content leaves the thread's stored LangGraph state (docs/langgraph.md,
"Redaction"): a real graph through the real CtxadminSaver, whose state holds a secret in its
messages, in a small channel carried by the checkpoint rows and in a large one stored as a
content row; then the event is redacted and its content scrubbed, and the graph runs on.

The event row's own redaction is not this part's: the test does to the row what the redaction
does (data and metadata emptied, behind the append-only seal) in the transaction that calls
`content_scrub`, as the redaction will.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import ormsgpack
from ctxadmin_client.langgraph import CtxadminSaver
from django.db import transaction
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from integrations.langgraph_checkpointer.domain.messages import REDACTED_CONTENT
from integrations.langgraph_checkpointer.domain.scrub import typed_value_scrub
from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
    LanggraphWrite,
)
from tests import factories as f
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import ToolFakeChatModel, agent_graph, get_weather, tool_loop_graph
from tests.support_secret_scan import find_everywhere, sqlite_search_tables
from threads.domain.scrub import Needles
from threads.models import Checkpoint, Event, Thread
from threads.services.content_scrub import content_scrub
from threads.services.integrity import checkpoint_checksum

SECRET = "AKIAZZPINEAPPLE7EXAMPLE42"
TEXT = f"my aws key is {SECRET}, keep it safe"
STORES: dict[str, Any] = {
    "langgraph_values": LanggraphChannelVersion,
    "langgraph_checkpoints": LanggraphCheckpoint,
    "langgraph_writes": LanggraphWrite,
    "langgraph_messages": LanggraphMessage,
}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    short: str  # small: carried in the checkpoint row
    notes: list[str]  # large: a content row of its own


def _graph(saver: CtxadminSaver) -> Any:
    model = ToolFakeChatModel(
        messages=iter([AIMessage("noted, I will not repeat it"), AIMessage("still here")])
    )

    def agent(state: State) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        return {
            "messages": [model.invoke(state["messages"])],
            "short": said[-40:],
            "notes": [*state.get("notes", []), f"the user said: {said} " * 3],
        }

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    return graph.compile(checkpointer=saver)


def _skip() -> list[str]:
    return ["threads_event", *sqlite_search_tables()]


def _rows() -> dict[str, dict[Any, tuple[Any, ...]]]:
    return {
        store: {
            row[0]: tuple(bytes(v) if isinstance(v, memoryview) else v for v in row[1:])
            for row in model.objects.values_list(
                "pk", *[f.attname for f in model._meta.concrete_fields if not f.primary_key]
            )
        }
        for store, model in STORES.items()
    }


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if len(value) >= 4 else []
    if isinstance(value, list):
        return [s for item in value for s in _leaves(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _leaves(item)]
    return []


def _redact(thread: Thread, seq: int, secrets: list[str]) -> dict[str, int]:
    """What the redaction does in its transaction: the row's content gone, then the scrub,
    with the needles the redaction sends (every string leaf of the event's data and metadata
    of 4+ characters: its role, its message's LangChain id and type... and the secrets)."""
    row = Event.objects.get(thread=thread, seq=seq)
    needles = [*secrets, *_leaves(row.data), *_leaves(row.metadata)]
    with transaction.atomic():
        with f.log_unsealed():
            Event.objects.filter(thread=thread, seq=seq).update(data={}, metadata={})
        return content_scrub(thread=thread, seq=seq, needles=needles, placeholder=REDACTED_CONTENT)


def test_the_secret_leaves_the_graph_state_and_the_graph_runs_on(
    server: Server, saver: CtxadminSaver
) -> None:
    app = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "scrub-graph"}}
    app.invoke({"messages": [HumanMessage(TEXT, id="m-secret")], "notes": []}, config)
    thread = Thread.objects.get(workspace=server.workspace, external_id="scrub-graph")
    seq = Event.objects.get(thread=thread, client_event_id="m-secret").seq

    tables = {t for t, _, _ in find_everywhere(SECRET, skip_tables=_skip())}
    assert {"threads_langgraphcheckpoint", "threads_langgraphcontent"} <= tables
    contents_before = set(LanggraphContent.objects.values_list("sha256", flat=True))
    before = _rows()

    counts = _redact(thread, seq, [TEXT, SECRET])

    assert find_everywhere(SECRET, skip_tables=_skip()) == []
    after = _rows()
    for store in STORES:
        changed = sum(1 for pk, row in after[store].items() if before[store][pk] != row)
        assert counts[store] == changed, store
    gone = contents_before - set(LanggraphContent.objects.values_list("sha256", flat=True))
    assert counts["langgraph_contents"] == len(gone) >= 1
    assert counts["langgraph_messages"] == 1

    # Every stored checkpoint still reads, none holds the secret, and their ctxadmin
    # checkpoints' checksums still recompute. (Whether the chain still verifies over the
    # redacted row is the redaction's: here the row was emptied by hand.)
    history = list(app.get_state_history(config))
    assert history and all(SECRET not in repr(s.values) for s in history)
    for checkpoint in Checkpoint.objects.filter(thread=thread).select_related("summary_version"):
        assert checkpoint.checksum == checkpoint_checksum(checkpoint)

    # The graph resumes from the redacted state: the message reads as the placeholder, with
    # its id, and the next run works and appends its messages once.
    state = app.get_state(config).values
    first = state["messages"][0]
    assert (first.id, first.type, first.content) == ("m-secret", "human", REDACTED_CONTENT)
    app.invoke({"messages": [HumanMessage("and now?", id="m-next")]}, config)
    state = app.get_state(config).values
    assert [m.content for m in state["messages"]] == [
        REDACTED_CONTENT,
        "noted, I will not repeat it",
        "and now?",
        "still here",
    ]
    assert REDACTED_CONTENT in " ".join(state["notes"]) and SECRET not in repr(state)
    assert Event.objects.filter(thread=thread, kind="message").count() == 4
    assert find_everywhere(SECRET, skip_tables=_skip()) == []


def test_redacted_tool_messages_keep_their_calls_and_a_new_saver_resumes(
    server: Server, saver: CtxadminSaver
) -> None:
    """The tool result and then the AI message that called the tool are redacted: they read back
    with their ids, the call and its tool_call_id, and a saver that never saw the thread (no
    cache of what the log holds) runs the next turn without appending any message twice."""
    config: RunnableConfig = {"configurable": {"thread_id": "scrub-tools"}}
    agent_graph(saver).invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, config)
    thread = Thread.objects.get(workspace=server.workspace, external_id="scrub-tools")
    result = Event.objects.get(thread=thread, kind="tool_result")
    weather = str(result.data["result"])
    call = Event.objects.get(thread=thread, kind="tool_call")
    asking = LanggraphMessage.objects.get(thread=thread, seq=call.seq - 1)
    _redact(thread, result.seq, [weather])
    _redact(thread, asking.seq, [])
    events = Event.objects.filter(thread=thread).count()

    fresh = CtxadminSaver.from_url(server.url, server.api_key)
    try:
        app = tool_loop_graph(
            fresh, ToolFakeChatModel(messages=iter([AIMessage("no idea")])), [get_weather]
        )
        messages = app.get_state(config).values["messages"]
        ai, tool = messages[1], messages[2]
        assert (ai.id, ai.content) == (asking.message_id, REDACTED_CONTENT)
        assert [(c["id"], c["name"], c["args"]) for c in ai.tool_calls] == [
            ("call_w1", "get_weather", {"city": "Paris"})
        ]
        assert (tool.type, tool.tool_call_id, tool.content) == ("tool", "call_w1", REDACTED_CONTENT)
        app.invoke({"messages": [HumanMessage("and tomorrow?", id="m-2")]}, config)
        assert [m.content for m in app.get_state(config).values["messages"]][-2:] == [
            "and tomorrow?",
            "no idea",
        ]
    finally:
        fresh.close()
    # The turn's two messages, and nothing of the redacted ones again.
    assert Event.objects.filter(thread=thread).count() == events + 2
    assert find_everywhere(weather, skip_tables=_skip()) == []


def test_a_value_is_scrubbed_in_its_own_encoding_or_replaced_whole() -> None:
    serde = JsonPlusSerializer()
    needles = Needles([SECRET], REDACTED_CONTENT)
    value = {"notes": f"x {SECRET}", "when": 3, 7: [HumanMessage(f"{SECRET}!", id="h")]}
    typed = serde.dumps_typed(value)
    scrubbed = typed_value_scrub(*typed, needles)
    assert scrubbed is not None and scrubbed[0] == typed[0]
    back = serde.loads_typed(scrubbed)
    assert back["notes"] == f"x {REDACTED_CONTENT}" and back[7][0].id == "h"
    assert back[7][0].content == f"{REDACTED_CONTENT}!"
    assert typed_value_scrub("bytes", f"raw {SECRET}".encode(), needles) == (
        "bytes",
        f"raw {REDACTED_CONTENT}".encode(),
    )
    # An encoding the server does not read: the value goes whole.
    assert typed_value_scrub("pickle", b"\x80\x04" + SECRET.encode(), needles) == (
        "msgpack",
        ormsgpack.packb(REDACTED_CONTENT),
    )
    assert typed_value_scrub(*serde.dumps_typed({"clean": 1}), needles) is None


def test_an_interrupt_quoting_the_secret_is_scrubbed_and_resumes(
    server: Server, saver: CtxadminSaver
) -> None:
    """A paused graph whose interrupt value quotes the secret: its pending writes (stored before
    their checkpoint, with the interrupt) and the approval request it opened lose it; the graph
    resumes."""

    def plan(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage("I need approval first")]}

    def approve(state: State) -> dict[str, Any]:
        said = str(state["messages"][0].content)
        answer = interrupt({"question": f"may I use {said}?"})
        return {"messages": [AIMessage(f"answer: {answer}")]}

    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("approve", approve)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    app: Any = graph.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "scrub-paused"}}
    app.invoke({"messages": [HumanMessage(TEXT, id="m-paused")], "notes": []}, config)
    thread = Thread.objects.get(workspace=server.workspace, external_id="scrub-paused")
    request = Event.objects.get(thread=thread, kind="approval_request")
    before = {t for t, _, _ in find_everywhere(SECRET, skip_tables=_skip())}
    # The interrupt's write: a write row, or in its checkpoint's tasks when the saver's
    # pipeline sent the two in one batch.
    assert "threads_approvalrequest" in before, before
    assert before & {"threads_langgraphwrite", "threads_langgraphcheckpoint"}, before

    counts = _redact(
        thread, Event.objects.get(thread=thread, client_event_id="m-paused").seq, [SECRET]
    )

    assert counts["approvals"] == 1
    # Only the approval request's own event still quotes it: another event of the log, which a
    # redaction of its own would take.
    assert find_everywhere(SECRET, skip_tables=_skip()) == []
    assert SECRET in str(Event.objects.get(pk=request.pk).data)
    paused = app.get_state(config)
    assert paused.next == ("approve",)
    assert SECRET not in repr(paused.tasks)
    app.invoke(Command(resume="no"), config)
    assert app.get_state(config).values["messages"][-1].content == "answer: no"
