"""Pipelined writes and conditional restores (docs/langgraph.md, "Pipelined writes" and
"Conditional restore"): a LangGraph run under `durability="async"` sends fewer requests than
it makes puts and writes; under `"sync"` every put is stored before the next step; an error of
a pipelined write surfaces; a process killed mid-run resumes as InMemorySaver's would from
the same kill point; a warm restore is a 304 until something changes, a rollback included."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from ctxadmin_client import Client
from ctxadmin_client.errors import CtxadminError
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint, LanggraphWrite
from tests import factories
from tests.langgraph.conftest import Server
from tests.langgraph.crash_agent import FIRST, STEPS, crash_graph
from threads.models import ApiKey, Thread
from threads.services.api_keys import api_key_revoke
from threads.services.rollback import checkpoint_rollback

CRASH_AGENT = Path(__file__).with_name("crash_agent.py")


class Counting(httpx.HTTPTransport):
    """A transport that keeps each request's method, path and answer status."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.seen.append((request.method, request.url.path, response.status_code))
        return response


def _saver(server: Server) -> tuple[CtxadminSaver, Counting]:
    counting = Counting()
    client = Client(server.url, server.api_key, transport=counting)  # type: ignore[arg-type]
    return CtxadminSaver(client), counting


def _config() -> RunnableConfig:
    return {"configurable": {"thread_id": "pipe-" + uuid.uuid4().hex[:8]}}


def _ids(values: dict[str, Any]) -> list[str]:
    return [str(m.id) for m in values.get("messages", [])]


def test_an_async_run_coalesces_its_writes_and_reads_back_as_in_memory(server: Server) -> None:
    saver, counting = _saver(server)
    config = _config()
    app = crash_graph(saver)
    app.invoke(FIRST, config)  # LangGraph's default durability: "async"
    # Stored when invoke returns (the run waited for the queue), without a read of the saver's.
    thread = Thread.objects.get(external_id=config["configurable"]["thread_id"])
    assert LanggraphCheckpoint.objects.filter(thread=thread).count() == STEPS + 2
    posts = [path for method, path, _ in counting.seen if method == "POST"]
    # A put per step and a write per node run: the writes ride with the puts.
    assert len(posts) <= STEPS + 3
    assert any(path.endswith("/langgraph/batch/") for path in posts)
    memory_app = crash_graph(InMemorySaver())
    memory_config = _config()
    memory_app.invoke(FIRST, memory_config)
    assert _ids(app.get_state(config).values) == _ids(memory_app.get_state(memory_config).values)
    saver.close()


