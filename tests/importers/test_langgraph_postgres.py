"""`import_trace --format langgraph-postgres` against a real LangGraph PostgreSQL store.

Each test creates its own database on the test server, runs a real LangGraph graph on it with
`PostgresSaver` (langgraph-checkpoint-postgres) and a scripted fake chat model (no network),
imports the store with the management command, and compares the threads with what LangGraph
itself reports. The database is dropped afterwards.
"""

from __future__ import annotations

import io
import pickle
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send, interrupt
from psycopg import sql
from psycopg.conninfo import make_conninfo

from integrations.trace_imports.readers.langgraph_store import read_postgres
from threads.models import Event, Thread, Workspace

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# What the tripwires saw: a constructor or an unpickling that ran.
FIRED: list[str] = []


@dataclass
class Tripwire:
    """LangGraph stores a dataclass as msgpack ext 2 `[module, name, fields]`; a reader that
    rebuilds objects calls this class."""

    label: str

    def __post_init__(self) -> None:
        FIRED.append(f"constructed {self.label}")


def _fire(label: str) -> str:
    FIRED.append(f"unpickled {label}")
    return label


class PickleTripwire:
    """Not msgpack-serialisable, so a saver with pickle_fallback pickles the whole channel;
    unpickling calls _fire."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_fire, ("pickle",))


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"21C and clear in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def refund(order: int) -> str:
    """Refund an order, after a person approves."""
    decision = interrupt({"question": f"Approve the refund of order {order}?", "order": order})
    return f"refund of order {order}: {decision}"


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel answers from a script; its base bind_tools raises."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _agent(saver: PostgresSaver, script: list[AIMessage]) -> Any:
    """agent -> one Send per tool call (parallel tasks, as langchain's create_agent does)
    -> ToolNode -> agent, until the model answers without tool calls."""
    model = ScriptedChatModel(messages=iter(script))

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> Any:
        last = state["messages"][-1]
        calls = getattr(last, "tool_calls", None)
        if not calls:
            return END
        return [
            Send("tools", {"__type": "tool_call_with_context", "tool_call": c, "state": state})
            for c in calls
        ]

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([get_weather, add, refund]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def _echo(saver: PostgresSaver) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("Noted.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


def _asking(saver: PostgresSaver) -> Any:
    """Pauses on an interrupt whose value is a dataclass (msgpack ext 2 inside ext 2)."""

    def ask(state: MessagesState) -> dict[str, Any]:
        interrupt(Tripwire("ext"))
        return {"messages": [AIMessage("Thanks.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile(checkpointer=saver)


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture
def store_dsn(db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database on the test server, with LangGraph's tables; dropped afterwards."""
    if connection.vendor != "postgresql":
        pytest.skip("a LangGraph PostgreSQL store needs the PostgreSQL run (DATABASE_URL)")
    # Offline: LangChain would otherwise send traces to LangSmith when the shell asks it to.
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.delenv(name, raising=False)
    settings = connection.settings_dict
    server = {
        k.lower(): str(settings[k]) for k in ("HOST", "PORT", "USER", "PASSWORD") if settings.get(k)
    }
    name = f"lgstore_{uuid.uuid4().hex[:12]}"
    admin = make_conninfo("", **server, dbname=str(settings["NAME"]))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo("", **server, dbname=name)
    try:
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        FIRED.clear()
        yield dsn
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _import(dsn: str, workspace: Workspace) -> str:
    out = io.StringIO()
    call_command(
        "import_trace",
        dsn,
        format="langgraph-postgres",
        workspace=workspace.name,
        stdout=out,
        verbosity=2,
    )
    return out.getvalue()


def _events(workspace: Workspace, thread_id: str) -> list[Event]:
    thread = Thread.objects.get(workspace=workspace, external_id=thread_id)
    return list(Event.objects.filter(thread=thread).order_by("seq"))


def _expected(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """The events LangGraph's own state implies, in order, as the live saver records them: a
    message per message, a call per tool call, a result per ToolMessage."""
    rows: list[tuple[str, Any]] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            rows.append(("tool_result", (m.tool_call_id, m.content)))
            continue
        calls = getattr(m, "tool_calls", None) or []
        role = "user" if isinstance(m, HumanMessage) else "assistant"
        rows.append(("message", (role, m.content)))
        rows.extend(("tool_call", (c["id"], c["name"], c["args"])) for c in calls)
    return rows


def _actual(events: list[Event]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for e in events:
        d = e.data
        if e.kind == "message":
            rows.append(("message", (d["role"], d["content"])))
        elif e.kind == "tool_call":
            rows.append(("tool_call", (d["tool_call_id"], d["tool_name"], d["arguments"])))
        elif e.kind == "tool_result":
            rows.append(("tool_result", (d["tool_call_id"], d.get("result"))))
        else:
            rows.append((e.kind, d))
    return rows


def _assert_results_bound(events: list[Event]) -> None:
    by_seq = {e.seq: e for e in events}
    for e in events:
        if e.kind == "tool_result":
            call = by_seq[e.data["call_seq"]]
            assert call.kind == "tool_call" and call.seq < e.seq
            assert call.data["tool_call_id"] == e.data["tool_call_id"]


def test_agent_threads_import_in_order_with_parallel_calls_and_twice_is_a_no_op(
    store_dsn: str, workspace: Workspace
) -> None:
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = _agent(
            saver,
            [
                AIMessage("", tool_calls=[_call("get_weather", {"city": "Paris"}, "call_w1")]),
                AIMessage("It is 21C and clear in Paris."),
                AIMessage(
                    "Let me compute both.",
                    tool_calls=[
                        _call("add", {"a": 2, "b": 3}, "call_a1"),
                        _call("add", {"a": 40, "b": 2}, "call_a2"),
                    ],
                ),
                AIMessage("2+3=5 and 40+2=42."),
            ],
        )
        main = f"agent-{uuid.uuid4().hex[:6]}"
        app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, _config(main))
        app.invoke({"messages": [HumanMessage("Compute 2+3 and 40+2")]}, _config(main))
        other = f"chat-{uuid.uuid4().hex[:6]}"
        _echo(saver).invoke({"messages": [HumanMessage("Just saying hi")]}, _config(other))
        final = app.get_state(_config(main)).values["messages"]
        other_final = saver.get_tuple(_config(other))
        langgraph_threads = {t.config["configurable"]["thread_id"] for t in saver.list(None)}

    output = _import(store_dsn, workspace)

    assert set(
        Thread.objects.filter(workspace=workspace).values_list("external_id", flat=True)
    ) == (langgraph_threads)
    assert langgraph_threads == {main, other}
    events = _events(workspace, main)
    assert _actual(events) == _expected(final)
    _assert_results_bound(events)
    calls = {e.data["tool_call_id"]: e for e in events if e.kind == "tool_call"}
    results = {e.data["tool_call_id"]: e for e in events if e.kind == "tool_result"}
    assert set(calls) == set(results) == {"call_w1", "call_a1", "call_a2"}
    assert {results[c].data["result"] for c in ("call_a1", "call_a2")} == {"5", "42"}
    assert all(results[c].data["call_seq"] == calls[c].seq for c in calls)
    assert max(calls["call_a1"].seq, calls["call_a2"].seq) < min(
        results["call_a1"].seq, results["call_a2"].seq
    )
    assert all(r.data["status"] == "succeeded" for r in results.values())
    other_events = _events(workspace, other)
    assert other_final is not None
    assert _actual(other_events) == _expected(other_final.checkpoint["channel_values"]["messages"])

    total = Event.objects.filter(thread__workspace=workspace).count()
    again = _import(store_dsn, workspace)
    assert Event.objects.filter(thread__workspace=workspace).count() == total
    assert f"{main}: 0 new of {len(events)} events" in again
    assert f"{main}: {len(events)} new of {len(events)} events" in output
    assert Thread.objects.filter(workspace=workspace).count() == 2


def test_paused_thread_imports_its_named_results_and_resume_appends_only_new(
    store_dsn: str, workspace: Workspace
) -> None:
    paused = f"paused-{uuid.uuid4().hex[:6]}"
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = _agent(
            saver,
            [
                AIMessage(
                    "",
                    tool_calls=[
                        _call("add", {"a": 2, "b": 3}, "call_a1"),
                        _call("refund", {"order": 42}, "call_r1"),
                    ],
                ),
                AIMessage("Refunded order 42; 2+3=5."),
            ],
        )
        app.invoke(
            {"messages": [HumanMessage("Add 2 and 3, and refund order 42")]}, _config(paused)
        )
        state = app.get_state(_config(paused))
        head = saver.get_tuple(_config(paused))
    # LangGraph's view: waiting in `tools` on the refund's interrupt, with add's result saved
    # only as a pending write of the head checkpoint (not in its messages channel), which
    # get_state() nevertheless counts as part of the thread.
    assert state.next == ("tools",)
    assert head is not None and head.pending_writes is not None
    assert [m.type for m in head.checkpoint["channel_values"]["messages"]] == ["human", "ai"]
    pending = [w[2] for w in head.pending_writes if w[1] == "messages"]
    assert [[m.tool_call_id for m in value] for value in pending] == [["call_a1"]]
    assert [m.type for m in state.values["messages"]] == ["human", "ai", "tool"]
    (waiting,) = state.interrupts

    _import(store_dsn, workspace)

    events = _events(workspace, paused)
    assert _actual(events[:4]) == _expected(state.values["messages"][:2])
    kinds = [e.kind for e in events]
    assert kinds[:4] == ["message", "message", "tool_call", "tool_call"]
    assert kinds[4:] in (["annotation"], ["tool_result", "annotation"])
    # add's result is a pending write, whose event is named by its LangChain id (as the live
    # saver names it): taken when the write holds that id already (add_messages names the
    # message in place while the write is being saved), else once LangGraph completes the
    # step. The refund's call stays open either way.
    early = [(e.data["tool_call_id"], e.data["result"]) for e in events if e.kind == "tool_result"]
    assert early in ([], [("call_a1", "5")])
    _assert_results_bound(events)
    question = events[-1].data
    assert question["type"] == "question"
    assert question["payload"]["text"] == waiting.value["question"]
    assert question["payload"]["value"] == waiting.value
    assert question["payload"]["interrupt_id"] == waiting.id

    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = _agent(saver, [AIMessage("Refunded order 42; 2+3=5.")])
        app.invoke(Command(resume="approved"), _config(paused))
        final = app.get_state(_config(paused)).values["messages"]
    assert [m.type for m in final][-1] == "ai" and len(final) == 5

    output = _import(store_dsn, workspace)

    after = _events(workspace, paused)
    before = [(e.seq, e.kind, e.data) for e in events]
    assert [(e.seq, e.kind, e.data) for e in after[: len(events)]] == before
    new = after[len(events) :]
    assert f"{paused}: {len(new)} new of " in output
    results = {e.data["tool_call_id"]: e for e in after if e.kind == "tool_result"}
    assert results["call_a1"].data["result"] == "5"
    assert results["call_r1"].data["result"] == "refund of order 42: approved"
    assert results["call_r1"].data["call_seq"] == events[3].seq
    assert _actual(new)[-1] == ("message", ("assistant", "Refunded order 42; 2+3=5."))
    _assert_results_bound(after)
    # Everything LangGraph now holds is in the log exactly once.
    assert sorted(map(repr, _expected(final))) == sorted(
        map(repr, [row for row in _actual(after) if row[0] != "annotation"])
    )


def test_import_never_builds_an_object_or_unpickles(store_dsn: str, workspace: Workspace) -> None:
    typed = f"typed-{uuid.uuid4().hex[:6]}"
    pickled = f"pickled-{uuid.uuid4().hex[:6]}"
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        _asking(saver).invoke({"messages": [HumanMessage("hi")]}, _config(typed))
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        saver.serde = JsonPlusSerializer(pickle_fallback=True)
        _echo(saver).invoke(
            {"messages": [HumanMessage("hi", additional_kwargs={"note": PickleTripwire()})]},
            _config(pickled),
        )
    with psycopg.connect(store_dsn) as conn:
        blobs: dict[str, str] = dict(
            conn.execute(
                "SELECT thread_id, type FROM checkpoint_blobs WHERE channel = 'messages'"
            ).fetchall()
        )
        typed_blob = conn.execute(
            "SELECT type, blob FROM checkpoint_writes WHERE thread_id = %s AND channel = "
            "'__interrupt__'",
            (typed,),
        ).fetchone()
        pickled_blob = conn.execute(
            "SELECT blob FROM checkpoint_blobs WHERE thread_id = %s AND type = 'pickle' "
            "ORDER BY version DESC LIMIT 1",
            (pickled,),
        ).fetchone()
    assert blobs[pickled] == "pickle" and typed_blob is not None and pickled_blob is not None
    FIRED.clear()

    output = _import(store_dsn, workspace)
    decoded = {c["id"]: c for c in read_postgres(store_dsn)}

    assert FIRED == []
    # Ext payloads come out as plain dicts naming the type: the interrupt, its Tripwire value
    # and the LangChain message alike.
    (asked,) = decoded[typed]["interrupts"]
    assert asked["__type__"] == "langgraph.types.Interrupt"
    assert asked["value"] == {"__type__": f"{__name__}.Tripwire", "label": "ext"}
    (hello,) = decoded[typed]["messages"]
    assert type(hello) is dict and hello["__type__"].endswith(".HumanMessage")
    events = _events(workspace, typed)
    assert _actual(events[:1]) == [("message", ("user", "hi"))]
    assert events[1].kind == "annotation" and events[1].data["payload"]["value"] == asked["value"]
    # The pickled thread is named, reported and left empty rather than decoded.
    assert _events(workspace, pickled) == []
    assert "'pickle' cannot be read safely" in output
    assert decoded[pickled]["messages"] == []

    # Controls: the same bytes do run code in a reader that rebuilds objects.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(
        (typed_blob[0], bytes(typed_blob[1]))
    )
    assert FIRED == ["constructed ext"]
    pickle.loads(bytes(pickled_blob[0]))
    assert FIRED == ["constructed ext", "unpickled pickle"]


def test_a_database_without_langgraph_tables_is_refused_by_name(
    store_dsn: str, workspace: Workspace
) -> None:
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE checkpoints")
    with pytest.raises(CommandError, match="no LangGraph checkpoint tables"):
        _import(store_dsn, workspace)
    assert not Thread.objects.filter(workspace=workspace).exists()


def test_a_crashed_step_is_reported_and_its_call_left_open(
    store_dsn: str, workspace: Workspace
) -> None:
    crashed = f"crashed-{uuid.uuid4().hex[:6]}"

    def plan(state: MessagesState) -> dict[str, Any]:
        call = _call("refund", {"order": 42}, "call_r1")
        return {"messages": [AIMessage("Refunding order 42.", tool_calls=[call])]}

    def gateway(state: MessagesState) -> dict[str, Any]:
        raise RuntimeError("payment gateway timeout")

    graph = StateGraph(MessagesState)
    graph.add_node("plan", plan)
    graph.add_node("gateway", gateway)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "gateway")
    graph.add_edge("gateway", END)
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = graph.compile(checkpointer=saver)
        with pytest.raises(RuntimeError):
            app.invoke({"messages": [HumanMessage("refund my order 42")]}, _config(crashed))
        head = saver.get_tuple(_config(crashed))
        assert app.get_state(_config(crashed)).next == ("gateway",)
    assert head is not None and head.pending_writes is not None
    assert [w[1] for w in head.pending_writes] == ["__error__"]

    output = _import(store_dsn, workspace)

    events = _events(workspace, crashed)
    assert [e.kind for e in events] == ["message", "message", "tool_call"]
    assert "RuntimeError('payment gateway timeout')" in output


