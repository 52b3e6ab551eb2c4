"""An agent never resumes from tampered history unknowingly (docs/clients.md, "Tampered
history"): once an integrity check has found an event edited in the database, every LangGraph
read says so and where, and `CtxadminSaver` refuses to resume from a checkpoint whose messages
reach the break (`ChainBrokenError`), so neither the tool nor the model runs on the edited
history, unless the caller allows it explicitly. A checkpoint from before the break is still
read. An `interrupt()` approval names the call it asks about, and its decision still resumes."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from ctxadmin_client import ChainBrokenError
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from tests import factories
from tests.langgraph.conftest import Server
from tests.langgraph.graphs import ToolFakeChatModel, approval_graph
from threads.models import ApprovalRequest, Event, EventKind, Thread
from threads.services.approvals import approval_decide
from threads.services.integrity import integrity_check

PLAN = "I will refund order 42 ($120)."
EDITED = "I will refund order 42 ($12,000) and order 43."


class World:
    """What the agent did to the world and asked of its model: one scripted model, whichever
    graph (and saver) runs it."""

    def __init__(self) -> None:
        self.refunds: list[dict[str, Any]] = []
        self.model_inputs: list[list[BaseMessage]] = []
        self.model = ToolFakeChatModel(
            messages=iter(
                [
                    AIMessage(
                        PLAN,
                        tool_calls=[
                            {
                                "name": "refund",
                                "args": {"order": 42, "amount": 120},
                                "id": "call_refund_42",
                                "type": "tool_call",
                            }
                        ],
                    ),
                    AIMessage("Order 42 is refunded."),
                    AIMessage("Anything else?"),
                ]
            )
        )


def _refund_graph(saver: CtxadminSaver, world: World) -> Any:
    """agent ⇄ ToolNode([refund]), paused before the tools run: a reviewer looks at the
    planned refund before the graph is resumed with `invoke(None)`."""

    @tool
    def refund(order: int, amount: int) -> str:
        """Refund an order (money moves)."""
        world.refunds.append({"order": order, "amount": amount})
        return f"refunded ${amount} on order {order}"

    def agent(state: MessagesState) -> dict[str, Any]:
        world.model_inputs.append(list(state["messages"]))
        return {"messages": [world.model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([refund]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver, interrupt_before=["tools"])


def _planned(saver: CtxadminSaver, world: World) -> tuple[Any, RunnableConfig]:
    """The agent planned the refund and paused before running it."""
    app = _refund_graph(saver, world)
    config: RunnableConfig = {"configurable": {"thread_id": f"refund-{uuid.uuid4().hex[:8]}"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    assert app.get_state(config).next == ("tools",)
    assert world.refunds == [] and len(world.model_inputs) == 1
    return app, config


def _tamper_plan(external_id: str) -> int:
    """Someone with database access rewrites the agent's plan; the sweep finds it. Returns
    the edited event's seq."""
    thread = Thread.objects.get(external_id=external_id)
    plan = Event.objects.get(thread=thread, kind=EventKind.MESSAGE, data__content=PLAN)
    factories.tamper(plan, content=EDITED)
    verdict = integrity_check(thread=thread, full=True)
    assert not verdict.ok and verdict.first_bad_seq == plan.seq
    return plan.seq


def _read(server: Server, path: str) -> Any:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.api_key}"}
    ) as http:
        answer = http.get(path)
        answer.raise_for_status()
        return answer.json()


def test_a_sound_chain_resumes_and_its_reads_say_it_was_never_verified(
    server: Server, saver: CtxadminSaver
) -> None:
    world = World()
    app, config = _planned(saver, world)
    thread_id = config["configurable"]["thread_id"]
    latest = _read(server, f"/api/v1/threads/{thread_id}/langgraph/checkpoints/latest/")
    assert latest["integrity"] == {
        "chain_ok": True,
        "first_bad_seq": None,
        "verified_until": 0,
        "verified_at": None,  # no check has run: nothing is vouched for yet
        "reaches_break": False,
    }
    app.invoke(None, config)
    assert world.refunds == [{"order": 42, "amount": 120}]


