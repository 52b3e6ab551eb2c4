"""Retention on threads a real LangGraph graph wrote (docs/operations.md, "Retention"): pruned
checkpoints take their LangGraph state with them, the graph resumes from what stays, a paused
interrupt keeps the checkpoint its answer resumes from, a deleted thread leaves no LangGraph
row, and LangGraph's own conformance suite still passes on the same database afterwards."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from integrations.langgraph_checkpointer.models import (
    LanggraphChannelVersion,
    LanggraphCheckpoint,
    LanggraphContent,
)
from tests import factories as f
from tests.langgraph import test_conformance
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import (
    ToolFakeChatModel,
    add,
    agent_graph,
    approval_graph,
    get_weather,
    tool_loop_graph,
    values_form,
)
from tests.services.test_retention import _rows_of
from threads.models import AuditEntry, Checkpoint, Thread, Workspace
from threads.services.retention import retention_apply
from threads.services.rollback import checkpoint_rollback


def _policy(workspace: Workspace, **policy: Any) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(**policy)


def _thread(server: Server, config: RunnableConfig) -> Thread:
    return Thread.objects.get(
        workspace=server.workspace, external_id=config["configurable"]["thread_id"]
    )


def _two_turns(saver: CtxadminSaver, thread_id: str) -> tuple[Any, RunnableConfig]:
    app = agent_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, config)
    app.invoke({"messages": [HumanMessage("Compute 2+3 and 40+2")]}, config)
    return app, config


def test_a_graph_resumes_and_rolls_back_after_its_checkpoints_are_pruned(
    server: Server, saver: CtxadminSaver
) -> None:
    app, config = _two_turns(saver, "pruned")
    thread = _thread(server, config)
    state = values_form(app.get_state(config).values)
    assert LanggraphCheckpoint.objects.filter(thread=thread).count() == 10
    _policy(server.workspace, keep_checkpoints=3)

    [outcome] = retention_apply(workspace_name=server.workspace.name)

    # Beyond the latest 3, all go but one something still needs (a checkpoint whose pending
    # writes the pipelined saver stored beside it, when it kept one).
    needed = outcome.checkpoints.kept_needed
    assert needed <= 1 and outcome.checkpoints.deleted == 7 - needed
    assert LanggraphCheckpoint.objects.filter(thread=thread).count() == 3 + needed
    assert Checkpoint.objects.filter(thread=thread).count() == 3 + needed
    # Every channel version left is one a remaining checkpoint names.
    named = {
        (str(channel), str(version))
        for row in LanggraphCheckpoint.objects.filter(thread=thread)
        for channel, version in row.checkpoint["channel_versions"].items()
    }
    stored = set(
        LanggraphChannelVersion.objects.filter(thread=thread).values_list("channel", "version")
    )
    assert stored <= named
    assert values_form(app.get_state(config).values) == state
    # The graph goes on from where it stood.
    more = tool_loop_graph(
        saver, ToolFakeChatModel(messages=iter([AIMessage("Anything else?")])), [get_weather, add]
    )
    more.invoke({"messages": [HumanMessage("thanks")]}, config)
    messages = values_form(more.get_state(config).values)["messages"]
    assert [m["content"] for m in messages[-2:]] == ["thanks", "Anything else?"]
    assert len(messages) == len(state["messages"]) + 2
    # A rollback to a kept checkpoint still works, LangGraph state included.
    admin = f.make_person(server.workspace, "root", "admin")
    kept = Checkpoint.objects.filter(thread=thread).order_by("cursor").first()
    assert kept is not None
    checkpoint_rollback(thread=_thread(server, config), checkpoint=kept, actor=admin, reason="back")
    after = values_form(more.get_state(config).values)["messages"]
    assert len(after) < len(messages)


def test_a_paused_interrupt_keeps_the_checkpoint_its_answer_resumes_from(
    server: Server, saver: CtxadminSaver
) -> None:
    app = approval_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "paused"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    assert app.get_state(config).next == ("approve",)
    thread = _thread(server, config)
    Thread.objects.filter(pk=thread.pk).update(updated_at=thread.updated_at - timedelta(days=90))
    _policy(server.workspace, keep_checkpoints=1, retention_days=30)

    [outcome] = retention_apply(workspace_name=server.workspace.name)

    assert outcome.threads == []  # a pending interrupt is a person's to answer
    # Beyond the latest, both go but one something still needs (a checkpoint whose pending
    # writes the pipelined saver stored beside it, when it kept one).
    needed = outcome.checkpoints.kept_needed
    assert needed <= 1 and outcome.checkpoints.deleted == 2 - needed
    assert LanggraphCheckpoint.objects.filter(thread=thread).count() == 1 + needed
    assert Thread.objects.filter(pk=thread.pk).exists()
    app.invoke(Command(resume="yes"), config)
    last = values_form(app.get_state(config).values)["messages"][-1]
    assert last["content"] == "Refund done."


def test_a_deleted_graph_thread_leaves_no_langgraph_row(
    server: Server, saver: CtxadminSaver
) -> None:
    _, config = _two_turns(saver, "to-delete")
    _, other = _two_turns(saver, "to-keep")
    old, kept = _thread(server, config), _thread(server, other)
    then = old.updated_at - timedelta(days=90)
    Thread.objects.filter(pk=old.pk).update(updated_at=then)
    AuditEntry.objects.filter(thread=old).update(created_at=then)  # its creation, audited
    contents = LanggraphContent.objects.count()
    before = _rows_of(kept.pk)
    _policy(server.workspace, retention_days=30)

    [outcome] = retention_apply(workspace_name=server.workspace.name)

    assert [line["external_id"] for line in outcome.threads] == ["to-delete"]
    assert set(_rows_of(old.pk).values()) == {0}
    assert _rows_of(kept.pk) == before
    # No content is left that no version refers to; those the other thread shares stay, and
    # its graph still reads its state.
    used = LanggraphChannelVersion.objects.filter(content__isnull=False).values("content")
    assert not LanggraphContent.objects.exclude(sha256__in=used).exists()
    assert LanggraphContent.objects.count() <= contents
    app = agent_graph(saver)
    assert len(values_form(app.get_state(other).values)["messages"]) == 9


@pytest.mark.asyncio
async def test_the_conformance_suite_passes_after_a_retention_run(
    server: Server, saver: CtxadminSaver, capsys: pytest.CaptureFixture[str]
) -> None:
    def prepare() -> None:
        _two_turns(saver, "before-conformance")
        _policy(server.workspace, keep_checkpoints=2)
        [outcome] = retention_apply(workspace_name=server.workspace.name)
        assert outcome.checkpoints.deleted > 0

    await sync_to_async(prepare)()
    await test_conformance.test_the_conformance_suite_passes_at_full_level(server, capsys)
