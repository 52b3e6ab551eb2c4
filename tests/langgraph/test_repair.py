"""The repair loop (docs/langgraph.md, "Agent frameworks"): an admin's rollback to a `langgraph:`
checkpoint makes its state the LangGraph head again, with the side effects after it listed for the
agent; an `interrupt()` is an approval request, and the reviewer's decision is what the graph
resumes with."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from ctxadmin_client import Client
from ctxadmin_client._http import Call
from ctxadmin_client.langgraph import CtxadminSaver
from django.test import Client as DjangoClient
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from tests import factories
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import ToolFakeChatModel, tool_loop_graph
from threads.models import ApprovalRequest, AuditEntry, SideEffect, SummaryVersion, Thread
from threads.selectors import rollback_preview
from threads.selectors.metrics import approval_figures
from threads.services.approvals import approval_decide
from threads.services.folding import fold_run
from threads.services.rollback import checkpoint_rollback

REFUNDS: list[str] = []


@tool
def refund(order_id: str) -> str:
    """Refund an order (a side effect: money moves)."""
    REFUNDS.append(order_id)
    return f"refunded order {order_id}"


def _refund_agent(saver: CtxadminSaver, inputs: list[list[BaseMessage]]) -> Any:
    """A fake model that says hello, refunds order 42, then answers; every model input is
    recorded in `inputs`."""
    model = ToolFakeChatModel(
        messages=iter(
            [
                AIMessage("Hello! How can I help?"),
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "refund",
                            "args": {"order_id": "42"},
                            "id": "call_refund_42",
                            "type": "tool_call",
                        }
                    ],
                ),
                AIMessage("Order 42 is refunded."),
                AIMessage("Order 42 was refunded already; I will not refund it again."),
            ]
        )
    )

    return tool_loop_graph(saver, model, [refund], inputs)


def _thread(server: Server, config: RunnableConfig) -> Thread:
    return Thread.objects.get(
        workspace=server.workspace, external_id=config["configurable"]["thread_id"]
    )


def test_a_rollback_resumes_the_agent_from_the_restored_state_with_the_later_side_effects(
    server: Server,
) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    inputs: list[list[BaseMessage]] = []
    app = _refund_agent(saver, inputs)
    config: RunnableConfig = {"configurable": {"thread_id": "refund-" + uuid.uuid4().hex[:8]}}
    REFUNDS.clear()
    app.invoke({"messages": [HumanMessage("Hi")]}, config)
    app.invoke({"messages": [HumanMessage("Refund order 42")]}, config)
    assert REFUNDS == ["42"]
    thread = _thread(server, config)
    effect = SideEffect.objects.get(thread=thread)
    assert (effect.tool_name, effect.idempotency_key, effect.status) == (
        "refund",
        "call_refund_42",
        "succeeded",
    )

    # The end of the first turn: the greeting answered, before the refund was asked for.
    before_refund = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread).order_by("checkpoint_id")
        if row.metadata.get("step") == 1
    )
    chosen = before_refund.ctxadmin_checkpoint
    assert chosen.label == f"langgraph:{before_refund.checkpoint_id}"
    preview = rollback_preview(thread=thread, checkpoint=chosen)
    assert preview["safe"] and preview["langgraph"]
    assert [e["tool_name"] for e in preview["side_effects"]] == ["refund"]
    old_head = saver.get_tuple(config)
    assert old_head is not None

    admin = factories.make_person(server.workspace, "ada", "admin")
    # The thread was never folded: no summary head to move, only the LangGraph head.
    version = checkpoint_rollback(
        thread=thread, checkpoint=chosen, actor=admin, reason="bad refund"
    )
    assert version is None

    head = saver.get_tuple(config)
    assert head is not None and head.parent_config is not None
    new_id = head.config["configurable"]["checkpoint_id"]
    assert new_id > old_head.config["configurable"]["checkpoint_id"]
    assert (
        head.parent_config["configurable"]["checkpoint_id"]
        == (old_head.config["configurable"]["checkpoint_id"])
    )
    assert head.metadata["source"] == "update"
    assert head.metadata["step"] == old_head.metadata["step"] + 1
    assert head.checkpoint["channel_versions"] == before_refund.checkpoint["channel_versions"]
    restored = head.checkpoint["channel_values"]["messages"]
    # The note goes first (a leading system message: every provider's shape accepts it there).
    note, *rest = restored
    assert [m.content for m in rest] == ["Hi", "Hello! How can I help?"]
    assert isinstance(note, SystemMessage) and note.id == f"ctxadmin-repair-{new_id}"
    # Reading it again adds nothing twice.
    again = saver.get_tuple(config)
    assert again is not None and len(again.checkpoint["channel_values"]["messages"]) == 3
    audit = AuditEntry.objects.filter(thread=thread, action="thread.rollback").get()
    assert audit.after is not None
    assert audit.after["langgraph"]["checkpoint_id"] == new_id
    assert audit.after["langgraph"]["side_effects"] == 1

    app.invoke({"messages": [HumanMessage("Is order 42 refunded?")]}, config)
    model_input = inputs[-1]
    assert [m.content for m in model_input[1:3]] == ["Hi", "Hello! How can I help?"]
    assert "Refund order 42" not in [m.content for m in model_input]
    notes = [m for m in model_input if isinstance(m, SystemMessage)]
    assert len(notes) == 1
    text = str(notes[0].content)
    for expected in ("refund", '{"order_id": "42"}', "succeeded", "call_refund_42"):
        assert expected in text
    assert model_input[-1].content == "Is order 42 refunded?"
    assert REFUNDS == ["42"]  # not repeated
    # The note was mirrored into the log once, as a system message, with the next turn.
    assert thread.events.filter(client_event_id=f"ctxadmin-repair-{new_id}").count() == 1
    saver.close()


def test_a_rollback_through_the_api_answers_the_new_langgraph_head(server: Server) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools=["refund"])
    app = _refund_agent(saver, [])
    config: RunnableConfig = {"configurable": {"thread_id": "refund-api"}}
    app.invoke({"messages": [HumanMessage("Hi")]}, config)
    app.invoke({"messages": [HumanMessage("Refund order 42")]}, config)
    thread = _thread(server, config)
    chosen = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread)
        if row.metadata.get("step") == 1
    ).ctxadmin_checkpoint
    admin = factories.make_person(server.workspace, "ada", "admin")
    browser = DjangoClient()
    # A session as the login page would leave it (the login throttle needs the request
    # that Client.login does not give it).
    browser.force_login(admin)
    answer = browser.post(
        f"/api/v1/threads/{thread.pk}/rollback/",
        {"checkpoint": chosen.pk, "reason": "refund was wrong"},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["version"] is None and body["restored_from"] == chosen.pk
    head = saver.get_tuple(config)
    assert head is not None
    assert body["langgraph"]["checkpoint_id"] == head.config["configurable"]["checkpoint_id"]
    assert [e["idempotency_key"] for e in body["langgraph"]["side_effects"]] == ["call_refund_42"]
    saver.close()


def _approval_graph(saver: CtxadminSaver) -> Any:
    def plan(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("I will refund order 42 ($120). Needs approval.")]}

    def approve(state: MessagesState) -> dict[str, Any]:
        decision = interrupt({"question": "approve refund?", "order": 42, "amount": 120})
        verdict = "done" if decision["approved"] else "rejected"
        return {"messages": [AIMessage(f"Refund {verdict}: {decision['reason']}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("plan", plan)
    graph.add_node("approve", approve)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    return graph.compile(checkpointer=saver)


def _pending(client: Client) -> Sequence[dict[str, Any]]:
    """`GET /api/v1/approvals/?status=pending`, as the agent's key sees it."""
    answer: Sequence[dict[str, Any]] = client._call(
        Call("GET", "api/v1/approvals/", params={"status": "pending"})
    )
    return answer