def test_the_reads_name_the_break_and_the_saver_refuses_to_resume_past_it(
    server: Server, saver: CtxadminSaver
) -> None:
    world = World()
    app, config = _planned(saver, world)
    thread_id = config["configurable"]["thread_id"]
    bad_seq = _tamper_plan(thread_id)

    # Every LangGraph read says where the chain breaks, and whether it reaches the break.
    base = f"/api/v1/threads/{thread_id}/langgraph/checkpoints/"
    latest = _read(server, base + "latest/")
    assert latest["integrity"]["chain_ok"] is False
    assert latest["integrity"]["first_bad_seq"] == bad_seq
    assert latest["integrity"]["verified_until"] == bad_seq - 1
    assert latest["integrity"]["verified_at"] is not None
    assert latest["integrity"]["reaches_break"] is True
    by_id = _read(server, base + f"{latest['checkpoint_id']}/")
    assert by_id["integrity"] == latest["integrity"]
    listed = _read(server, base)["checkpoints"]
    assert [c["integrity"]["first_bad_seq"] for c in listed] == [bad_seq] * len(listed)
    reaching = {c["checkpoint_id"]: c["integrity"]["reaches_break"] for c in listed}
    assert reaching[latest["checkpoint_id"]] is True
    # The checkpoint standing on the request alone (step 0) reaches the break too: its pending
    # writes hold the edited plan, which a resume from it would apply. Only the input's (step
    # -1) does not. By step, not by cursor: pipelined, the agent's writes may be stored before
    # step 0's put, which then stands on the plan's seq.
    by_step = {c["metadata"]["step"]: reaching[c["checkpoint_id"]] for c in listed}
    assert by_step == {-1: False, 0: True, 1: True}

    # Resuming the paused refund: refused, and the refund never runs.
    with pytest.raises(ChainBrokenError) as refused:
        app.invoke(None, config)
    assert refused.value.first_bad_seq == bad_seq
    assert refused.value.code == "chain_broken"
    assert world.refunds == []
    # A new user message: refused before the model is asked anything.
    with pytest.raises(ChainBrokenError):
        app.invoke({"messages": [HumanMessage("and order 43 too")]}, config)
    assert len(world.model_inputs) == 1 and world.refunds == []
    # So does resume_command, which reads the same head.
    with pytest.raises(ChainBrokenError):
        saver.resume_command(config)

    # Every checkpoint whose messages (its own, its pending writes') all lie before the break
    # is still read, and holds nothing edited; every other is refused.
    for checkpoint in listed:
        wanted: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": "", **_id(checkpoint)}
        }
        if reaching[checkpoint["checkpoint_id"]]:
            with pytest.raises(ChainBrokenError):
                saver.get_tuple(wanted)
            continue
        found = saver.get_tuple(wanted)
        assert found is not None
        read = [
            *found.checkpoint["channel_values"].get("messages", []),
            *(m for _, _, value in found.pending_writes or [] for m in _messages(value)),
        ]
        assert "refund my order 42" in [m.content for m in read]
        assert all(m.content not in (PLAN, EDITED) for m in read)


def _messages(value: Any) -> list[BaseMessage]:
    values = value if isinstance(value, list) else [value]
    return [m for m in values if isinstance(m, BaseMessage)]


def _id(checkpoint: dict[str, Any]) -> dict[str, str]:
    return {"checkpoint_id": checkpoint["checkpoint_id"]}


def test_the_caller_may_resume_from_a_broken_chain_explicitly(
    server: Server, saver: CtxadminSaver
) -> None:
    world = World()
    _, config = _planned(saver, world)
    _tamper_plan(config["configurable"]["thread_id"])
    allowing = CtxadminSaver.from_url(server.url, server.api_key, allow_broken_chain=True)
    try:
        _refund_graph(allowing, world).invoke(None, config)
    finally:
        allowing.close()
    assert world.refunds == [{"order": 42, "amount": 120}]
    # The model's next input is the edited history: what the caller chose to accept.
    assert any(m.content == EDITED for m in world.model_inputs[-1])


