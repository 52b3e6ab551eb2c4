"""Exactly once through CtxadminSaver (docs/langgraph.md, "Agent frameworks", docs/clients.md,
"Exactly once with LangGraph"): a real tool-loop graph (agent ⇄ ToolNode) whose `refund` tool is a
side effect and counts its calls, repaired every way an operator can — a rollback before the call,
at the pending call, after its result; a resolution, `succeeded` or `failed`, of a call whose tool
raised and killed the run — and resumed with `invoke(None)` and with a new user message, sync
and async, with each durability. Each time: the refund ran once per idempotency key the agent
meant to use, every message of the agent's state is in the log (GET events), and every model
input is a request the providers accept (tests/provider_shapes.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from ctxadmin_client import Client, OutcomeUnknown, SideEffectPending, SideEffectRecorded
from ctxadmin_client._langgraph_pipeline import pipelined
from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from tests import factories
from tests.langgraph.conftest import Server
from tests.provider_shapes import assert_provider_shapes
from threads.models import ApprovalRequest, SideEffect, Thread
from threads.services.approvals import approval_decide
from threads.services.rollback import checkpoint_rollback
from threads.services.side_effects import side_effect_resolve

KEY = "call_refund_42"
ASK = "Look order 42 up and refund it"
LATER = "Is order 42 refunded?"
ASK_DIRECTLY = "Refund order 42 now"
ASK_BOTH = "Refund order 42 and look it up"


@dataclass
class World:
    """What the tools did to the world: each refund's idempotency key, in order; and what the
    refund does when called (`raises`: an exception to raise after it took effect)."""

    refunds: list[str] = field(default_factory=list)
    raises: BaseException | None = None
    inputs: list[list[BaseMessage]] = field(default_factory=list)


class PolicyModel:
    """A scripted chat model that decides from its input, as a real one would, and records
    every input: it looks the order up, then refunds it with the key KEY unless its input
    already tells that the refund happened (the refund's result, or a note naming it); after
    the refund's result, and to any other question, it answers in text."""

    def __init__(self, world: World) -> None:
        self.world = world

    def invoke(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self.world.inputs.append(list(messages))
        last = messages[-1]
        told = any(
            (m.type == "system" and KEY in str(m.content))
            or (m.type == "tool" and getattr(m, "tool_call_id", "") == KEY)
            for m in messages
        )
        if last.type == "human" and last.content == ASK:
            return _calls("lookup", "call_lookup_42")
        if last.type == "human" and last.content == ASK_DIRECTLY:
            return _calls("refund", KEY)
        if last.type == "human" and last.content == ASK_BOTH:
            both = _calls("refund", KEY)
            both.tool_calls.append(
                {
                    "name": "lookup",
                    "args": {"order_id": "42"},
                    "id": "call_lookup_42",
                    "type": "tool_call",
                }
            )
            return both
        if last.type == "tool" and getattr(last, "tool_call_id", "") == "call_lookup_42":
            if told:
                return AIMessage("Order 42 was refunded already; I will not refund it again.")
            return _calls("refund", KEY)
        if last.type == "tool":
            return AIMessage(f"The refund of order 42: {last.content}")
        return AIMessage("Order 42: see the refund's result above.")


def _calls(name: str, call_id: str) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[{"name": name, "args": {"order_id": "42"}, "id": call_id, "type": "tool_call"}],
    )


def refund_tools(world: World) -> list[Any]:
    """The agent's tools: a read-only lookup and the side-effecting refund, which counts its
    calls in `world` (and raises `world.raises` after it took effect)."""

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up (no side effect)."""
        return f"order {order_id}: $120, paid"

    @tool
    def refund(order_id: str) -> str:
        """Refund an order (a side effect: money moves)."""
        world.refunds.append(order_id)
        if world.raises is not None:
            raise world.raises
        return f"refunded order {order_id}"

    return [lookup, refund]


def refund_agent(saver: CtxadminSaver, world: World, handle_tool_errors: bool = False) -> Any:
    lookup, refund = refund_tools(world)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [PolicyModel(world).invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup, refund], handle_tool_errors=handle_tool_errors))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


class Runner:
    """Runs the agent with the sync API (one saver throughout) or the async one (a saver per
    event loop: its async HTTP client belongs to one), with a durability mode."""

    def __init__(self, server: Server, world: World, *, mode: str, durability: str) -> None:
        self.server, self.world, self.mode, self.durability = server, world, mode, durability
        self.config: RunnableConfig = {"configurable": {"thread_id": "once-" + uuid.uuid4().hex}}
        self.saver = self._saver()

    def _saver(self) -> CtxadminSaver:
        return CtxadminSaver.from_url(
            self.server.url, self.server.api_key, side_effect_tools={"refund"}
        )

    def run(self, value: Any, *, handle_tool_errors: bool = False) -> None:
        if self.mode == "sync":
            app = refund_agent(self.saver, self.world, handle_tool_errors)
            app.invoke(value, self.config, durability=self.durability)
            return

        async def go() -> None:
            saver = self._saver()
            try:
                app = refund_agent(saver, self.world, handle_tool_errors)
                await app.ainvoke(value, self.config, durability=self.durability)
            finally:
                await saver.aclose()

        asyncio.run(go())

    def state(self) -> list[BaseMessage]:
        values = refund_agent(self.saver, self.world).get_state(self.config).values
        messages: list[BaseMessage] = values["messages"]
        return messages

    @property
    def thread(self) -> Thread:
        return Thread.objects.get(
            workspace=self.server.workspace, external_id=self.config["configurable"]["thread_id"]
        )

    def close(self) -> None:
        self.saver.close()


def _rollback(runner: Runner, step: int) -> None:
    thread = runner.thread
    row = next(
        row
        for row in LanggraphCheckpoint.objects.filter(thread=thread, checkpoint_ns="")
        if row.metadata.get("step") == step and row.metadata.get("source") == "loop"
    )
    admin = factories.make_person(runner.server.workspace, "ada-" + uuid.uuid4().hex[:6], "admin")
    checkpoint_rollback(
        thread=thread, checkpoint=row.ctxadmin_checkpoint, actor=admin, reason="repair"
    )


def _resolve(runner: Runner, status: str) -> None:
    operator = factories.make_person(
        runner.server.workspace, "otto-" + uuid.uuid4().hex[:6], "operator"
    )
    side_effect_resolve(
        side_effect=SideEffect.objects.select_related("thread", "thread__workspace").get(
            thread=runner.thread, idempotency_key=KEY
        ),
        actor=operator,
        status=status,
        evidence=f"the payment system says refund {KEY} {status}",
    )


def _in_the_log(runner: Runner) -> None:
    """Every message of the agent's state is in the thread's log (GET events)."""
    with Client(runner.server.url, runner.server.api_key) as client:
        events = list(client.thread(runner.config["configurable"]["thread_id"]).events())
    keys = {str(e.get("client_event_id")).split("#")[0] for e in events}
    state = runner.state()
    missing = [m for m in state if m.id not in keys]
    assert not missing, f"not in the log: {missing}"


# Rollback targets, by the step of the checkpoint chosen (source "loop"): 0 the question,
# 1 the lookup asked, 2 its result, 3 the refund asked, 4 its result, 5 the answer.
TARGETS = {"before the call": 2, "at the pending call": 3, "after its result": 4}
REPAIRS = [
    *(f"rollback {name}" for name in TARGETS),
    "died, resolved succeeded",
    "died, resolved failed",
]


@pytest.mark.parametrize("resume", ["invoke(None)", "a new user message"])
@pytest.mark.parametrize("repair", REPAIRS)
@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_side_effect_runs_once_per_key_through_every_repair_and_resume(
    server: Server, mode: str, durability: str, repair: str, resume: str
) -> None:
    world = World()
    _repair_and_resume(Runner(server, world, mode=mode, durability=durability), repair, resume)


class SlowPutSaver(CtxadminSaver):
    """A saver whose puts reach it late, as LangGraph's put thread does on a loaded machine:
    under `"async"` durability each step's put is queued 0.2 s after it is made, while the
    step's tasks and their writes go on."""

    def put(self, config: RunnableConfig, *args: Any, **kwargs: Any) -> RunnableConfig:
        if pipelined(config):
            time.sleep(0.2)
        return super().put(config, *args, **kwargs)


@pytest.mark.parametrize("repair", ["rollback at the pending call", "died, resolved succeeded"])
def test_repairs_hold_when_the_puts_come_after_their_writes(server: Server, repair: str) -> None:
    """A task's writes queued well before the put of the checkpoint they follow still reach
    the log as messages, in the conversation's order (not as bytes the server cannot read), so
    a rollback or a resolution resumes the agent as on an idle machine: the refund runs once,
    and the model reads the call's recorded result."""
    world = World()
    runner = Runner(server, world, mode="sync", durability="async")
    runner.saver.close()
    runner.saver = SlowPutSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    _repair_and_resume(runner, repair, "invoke(None)")


def _repair_and_resume(runner: Runner, repair: str, resume: str) -> None:
    world = runner.world
    if repair.startswith("died"):
        world.raises = RuntimeError("the payment system dropped the line")
        with pytest.raises(RuntimeError):
            runner.run({"messages": [HumanMessage(ASK)]})
        world.raises = None
        assert world.refunds == ["42"]
        assert SideEffect.objects.get(thread=runner.thread, idempotency_key=KEY).status == (
            "running"
        )
        # Unresolved: the agent is held at the call, whatever it is resumed with.
        for held_with in (None, {"messages": [HumanMessage(LATER)]}):
            with pytest.raises(SideEffectPending) as held:
                runner.run(held_with)
            assert (held.value.tool_name, held.value.idempotency_key) == ("refund", KEY)
            assert held.value.status == "running"
        _resolve(runner, repair.rsplit(" ", 1)[1])
    else:
        runner.run({"messages": [HumanMessage(ASK)]})
        assert world.refunds == ["42"]
        _rollback(runner, TARGETS[repair.removeprefix("rollback ")])

    if resume == "invoke(None)":
        runner.run(None)
    else:
        runner.run({"messages": [HumanMessage(LATER)]})

    assert world.refunds == ["42"], "the refund ran again"
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    state = runner.state()
    answered = [m for m in state if isinstance(m, ToolMessage) and m.tool_call_id == KEY]
    if repair != f"rollback {'before the call'}":
        # The model saw the call's recorded result (the tool's, or the person's resolution).
        [result] = answered
        last_input = world.inputs[-1]
        assert any(getattr(m, "tool_call_id", None) == KEY for m in last_input)
        if repair.startswith("died"):
            assert "the payment system says" in str(result.content)
    assert isinstance(state[-1], AIMessage) and not state[-1].tool_calls
    _in_the_log(runner)
    runner.close()


@pytest.mark.parametrize("status", ["succeeded", "failed"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_with_durability_exit_a_died_call_a_person_resolved_runs_once(
    server: Server, mode: str, status: str
) -> None:
    """Durability "exit" stores only what the run leaves at its end (no step in between to roll
    back to): a refund whose tool raised holds the agent until a person resolves it, and the
    resolution is the call's result. The thread holds no finished task of the tool node to
    derive routing from, so `invoke(None)` ends right after the result (docs/clients.md); the
    next user message has the model read it. The refund ran once throughout."""
    world = World()
    runner = Runner(server, world, mode=mode, durability="exit")
    world.raises = RuntimeError("the payment system dropped the line")
    with pytest.raises(RuntimeError):
        runner.run({"messages": [HumanMessage(ASK)]})
    world.raises = None
    for held_with in (None, {"messages": [HumanMessage(LATER)]}):
        with pytest.raises(SideEffectPending):
            runner.run(held_with)
    _resolve(runner, status)

    runner.run(None)
    state = runner.state()
    assert isinstance(state[-1], ToolMessage) and state[-1].tool_call_id == KEY
    assert "the payment system says" in str(state[-1].content)
    runner.run({"messages": [HumanMessage(LATER)]})

    assert world.refunds == ["42"], "the refund ran again"
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    assert any(getattr(m, "tool_call_id", None) == KEY for m in world.inputs[-1])
    state = runner.state()
    assert isinstance(state[-1], AIMessage) and not state[-1].tool_calls
    _in_the_log(runner)
    runner.close()


@pytest.mark.parametrize(
    ("raised", "result_status", "effect_status"),
    [
        (TimeoutError("read timed out"), "timeout", "unknown"),
        (ConnectionResetError("reset by peer"), "timeout", "unknown"),
        (OutcomeUnknown("no answer from the payment system"), "timeout", "unknown"),
        (ValueError("order 42 is not refundable"), "failed", "failed"),
    ],
    ids=["TimeoutError", "ConnectionResetError", "OutcomeUnknown", "ValueError"],
)
def test_a_side_effecting_tool_that_cannot_know_its_outcome_leaves_it_unknown(
    server: Server, raised: BaseException, result_status: str, effect_status: str
) -> None:
    """ToolNode(handle_tool_errors=True) turns the exception into an error ToolMessage; for a
    side-effecting tool a timeout or a lost connection is `unknown`, never `failed`."""
    world = World(raises=raised)
    runner = Runner(server, world, mode="sync", durability="sync")
    runner.run({"messages": [HumanMessage(ASK)]}, handle_tool_errors=True)
    effect = SideEffect.objects.get(thread=runner.thread, idempotency_key=KEY)
    assert effect.status == effect_status
    result = runner.thread.events.get(kind="tool_result", data__tool_call_id=KEY)
    assert result.data["status"] == result_status
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    if effect_status == "unknown":
        # Rolled back to the pending call, the agent is held there: nothing runs it again.
        world.raises = None
        _rollback(runner, TARGETS["at the pending call"])
        with pytest.raises(SideEffectPending) as held:
            runner.run(None)
        assert held.value.status == "unknown" and held.value.idempotency_key == KEY
        assert world.refunds == ["42"]
    runner.close()


def test_a_tool_message_may_state_its_outcome_unknown(server: Server) -> None:
    """A tool that answers rather than raises marks its ToolMessage (`ctxadmin_outcome`)."""
    world = World()
    runner = Runner(server, world, mode="sync", durability="sync")
    runner.run({"messages": [HumanMessage("Hi")]})
    with Client(server.url, server.api_key) as client:
        thread = client.thread(runner.config["configurable"]["thread_id"])
        before = thread.events()
        last = max((e["seq"] for e in before), default=0)
    app = refund_agent(runner.saver, world)
    app.update_state(runner.config, {"messages": [_calls("refund", "call_marked")]}, "agent")
    app.update_state(
        runner.config,
        {
            "messages": [
                ToolMessage(
                    "the payment system did not answer",
                    tool_call_id="call_marked",
                    name="refund",
                    additional_kwargs={"ctxadmin_outcome": "unknown"},
                )
            ]
        },
        "tools",
    )
    effect = SideEffect.objects.get(thread=runner.thread, idempotency_key="call_marked")
    assert effect.status == "unknown"
    assert runner.thread.last_seq > last
    runner.close()


def test_an_agent_that_means_to_refund_again_uses_a_new_key(server: Server) -> None:
    """The retry-on-purpose recipe (docs/clients.md): a new idempotency key is a new side
    effect, run once; the old key's call is never run again."""
    world = World()
    runner = Runner(server, world, mode="sync", durability="sync")
    runner.run({"messages": [HumanMessage(ASK)]})
    app = refund_agent(runner.saver, world)
    retry: Callable[[], AIMessage] = lambda: _calls("refund", f"{KEY}-retry-1")  # noqa: E731
    app.update_state(runner.config, {"messages": [retry()]}, "agent")
    runner.run(None)
    assert world.refunds == ["42", "42"]  # two keys the agent meant to use
    keys = sorted(
        SideEffect.objects.filter(thread=runner.thread).values_list("idempotency_key", flat=True)
    )
    assert keys == [KEY, f"{KEY}-retry-1"]
    _in_the_log(runner)
    runner.close()


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_resolution_of_a_timed_out_call_reaches_the_idle_agent_on_its_next_run(
    server: Server, status: str
) -> None:
    """The refund timed out (its result says so, the side effect is unknown) and the agent went
    on; an operator resolves it while the agent is idle: the agent's next model input names
    the resolution, once, and the refund is not run again."""
    world = World(raises=TimeoutError("read timed out"))
    runner = Runner(server, world, mode="sync", durability="sync")
    runner.run({"messages": [HumanMessage(ASK)]}, handle_tool_errors=True)
    world.raises = None
    _resolve(runner, status)
    runner.run({"messages": [HumanMessage(LATER)]}, handle_tool_errors=True)
    told = [m for m in world.inputs[-1] if m.type == "system"]
    assert len(told) == 1 and status in str(told[0].content) and KEY in str(told[0].content)
    assert "the payment system says" in str(told[0].content)
    runner.run({"messages": [HumanMessage("Thanks")]}, handle_tool_errors=True)
    assert [m.id for m in world.inputs[-1] if m.type == "system"] == [told[0].id]
    assert world.refunds == ["42"]
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    _in_the_log(runner)
    runner.close()


def test_a_resolved_call_of_a_tool_node_that_never_finished_is_answered_and_the_run_stops(
    server: Server,
) -> None:
    """The refund was the first call the tool node ever ran, and it raised: no stored task of
    the node tells where it routes. Resolved, the call gets the resolution as its result and
    the run ends there; the next user message goes to the model with a valid conversation."""
    world = World(raises=RuntimeError("the payment system dropped the line"))
    runner = Runner(server, world, mode="sync", durability="sync")
    with pytest.raises(RuntimeError):
        runner.run({"messages": [HumanMessage(ASK_DIRECTLY)]})
    world.raises = None
    _resolve(runner, "succeeded")
    asked = len(world.inputs)
    runner.run(None)
    assert len(world.inputs) == asked  # the run stopped after the result
    assert isinstance(runner.state()[-1], ToolMessage)
    runner.run({"messages": [HumanMessage(LATER)]})
    assert world.refunds == ["42"]
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    _in_the_log(runner)
    runner.close()


def test_a_recorded_call_beside_calls_that_never_ran_is_refused_not_run(server: Server) -> None:
    """One AI message asks for the refund and a lookup; both ran, then a rollback to that
    message: a ToolNode runs every call of it, so the saver refuses to resume rather than run
    the refund again."""
    world = World()
    runner = Runner(server, world, mode="sync", durability="sync")
    runner.run({"messages": [HumanMessage(ASK_BOTH)]})
    assert world.refunds == ["42"]
    _rollback(runner, 1)
    with pytest.raises(SideEffectRecorded) as refused:
        runner.run(None)
    assert refused.value.idempotency_key == KEY and refused.value.status == "succeeded"
    assert world.refunds == ["42"]
    runner.close()


def reviewed_refund_agent(saver: CtxadminSaver, world: World) -> Any:
    """agent → approve (an `interrupt()` before the refund runs) → tools → agent."""

    lookup, refund = refund_tools(world)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [PolicyModel(world).invoke(state["messages"])]}

    def approve(state: MessagesState) -> dict[str, Any]:
        calls = getattr(state["messages"][-1], "tool_calls", [])
        if any(call["name"] == "refund" for call in calls):
            interrupt({"question": "approve refund?", "calls": [c["id"] for c in calls]})
        return {}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve)
    guarded = ToolNode(
        [lookup, refund],
        wrap_tool_call=saver.tool_call_guard,
        awrap_tool_call=saver.atool_call_guard,
    )
    graph.add_node("tools", guarded)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "approve", END: END})
    graph.add_edge("approve", "tools")
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_reviewed_refund_resumed_with_a_command_after_a_rollback_runs_once(
    server: Server, durability: str
) -> None:
    """An approval (`interrupt()`) before the refund; resumed with the reviewer's
    `Command(resume=...)` the refund runs. Rolled back to the pause before it, asked again
    and resumed with a Command again: the tool node runs in the same run as the approval, so
    its tool-call guard (`saver.tool_call_guard`) answers the refund from the ledger."""
    world = World()
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    app = reviewed_refund_agent(saver, world)
    config: RunnableConfig = {"configurable": {"thread_id": "reviewed-" + uuid.uuid4().hex}}
    app.invoke({"messages": [HumanMessage(ASK)]}, config, durability=durability)
    assert app.get_state(config).next == ("approve",)
    app.invoke(Command(resume={"approved": True}), config, durability=durability)
    assert world.refunds == ["42"]
    thread = Thread.objects.get(
        workspace=server.workspace, external_id=config["configurable"]["thread_id"]
    )
    # The pause before the refund: the loop checkpoint whose next node is `approve` and whose
    # state ends with the refund's call.
    chosen = next(
        snapshot
        for snapshot in app.get_state_history(config)
        if snapshot.next == ("approve",)
        and getattr(snapshot.values["messages"][-1], "tool_calls", None)
        and snapshot.values["messages"][-1].tool_calls[0]["name"] == "refund"
    )
    row = LanggraphCheckpoint.objects.get(
        thread=thread,
        checkpoint_ns="",
        checkpoint_id=chosen.config["configurable"]["checkpoint_id"],
    )
    admin = factories.make_person(server.workspace, "ada", "admin")
    checkpoint_rollback(
        thread=thread, checkpoint=row.ctxadmin_checkpoint, actor=admin, reason="again"
    )
    app.invoke(None, config, durability=durability)  # asks again
    assert app.get_state(config).next == ("approve",)
    app.invoke(Command(resume={"approved": True}), config, durability=durability)
    assert world.refunds == ["42"]
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    state = app.get_state(config).values["messages"]
    assert [m for m in state if isinstance(m, ToolMessage) and m.tool_call_id == KEY]
    assert isinstance(state[-1], AIMessage) and not state[-1].tool_calls
    saver.close()