def test_a_parallel_message_pending_behind_an_interrupt_is_imported_once(
    store_dsn: str, workspace: Workspace
) -> None:
    branches = f"branches-{uuid.uuid4().hex[:6]}"

    def fast(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("Branch A done.")]}

    def slow(state: MessagesState) -> dict[str, Any]:
        interrupt({"question": "Go on with branch B?"})
        return {"messages": [AIMessage("Branch B done.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("fast", fast)
    graph.add_node("slow", slow)
    graph.add_edge(START, "fast")
    graph.add_edge(START, "slow")
    graph.add_edge("fast", END)
    graph.add_edge("slow", END)
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = graph.compile(checkpointer=saver)
        app.invoke({"messages": [HumanMessage("Run both branches")]}, _config(branches))
        head = saver.get_tuple(_config(branches))
        assert head is not None and head.pending_writes is not None
        assert {w[1] for w in head.pending_writes} >= {"messages", "__interrupt__"}
        _import(store_dsn, workspace)
        app.invoke(Command(resume="yes"), _config(branches))
        final = app.get_state(_config(branches)).values["messages"]
    assert sorted(m.content for m in final) == sorted(
        ["Run both branches", "Branch A done.", "Branch B done."]
    )

    _import(store_dsn, workspace)
    again = _import(store_dsn, workspace)

    texts = [e.data["content"] for e in _events(workspace, branches) if e.kind == "message"]
    assert sorted(texts) == sorted(m.content for m in final)
    assert f"{branches}: 0 new of" in again


def test_a_fork_of_an_imported_thread_imports_without_conflict(
    store_dsn: str, workspace: Workspace
) -> None:
    forked = f"forked-{uuid.uuid4().hex[:6]}"
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        app = _agent(
            saver,
            [
                AIMessage("", tool_calls=[_call("get_weather", {"city": "Paris"}, "call_w1")]),
                AIMessage("It is 21C and clear in Paris."),
            ],
        )
        app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, _config(forked))
        _import(store_dsn, workspace)
        before = _actual(_events(workspace, forked))
        # Time travel: back to the state with only the question, asked differently.
        first = next(
            s for s in app.get_state_history(_config(forked)) if len(s.values["messages"]) == 1
        )
        app.update_state(first.config, {"messages": [HumanMessage("And in Rome?")]})
        head = app.get_state(_config(forked)).values["messages"]
    assert [m.content for m in head] == ["What's the weather in Paris?", "And in Rome?"]

    output = _import(store_dsn, workspace)

    # The log is append-only: what was imported stays, the fork's new message is added.
    after = _actual(_events(workspace, forked))
    assert after == [*before, ("message", ("user", "And in Rome?"))]
    assert f"{forked}: 1 new of 2 events" in output


def test_a_pending_message_without_an_id_waits_for_langgraph_to_name_it(
    store_dsn: str, workspace: Workspace
) -> None:
    waiting = f"waiting-{uuid.uuid4().hex[:6]}"
    with PostgresSaver.from_conn_string(store_dsn) as saver:
        _echo(saver).invoke({"messages": [HumanMessage("hello")]}, _config(waiting))
        head = saver.get_tuple(_config(waiting))
        assert head is not None
        # Through the saver's own API: what a finished task of an unfinished step leaves.
        saver.put_writes(
            head.config,
            [("messages", [AIMessage("named", id="msg-named"), AIMessage("unnamed")])],
            task_id=str(uuid.uuid4()),
            task_path="~__pregel_pull, late",
        )

    output = _import(store_dsn, workspace)

    texts = [e.data["content"] for e in _events(workspace, waiting) if e.kind == "message"]
    assert texts == ["hello", "Noted.", "named"]
    assert "has no id yet" in output