def test_the_async_saver_refuses_as_the_sync_one_does(server: Server, saver: CtxadminSaver) -> None:
    world = World()
    _, config = _planned(saver, world)
    bad_seq = _tamper_plan(config["configurable"]["thread_id"])

    async def resume() -> None:
        async_saver = CtxadminSaver.from_url(server.url, server.api_key)
        try:
            await _refund_graph(async_saver, world).ainvoke(None, config)
        finally:
            await async_saver.aclose()

    with pytest.raises(ChainBrokenError) as refused:
        asyncio.run(resume())
    assert refused.value.first_bad_seq == bad_seq
    assert world.refunds == [] and len(world.model_inputs) == 1


def test_an_interrupt_approval_names_the_call_it_asks_about_and_still_resumes(
    server: Server, saver: CtxadminSaver
) -> None:
    app = approval_graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": f"hitl-{uuid.uuid4().hex[:8]}"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    [approval] = ApprovalRequest.objects.filter(
        thread__external_id=config["configurable"]["thread_id"]
    )
    assert approval.action == "langgraph.interrupt"
    assert approval.tool_name == "refund"
    assert approval.arguments["tool_call_id"] == "call_r1"
    assert approval.arguments["tool_arguments"] == {"order": 42, "amount": 120}
    reviewer = factories.make_person(server.workspace, "rita", "reviewer")
    approval_decide(
        approval=ApprovalRequest.objects.select_related("thread", "thread__workspace").get(
            pk=approval.pk
        ),
        actor=reviewer,
        decision="reject",
        reason="not this customer",
    )
    command = saver.resume_command(config, timeout=5)
    assert command is not None and isinstance(command.resume, dict)
    assert command.resume["approved"] is False
    app.invoke(command, config)
    assert app.get_state(config).values["messages"][-1].content == "Refund rejected."


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_durability_mode_is_refused_and_resumes_when_allowed(
    server: Server, saver: CtxadminSaver, durability: Any
) -> None:
    world = World()
    app = _refund_graph(saver, world)
    config: RunnableConfig = {"configurable": {"thread_id": f"refund-{uuid.uuid4().hex[:8]}"}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config, durability=durability)
    assert app.get_state(config).next == ("tools",)
    _tamper_plan(config["configurable"]["thread_id"])
    with pytest.raises(ChainBrokenError):
        app.invoke(None, config, durability=durability)
    assert world.refunds == [] and len(world.model_inputs) == 1
    allowing = CtxadminSaver.from_url(server.url, server.api_key, allow_broken_chain=True)
    try:
        _refund_graph(allowing, world).invoke(None, config, durability=durability)
    finally:
        allowing.close()
    assert world.refunds == [{"order": 42, "amount": 120}] and len(world.model_inputs) == 2


def test_a_decision_does_not_resume_an_interrupt_over_tampered_history(
    server: Server, saver: CtxadminSaver
) -> None:
    app = approval_graph(saver)
    thread_id = f"hitl-{uuid.uuid4().hex[:8]}"
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    app.invoke({"messages": [HumanMessage("refund my order 42")]}, config)
    thread = Thread.objects.get(external_id=thread_id)
    plan = Event.objects.get(
        thread=thread,
        kind=EventKind.MESSAGE,
        data__content="I will refund order 42 ($120). Needs approval.",
    )
    factories.tamper(plan, content="I will refund order 42 ($12,000). Needs approval.")
    assert integrity_check(thread=thread, full=True).first_bad_seq == plan.seq
    last_seq = Thread.objects.get(pk=thread.pk).last_seq
    with pytest.raises(ChainBrokenError):
        app.invoke(Command(resume="yes"), config)
    # The approving node never ran: nothing more reached the log.
    assert Thread.objects.get(pk=thread.pk).last_seq == last_seq