def test_an_interrupt_is_an_approval_request_and_the_decision_resumes_the_graph(
    server: Server, saver: CtxadminSaver
) -> None:
    app = _approval_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "hitl-refund"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    assert app.get_state(config).next == ("approve",)
    assert saver.resume_command(config) is None  # nobody decided yet

    with Client(server.url, server.api_key) as client:
        pending = [a for a in _pending(client) if a["action"] == "langgraph.interrupt"]
    assert len(pending) == 1
    [request] = pending
    assert request["thread_external_id"] == "hitl-refund"
    assert request["arguments"]["value"] == {
        "question": "approve refund?",
        "order": 42,
        "amount": 120,
    }
    [interrupt_] = app.get_state(config).interrupts
    assert request["arguments"]["interrupt_id"] == interrupt_.id

    # The same interrupt read again (a repeated put_writes) opens nothing more.
    app.invoke(None, config)
    assert ApprovalRequest.objects.filter(thread__external_id="hitl-refund").count() == 1

    reviewer = factories.make_person(server.workspace, "rita", "reviewer")
    approval_decide(
        approval=ApprovalRequest.objects.select_related("thread", "thread__workspace").get(
            pk=request["id"]
        ),
        actor=reviewer,
        decision="approve",
        reason="customer verified",
    )
    command = saver.resume_command(config, timeout=5)
    assert command is not None
    assert command.resume == {"approved": True, "reason": "customer verified", "decided_by": "rita"}
    out = app.invoke(command, config)
    assert out["messages"][-1].content == "Refund done: customer verified"
    assert app.get_state(config).next == ()