def decided_refund_agent(saver: CtxadminSaver, world: World) -> Any:
    """agent → approve → tools → agent, where `approve` asks a reviewer (`interrupt()`, an
    approval request in ctxadmin) and a rejection answers the refund's call itself, so the
    tool never runs and the model reads why."""

    lookup, refund = refund_tools(world)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [PolicyModel(world).invoke(state["messages"])]}

    def approve(state: MessagesState) -> Command[Any]:
        calls = getattr(state["messages"][-1], "tool_calls", [])
        if not any(call["name"] == "refund" for call in calls):
            return Command(goto="tools")
        decision = interrupt({"question": "approve refund?", "calls": [c["id"] for c in calls]})
        if decision["approved"]:
            return Command(goto="tools")
        answers = [
            ToolMessage(
                f"rejected by {decision['decided_by']}: {decision['reason']}", tool_call_id=c["id"]
            )
            for c in calls
        ]
        return Command(goto="agent", update={"messages": answers})

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve, destinations=("tools", "agent"))
    graph.add_node("tools", ToolNode([lookup, refund]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "approve", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_refund_a_reviewer_decided_in_ctxadmin_runs_as_decided_once(
    server: Server, decision: str
) -> None:
    """The reviewer decides in ctxadmin's approval queue; `resume_command` reads the decision
    back. Approved: the refund runs once, and a later run with no input or a new message
    does not run it again. Rejected: it never runs, and the model reads the rejection."""
    world = World()
    saver = CtxadminSaver.from_url(server.url, server.api_key, side_effect_tools={"refund"})
    app = decided_refund_agent(saver, world)
    config: RunnableConfig = {"configurable": {"thread_id": "decided-" + uuid.uuid4().hex}}
    app.invoke({"messages": [HumanMessage(ASK)]}, config)
    assert app.get_state(config).next == ("approve",)
    thread = Thread.objects.get(
        workspace=server.workspace, external_id=config["configurable"]["thread_id"]
    )
    reviewer = factories.make_person(server.workspace, "rita", "reviewer")
    approval_decide(
        approval=ApprovalRequest.objects.select_related("thread", "thread__workspace").get(
            thread=thread, status="pending"
        ),
        actor=reviewer,
        decision=decision,
        reason="checked with the customer",
    )
    command = saver.resume_command(config, timeout=5)
    assert command is not None
    app.invoke(command, config)
    app.invoke(None, config)
    app.invoke({"messages": [HumanMessage(LATER)]}, config)

    assert world.refunds == (["42"] if decision == "approve" else [])
    for model_input in world.inputs:
        assert_provider_shapes(model_input)
    state = app.get_state(config).values["messages"]
    [result] = [m for m in state if isinstance(m, ToolMessage) and m.tool_call_id == KEY]
    if decision == "reject":
        assert "rejected by rita" in str(result.content)
    assert isinstance(state[-1], AIMessage) and not state[-1].tool_calls
    with Client(server.url, server.api_key) as client:
        events = list(client.thread(thread.external_id).events())
    logged = {str(e.get("client_event_id")).split("#")[0] for e in events}
    assert all(m.id in logged for m in state)
    saver.close()