def test_under_sync_each_step_runs_after_the_put_before_it_is_stored(server: Server) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    config = _config()
    external_id = config["configurable"]["thread_id"]
    seen: list[int] = []

    def step(state: MessagesState) -> dict[str, Any]:
        stored = LanggraphCheckpoint.objects.filter(thread__external_id=external_id).count()
        seen.append(stored)
        done = len(state["messages"])
        return {"messages": [AIMessage(f"step {done}", id=f"step-{done}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("a", step)
    graph.add_node("b", step)
    graph.add_node("c", step)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    app = graph.compile(checkpointer=saver)
    app.invoke(FIRST, config, durability="sync")
    # The input checkpoint, then one per node: each node ran after every put before it.
    assert seen == [2, 3, 4]
    saver.close()


def test_a_pipelined_write_that_fails_makes_the_run_raise(server: Server) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    admin = factories.make_person(server.workspace, "ada", "admin")

    def step(state: MessagesState) -> dict[str, Any]:
        done = len(state["messages"])
        if done == 3:  # the agent's key is revoked mid-run: its next writes are refused
            for key in ApiKey.objects.filter(workspace=server.workspace):
                api_key_revoke(key=key, actor=admin)
        return {"messages": [AIMessage(f"step {done}", id=f"step-{done}")]}

    def more(state: MessagesState) -> str:
        return "step" if len(state["messages"]) < 8 else "__end__"

    graph = StateGraph(MessagesState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", more)
    app = graph.compile(checkpointer=saver)
    with pytest.raises(CtxadminError) as raised:
        app.invoke(FIRST, _config())
    assert raised.value.status == 401
    saver.close()  # surfaced once: closing does not raise it again


def test_a_run_that_raises_has_stored_its_error_write_when_invoke_raises(server: Server) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    config = _config()

    def step(state: MessagesState) -> dict[str, Any]:
        done = len(state["messages"])
        if done == 4:
            raise RuntimeError("the payment system dropped the line")
        return {"messages": [AIMessage(f"step {done}", id=f"step-{done}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda state: "step")
    app = graph.compile(checkpointer=saver)
    with pytest.raises(RuntimeError):
        app.invoke(FIRST, config)
    # The task's error, LangGraph's last write of the run, is stored by then: no read of the
    # saver's flushed it.
    thread = Thread.objects.get(external_id=config["configurable"]["thread_id"])
    channels = [
        w.channel
        for row in LanggraphCheckpoint.objects.filter(thread=thread)
        for task in row.task_writes
        for w in task.writes
    ]
    channels += [
        w.channel for row in LanggraphWrite.objects.filter(thread=thread) for w in row.writes
    ]
    assert "__error__" in channels
    saver.close()


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_a_run_killed_mid_way_resumes_as_in_memory_from_the_same_kill_point(
    server: Server, durability: str
) -> None:
    kill_at = 7
    config = _config()
    thread_id = config["configurable"]["thread_id"]
    killed = subprocess.run(
        [
            sys.executable,
            str(CRASH_AGENT),
            server.url,
            server.api_key,
            thread_id,
            durability,
            str(kill_at),
        ],
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    # InMemorySaver at the same kill point: every put before it made (it has no queue).
    memory = InMemorySaver()
    memory_app = crash_graph(memory, kill_at=None)
    memory_config = _config()
    memory_app.invoke(FIRST, memory_config)
    history = [_ids(state.values) for state in memory_app.get_state_history(memory_config)]
    at_kill = [ids for ids in history if len(ids) == kill_at][0]  # before the node's 7th run

    saver = CtxadminSaver.from_url(server.url, server.api_key)
    app = crash_graph(saver)
    resumed = _ids(app.get_state(config).values)
    if durability == "sync":
        assert resumed == at_kill  # every put before the kill was stored
    else:
        # What async may lose: the puts still queued at the kill, and nothing more. The
        # state is one of InMemorySaver's, never a mix and never ahead of the kill.
        assert resumed in history and len(resumed) <= len(at_kill)
    # Resumed (or, when the kill came before anything was stored, run again from its input).
    app.invoke(None if saver.get_tuple(config) is not None else FIRST, config)
    assert _ids(app.get_state(config).values) == history[0]  # the whole run, as in memory
    saver.close()


def test_a_warm_restore_is_a_304_until_a_rollback_which_the_next_read_sees(
    server: Server,
) -> None:
    saver, counting = _saver(server)
    config = _config()
    app = crash_graph(saver)
    app.invoke(FIRST, config)
    first = saver.get_tuple(config)
    counting.seen.clear()
    again = saver.get_tuple(config)
    assert first is not None and again is not None
    assert [status for _, _, status in counting.seen] == [304]
    assert again.checkpoint == first.checkpoint and again.metadata == first.metadata
    # A rollback in the dashboard to the state after three steps: a new head.
    thread = Thread.objects.get(external_id=config["configurable"]["thread_id"])
    chosen = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread).order_by("checkpoint_id")
        if row.metadata.get("step") == 3
    )
    admin = factories.make_person(server.workspace, "ada", "admin")
    checkpoint_rollback(
        thread=thread, checkpoint=chosen.ctxadmin_checkpoint, actor=admin, reason="undo"
    )
    counting.seen.clear()
    after = saver.get_tuple(config)
    assert [status for _, _, status in counting.seen] == [200]
    assert after is not None
    assert after.checkpoint["id"] > first.checkpoint["id"]
    assert _ids(after.checkpoint["channel_values"]) == ["human-0", "step-1", "step-2", "step-3"]
    saver.close()