def test_a_rollback_to_a_langgraph_checkpoint_restores_the_summary_that_stood_at_its_cursor(
    server: Server,
) -> None:
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    app = _refund_agent(saver, [])
    config: RunnableConfig = {"configurable": {"thread_id": "refund-folded"}}
    app.invoke({"messages": [HumanMessage("Hi")]}, config)
    thread = _thread(server, config)
    first = fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "test"})
    app.invoke({"messages": [HumanMessage("Refund order 42")]}, config)
    # An automatic fold (the refund's result is a state change) may have folded the turn
    # already; then the manual one finds nothing new, and the automatic one is the second.
    second = (
        fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "test"})
        or SummaryVersion.objects.filter(thread=thread, phase="committed")
        .order_by("-version")
        .first()
    )
    assert first is not None and second is not None
    chosen = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread)
        if row.metadata.get("step") == 1
    )
    # The first fold covered the first turn, the second one the refund too.
    assert first.covered_until <= chosen.cursor < second.covered_until
    admin = factories.make_person(server.workspace, "ada", "admin")
    version = checkpoint_rollback(
        thread=thread, checkpoint=chosen.ctxadmin_checkpoint, actor=admin, reason="bad refund"
    )
    assert version is not None
    assert version.version == second.version + 1
    assert (version.content, version.covered_until) == (first.content, first.covered_until)
    assert version.restored_from_id == chosen.ctxadmin_checkpoint_id
    second.refresh_from_db()
    assert second.phase == "rolled_back"
    thread.refresh_from_db()
    assert (thread.head_version, thread.covered_until) == (version.version, first.covered_until)
    head = saver.get_tuple(config)
    assert head is not None and head.metadata["source"] == "update"
    saver.close()


@tool
def lookup(order_id: str) -> str:
    """Look an order up (no side effect)."""
    return f"order {order_id}: $120, paid"


def _reviewed_refund_agent(saver: Any) -> Any:
    """agent → approve (an `interrupt()` before a side effect is run) → tools → agent: the
    model looks order 42 up, then refunds it."""
    model = ToolFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "lookup", "args": {"order_id": "42"}, "id": "call_lookup_42"}
                    ],
                ),
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "refund", "args": {"order_id": "42"}, "id": "call_refund_42"}
                    ],
                ),
                AIMessage("Order 42 is refunded."),
            ]
        )
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def approve(state: MessagesState) -> dict[str, Any]:
        calls = getattr(state["messages"][-1], "tool_calls", [])
        if any(call["name"] == "refund" for call in calls):
            interrupt({"question": "approve refund?", "calls": [c["id"] for c in calls]})
        return {}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve)
    graph.add_node("tools", ToolNode([lookup, refund]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "approve", END: END})
    graph.add_edge("approve", "tools")
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


class _SlowPutSaver(CtxadminSaver):
    """A saver whose puts take a while (a slow network, a busy server): with LangGraph's
    default durability a task's writes then reach the server before the background put of
    the checkpoint the task ran from."""

    def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        time.sleep(0.15)
        return super().put(*args, **kwargs)


def test_an_interrupts_approval_request_follows_the_call_it_asks_about_with_async_durability(
    server: Server,
) -> None:
    saver = _SlowPutSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    app = _reviewed_refund_agent(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "reviewed-" + uuid.uuid4().hex[:8]}}
    app.invoke({"messages": [HumanMessage("Refund order 42")]}, config)  # durability "async"
    assert app.get_state(config).next == ("approve",)
    thread = _thread(server, config)
    log = [
        (e.kind, e.data.get("tool_name") or e.data.get("action") or e.data.get("role"))
        for e in thread.events.order_by("seq")
    ]
    assert log == [
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "lookup"),
        ("tool_result", None),
        ("message", "assistant"),
        ("tool_call", "refund"),
        ("approval_request", "refund"),  # it names the call it asks about
    ], log
    [approval] = ApprovalRequest.objects.filter(thread=thread)
    assert approval.status == "pending" and approval.action == "langgraph.interrupt"
    [interrupt_] = app.get_state(config).interrupts
    assert approval.arguments["interrupt_id"] == interrupt_.id
    saver.close()


