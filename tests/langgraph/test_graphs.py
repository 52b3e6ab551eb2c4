"""A real graph through CtxadminSaver behaves as through LangGraph's InMemorySaver, and its
messages are stored once, in the event log."""

from __future__ import annotations

import json

import httpx
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
    LanggraphMessage,
)
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import approval_graph, history, run_script, values_form
from threads.models import Checkpoint, Event, Thread
from threads.services.integrity import integrity_check


def test_a_real_graph_runs_the_same_as_with_the_in_memory_saver(saver: CtxadminSaver) -> None:
    expected = run_script(InMemorySaver())
    got = run_script(saver)
    for name in ("tools", "approval"):
        (mem_app, mem_config), (app, config) = expected[name], got[name]
        assert values_form(app.get_state(config).values) == values_form(
            mem_app.get_state(mem_config).values
        ), name
        assert app.get_state(config).next == mem_app.get_state(mem_config).next == ()
        ours, theirs = history(app, config), history(mem_app, mem_config)
        assert len(ours) == len(theirs), name
        assert ours == theirs, name
    # The tool thread: 9 messages over 10 checkpoints (steps -1..8); the approval paused once.
    assert len(history(*got["tools"])) == 10
    assert len(values_form(got["tools"][0].get_state(got["tools"][1]).values)["messages"]) == 9
    assert any(step["interrupts"] for step in history(*got["approval"]))


def test_a_paused_thread_shows_its_interrupt_as_in_memory(saver: CtxadminSaver) -> None:
    results = []
    for checkpointer in (InMemorySaver(), saver):
        app = approval_graph(checkpointer)
        config: RunnableConfig = {"configurable": {"thread_id": "paused-1"}}
        app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
        state = app.get_state(config)
        head = checkpointer.get_tuple(config)
        assert head is not None and head.pending_writes is not None
        results.append(
            (
                state.next,
                [i.value for i in state.interrupts],
                sorted(w[1] for w in head.pending_writes),
            )
        )
    assert results[0] == results[1]
    assert results[1][0] == ("approve",)
    assert "__interrupt__" in results[1][2]


def _langgraph_thread(server: Server, external_id: str) -> Thread:
    return Thread.objects.get(workspace=server.workspace, external_id=external_id)


def test_each_message_is_stored_once_in_the_log(server: Server, saver: CtxadminSaver) -> None:
    app, config = run_script(saver)["tools"]
    messages = app.get_state(config).values["messages"]
    thread = _langgraph_thread(server, config["configurable"]["thread_id"])
    checkpoints = LanggraphCheckpoint.objects.filter(thread=thread)
    assert len(messages) == 9 and checkpoints.count() == 10

    carrying = Event.objects.filter(thread=thread, metadata__has_key="langchain")
    assert sorted(str(i) for i in carrying.values_list("client_event_id", flat=True)) == sorted(
        str(m.id) for m in messages
    )
    assert LanggraphMessage.objects.filter(thread=thread).count() == len(messages)
    # 3 tool calls, 3 results, 2 user and 4 assistant messages: nothing appended twice.
    kinds = list(Event.objects.filter(thread=thread).values_list("kind", flat=True))
    assert sorted(kinds) == sorted(["message"] * 6 + ["tool_call"] * 3 + ["tool_result"] * 3)
    # No checkpoint row holds a message's content, and no blob holds the messages channel.
    contents = [str(m.content) for m in messages if len(str(m.content)) > 8]
    assert len(contents) >= 5
    for row in checkpoints:
        text = json.dumps([row.checkpoint, row.metadata])
        assert not [c for c in contents if c in text]
    versions = LanggraphChannelVersion.objects.filter(thread=thread, channel="messages")
    assert versions.exists() and not versions.filter(content__isnull=False).exists()
    assert all(v.messages_until_seq is not None for v in versions)  # append-only: by seq
    # `__start__` holds a run's input as LangGraph sent it: the only other place a (user)
    # message is, as with every LangGraph saver.
    blobs = b"".join(
        bytes(c.data)
        for c in LanggraphContent.objects.filter(
            sha256__in=LanggraphChannelVersion.objects.filter(thread=thread)
            .exclude(channel="__start__")
            .values("content")
        )
    )
    assert not [c for c in contents if c.encode() in blobs]
    # The log's chain verifies, and every LangGraph checkpoint is a ctxadmin checkpoint.
    assert integrity_check(thread=thread, full=True).ok
    labels = set(Checkpoint.objects.filter(thread=thread).values_list("label", flat=True))
    assert labels == {f"langgraph:{row.checkpoint_id}" for row in checkpoints}
    head = checkpoints.order_by("-checkpoint_id").first()
    assert head is not None and head.cursor == thread.last_seq
    assert head.ctxadmin_checkpoint.cursor == head.cursor


def test_the_checkpoints_show_in_the_threads_checkpoint_list(
    server: Server, saver: CtxadminSaver
) -> None:
    app, config = run_script(saver)["tools"]
    thread_id = config["configurable"]["thread_id"]
    answer = httpx.get(
        f"{server.url}/api/v1/threads/{thread_id}/checkpoints/",
        headers={"Authorization": f"Bearer {server.api_key}"},
    )
    assert answer.status_code == 200
    labels = {c["label"] for c in answer.json()}
    ids = {t.config["configurable"]["checkpoint_id"] for t in saver.list(config)}
    assert labels == {f"langgraph:{i}" for i in ids}


def test_an_edited_message_is_mirrored_again_and_read_back_exactly(
    server: Server, saver: CtxadminSaver
) -> None:
    app, config = run_script(saver)["tools"]
    messages = app.get_state(config).values["messages"]
    last = messages[-1]
    app.update_state(
        config,
        {"messages": [RemoveMessage(id=messages[0].id), AIMessage("Edited.", id=last.id)]},
    )
    app.update_state(config, {"messages": [HumanMessage("and again", id="m-again")]})
    state = app.get_state(config).values["messages"]
    assert [m.id for m in state] == [m.id for m in messages[1:]] + ["m-again"]
    assert state[-2].content == "Edited."
    thread = _langgraph_thread(server, config["configurable"]["thread_id"])
    # The edited message has a second event; the log keeps the first one.
    assert LanggraphMessage.objects.filter(thread=thread, message_id=last.id).count() == 2
    head = LanggraphCheckpoint.objects.filter(thread=thread).order_by("-checkpoint_id").first()
    assert head is not None
    version = LanggraphChannelVersion.objects.get(
        thread=thread, channel="messages", version=head.checkpoint["channel_versions"]["messages"]
    )
    assert version.message_seqs is not None and version.content_id is None
    # An earlier checkpoint still reads its own list.
    first_turn = [t for t in saver.list(config) if t.metadata.get("step") == 4][0]
    assert [m.id for m in first_turn.checkpoint["channel_values"]["messages"]] == [
        m.id for m in messages[:4]
    ]
    assert integrity_check(thread=thread, full=True).ok
