"""A LangGraph thread's page says where the graph stands — the node it stopped at, what runs
next, which node an interrupt stopped — read from the checkpoints a real graph stored through
CtxadminSaver on a live server, and agreeing with LangGraph's own `get_state().next`."""

from __future__ import annotations

import re
import uuid
from typing import Any

from ctxadmin_client.langgraph import CtxadminSaver
from django.test import Client
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from integrations.langgraph_checkpointer.selectors.graph_position import langgraph_graph_position
from tests import factories as f
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import add, approval_graph, get_weather, scripted_model, tool_loop_graph
from threads.models import ApprovalRequest, Thread


def dashboard(server: Server) -> Client:
    client = Client()
    client.force_login(f.make_person(server.workspace, "operator-lg", "operator"))
    return client


def position(client: Client, external_id: str) -> dict[str, Any]:
    thread = Thread.objects.get(external_id=external_id)
    page = client.get(f"/threads/{thread.pk}/").content.decode()
    facts = {}
    for name in ("stopped", "next", "waiting"):
        found = re.search(rf'<dd class="graph-{name}">(.*?)</dd>', page, re.S)
        facts[name] = found.group(1) if found else None
    facts["next_nodes"] = tuple(
        re.findall(r'<code class="graph-node">([^<]*)</code>', facts["next"] or "")
    )
    facts["stopped_nodes"] = tuple(
        re.findall(r'<code class="graph-node">([^<]*)</code>', facts["stopped"] or "")
    )
    return facts


def config() -> RunnableConfig:
    return {"configurable": {"thread_id": "lg-" + uuid.uuid4().hex[:8]}}


def test_an_interrupt_before_tools_shows_the_node_it_stopped_after_and_tools_next(
    server: Server, saver: CtxadminSaver
) -> None:
    app = tool_loop_graph(saver, scripted_model(), [get_weather, add], interrupt_before=["tools"])
    cfg = config()
    client = dashboard(server)
    app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, cfg)
    assert app.get_state(cfg).next == ("tools",)
    shown = position(client, cfg["configurable"]["thread_id"])
    assert shown["next_nodes"] == ("tools",)
    assert "after" in shown["stopped"] and shown["stopped_nodes"] == ("agent",)
    # Resumed: the tool runs, the agent answers, the graph ends; the page follows each stop.
    app.invoke(None, cfg)
    assert app.get_state(cfg).next == ()
    shown = position(client, cfg["configurable"]["thread_id"])
    assert shown["next_nodes"] == () and "nothing: the graph finished" in shown["next"]
    assert shown["stopped_nodes"] == ("agent",)


def test_every_stop_of_a_tool_loop_agrees_with_langgraph(
    server: Server, saver: CtxadminSaver
) -> None:
    """Stopping before both nodes, the graph pauses at every step; at each, the page's "runs
    next" is LangGraph's own."""
    app = tool_loop_graph(
        saver, scripted_model(), [get_weather, add], interrupt_before=["tools", "agent"]
    )
    cfg = config()
    client = dashboard(server)
    app.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, cfg)
    seen = []
    for _ in range(8):
        expected = app.get_state(cfg).next
        assert position(client, cfg["configurable"]["thread_id"])["next_nodes"] == tuple(
            sorted(expected)
        )
        seen.append(expected)
        if not expected:
            break
        app.invoke(None, cfg)
    assert ("tools",) in seen and ("agent",) in seen and seen[-1] == ()


def test_an_interrupt_shows_the_node_it_interrupted_and_the_approval_it_waits_for(
    server: Server, saver: CtxadminSaver
) -> None:
    app = approval_graph(saver)
    cfg = config()
    client = dashboard(server)
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, cfg)
    state = app.get_state(cfg)
    assert state.next == ("approve",) and state.tasks[0].interrupts
    shown = position(client, cfg["configurable"]["thread_id"])
    assert "interrupted in" in shown["stopped"] and shown["stopped_nodes"] == ("approve",)
    assert shown["next_nodes"] == ("approve",) and "when resumed" in shown["next"]
    approval = ApprovalRequest.objects.get(thread__external_id=cfg["configurable"]["thread_id"])
    assert f"#approval-{approval.pk}" in shown["waiting"]
    app.invoke(Command(resume="yes"), cfg)
    shown = position(client, cfg["configurable"]["thread_id"])
    assert shown["waiting"] is None and "interrupted" not in shown["stopped"]
    assert shown["stopped_nodes"] == ("approve",) and shown["next_nodes"] == ()


def test_a_thread_without_checkpoints_shows_no_position(server: Server) -> None:
    thread = f.make_thread(server.workspace, external_id="plain")
    f.append(thread, f.user("hello"))
    page = dashboard(server).get(f"/threads/{thread.pk}/").content.decode()
    assert "LangGraph position" not in page


def test_the_position_costs_a_few_queries_whatever_the_history(
    server: Server, saver: CtxadminSaver, django_assert_max_num_queries: Any
) -> None:
    """Read on every tab of a thread: one query without checkpoints, at most five with them."""
    plain = f.make_thread(server.workspace, external_id="plain")
    with django_assert_max_num_queries(1):
        assert langgraph_graph_position(thread=plain) is None
    app = approval_graph(saver)
    cfg = config()
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, cfg)
    thread = Thread.objects.get(external_id=cfg["configurable"]["thread_id"])
    with django_assert_max_num_queries(5):
        found = langgraph_graph_position(thread=thread)
    assert found is not None and found.position.interrupted == ("approve",)
    assert len(found.approvals) == 1