def _openai_valid(messages: Sequence[BaseMessage]) -> bool:
    """What the OpenAI chat API requires of a conversation's tool calls: an assistant message
    with tool_calls is followed at once by one tool message per call — or ends the list, its
    calls pending (what a graph's tool node runs next)."""
    converted = convert_to_openai_messages(list(messages))
    for i, message in enumerate(converted):
        calls = {call["id"] for call in message.get("tool_calls") or []}
        if calls and i + 1 < len(converted):
            after = converted[i + 1 : i + 1 + len(calls)]
            if {m.get("tool_call_id") for m in after if m.get("role") == "tool"} != calls:
                return False
    return True


def test_a_rollback_to_a_pending_read_only_call_keeps_the_call_last_and_runs_it_next(
    server: Server,
) -> None:
    """The chosen state ends with an AI message's call of a read-only tool: the repair note
    goes first, so the calls still end the list — `tools_condition` routes to the tools, the
    model's input is a valid conversation — and the resumed graph runs them (a side-effecting
    call the ledger holds is not run again: tests/langgraph/test_exactly_once.py)."""
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    inputs: list[list[BaseMessage]] = []
    model = ToolFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[{"name": "lookup", "args": {"order_id": "42"}, "id": "call_l"}],
                ),
                AIMessage(
                    "",
                    tool_calls=[{"name": "refund", "args": {"order_id": "42"}, "id": "call_r"}],
                ),
                AIMessage("Order 42 is refunded."),
                AIMessage("Order 42 costs $120 and was refunded already."),
            ]
        )
    )

    app = tool_loop_graph(saver, model, [lookup, refund], inputs)
    config: RunnableConfig = {"configurable": {"thread_id": "pending-" + uuid.uuid4().hex[:8]}}
    REFUNDS.clear()
    app.invoke({"messages": [HumanMessage("Refund order 42")]}, config)
    assert REFUNDS == ["42"]
    thread = _thread(server, config)
    # Right after the model asked to look the order up, before the lookup and the refund ran.
    chosen = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread).order_by("checkpoint_id")
        if row.metadata.get("step") == 1
    )
    admin = factories.make_person(server.workspace, "ada", "admin")
    checkpoint_rollback(
        thread=thread, checkpoint=chosen.ctxadmin_checkpoint, actor=admin, reason="bad refund"
    )

    state = app.get_state(config)
    restored = state.values["messages"]
    assert [type(m).__name__ for m in restored] == ["SystemMessage", "HumanMessage", "AIMessage"]
    assert restored[0].id.startswith("ctxadmin-repair-")
    assert "refund" in str(restored[0].content)
    assert tools_condition(state.values) == "tools"
    assert _openai_valid(restored)
    assert state.next == ("tools",)

    # Resumes: the pending lookup runs again — a second result for call_l, which the log
    # stores and flags; it never silently stops following the agent.
    app.invoke(None, config)
    assert _openai_valid(inputs[-1])
    assert [type(m).__name__ for m in inputs[-1]] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    assert getattr(inputs[-1][3], "tool_call_id", None) == "call_l"
    assert app.get_state(config).values["messages"][-1].content.startswith("Order 42 costs")
    assert REFUNDS == ["42"]
    # Every message of the agent's state is in the log, the second lookup result flagged.
    logged = set(thread.events.values_list("client_event_id", flat=True))
    assert all(m.id in logged for m in app.get_state(config).values["messages"])
    assert thread.events.filter(kind="tool_result", data__tool_call_id="call_l").count() == 2
    saver.close()


def _thread_approvals(client: Client, thread_id: str) -> Sequence[dict[str, Any]]:
    answer: Sequence[dict[str, Any]] = client._call(
        Call("GET", f"api/v1/threads/{thread_id}/approvals/")
    )
    return answer


def test_a_copy_brings_its_pending_interrupt_and_a_delete_closes_the_sources(
    server: Server, saver: CtxadminSaver
) -> None:
    """copy_thread of a graph paused on interrupt(): the copy's reviewers see the request and
    their decision resumes the copy. delete_thread of the source closes its request, recorded
    as a decision (an event, an audit entry), so no queue or gauge counts what nobody can
    resume."""
    app = _approval_graph(saver)
    source: RunnableConfig = {"configurable": {"thread_id": "hitl-src-" + uuid.uuid4().hex[:6]}}
    target: RunnableConfig = {"configurable": {"thread_id": "hitl-dst-" + uuid.uuid4().hex[:6]}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, source)
    saver.copy_thread(source["configurable"]["thread_id"], target["configurable"]["thread_id"])
    assert app.get_state(target).next == ("approve",)
    [interrupt_] = app.get_state(target).interrupts
    with Client(server.url, server.api_key) as client:
        [copied] = _thread_approvals(client, target["configurable"]["thread_id"])
    assert copied["status"] == "pending"
    assert copied["arguments"]["interrupt_id"] == interrupt_.id
    assert approval_figures()["pending"] == 2

    reviewer = factories.make_person(server.workspace, "rita", "reviewer")
    approval_decide(
        approval=ApprovalRequest.objects.select_related("thread", "thread__workspace").get(
            pk=copied["id"]
        ),
        actor=reviewer,
        decision="approve",
        reason="ok in the copy",
    )
    command = saver.resume_command(target, timeout=5)
    assert command is not None
    assert app.invoke(command, target)["messages"][-1].content == "Refund done: ok in the copy"

    saver.delete_thread(source["configurable"]["thread_id"])
    src = _thread(server, source)
    [closed] = ApprovalRequest.objects.filter(thread=src)
    assert closed.status == "rejected" and closed.decided_by is None
    assert "deleted" in closed.reason
    assert closed.decision_event is not None
    assert closed.decision_event.kind == "approval_decision"
    assert src.events.order_by("-seq").first() == closed.decision_event
    assert AuditEntry.objects.filter(action="approval.close", target_id=str(closed.pk)).exists()
    assert approval_figures()["pending"] == 0
    with Client(server.url, server.api_key) as client:
        assert not [a for a in _pending(client) if a["action"] == "langgraph.interrupt"]


def test_a_prune_closes_the_pending_interrupts_of_the_checkpoints_it_deletes(
    server: Server, saver: CtxadminSaver
) -> None:
    """keep_latest keeps the head, and the interrupt it is paused on stays pending; a
    pending interrupt of a checkpoint that goes is closed."""
    app = _approval_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "hitl-prune-" + uuid.uuid4().hex[:6]}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    # A second run from the start pauses again, on another checkpoint: the first interrupt is
    # left behind, undecided.
    app.invoke({"messages": [HumanMessage("and order 43")]}, config)
    thread = _thread(server, config)
    interrupts = ApprovalRequest.objects.filter(thread=thread).order_by("pk")
    assert [a.status for a in interrupts] == ["pending", "pending"]
    saver.prune([config["configurable"]["thread_id"]], strategy="keep_latest")
    assert [a.status for a in interrupts.all()] == ["rejected", "pending"]
    [head_interrupt] = app.get_state(config).interrupts
    assert interrupts.last().arguments["interrupt_id"] == head_interrupt.id  # type: ignore[union-attr]
    saver.prune([config["configurable"]["thread_id"]], strategy="delete")
    assert [a.status for a in interrupts.all()] == ["rejected", "rejected"]


def test_a_rollback_closes_the_interrupts_the_restored_state_no_longer_waits_on(
    server: Server, saver: CtxadminSaver
) -> None:
    """Paused at `interrupt()`, rolled back to a checkpoint before it: the graph resumes from
    the new head, which no pending interrupt names, so the old request is closed as a
    recorded rejection and leaves the reviewers' queue; asked again, the agent opens a new
    one."""
    app = _approval_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "hitl-rolled-back"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    assert app.get_state(config).next == ("approve",)
    thread = _thread(server, config)
    [asked] = ApprovalRequest.objects.filter(thread=thread, status="pending")
    chosen = min(
        LanggraphCheckpoint.objects.filter(thread=thread, checkpoint_ns=""),
        key=lambda row: row.checkpoint_id,
    )
    admin = factories.make_person(server.workspace, "ada", "admin")
    checkpoint_rollback(
        thread=thread, checkpoint=chosen.ctxadmin_checkpoint, actor=admin, reason="start over"
    )
    asked.refresh_from_db()
    assert asked.status == "rejected" and "rolled back to langgraph:" in asked.reason
    assert asked.decision_event is not None and asked.decision_event.kind == "approval_decision"
    assert AuditEntry.objects.filter(action="approval.close", target_id=str(asked.pk)).exists()
    assert approval_figures()["pending"] == 0
    assert saver.resume_command(config) is None
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    assert ApprovalRequest.objects.filter(thread=thread, status="pending").count() == 1
