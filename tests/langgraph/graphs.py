"""Real LangGraph graphs, fully offline: a scripted fake chat model, a ToolNode, an interrupt.

`run_script(saver)` drives the same script against any checkpointer and returns the thread ids;
`history(app, config)` gives a thread's get_state_history in a form that compares across savers
(ids differ from run to run: they are replaced by positions).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return json.dumps({"city": city, "temp_c": 21, "sky": "clear"})


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class ToolFakeChatModel(GenericFakeChatModel):
    """GenericFakeChatModel refuses bind_tools; a scripted model needs none."""

    def bind_tools(self, tools: Sequence[Any], **kw: Any) -> ToolFakeChatModel:  # type: ignore[override]
        return self


def scripted_model() -> ToolFakeChatModel:
    return ToolFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                            "id": "call_w1",
                            "type": "tool_call",
                        }
                    ],
                ),
                AIMessage(content="It is 21C and clear in Paris."),
                AIMessage(
                    content="Let me compute both.",
                    tool_calls=[
                        {
                            "name": "add",
                            "args": {"a": 2, "b": 3},
                            "id": "call_a1",
                            "type": "tool_call",
                        },
                        {
                            "name": "add",
                            "args": {"a": 40, "b": 2},
                            "id": "call_a2",
                            "type": "tool_call",
                        },
                    ],
                ),
                AIMessage(content="2+3=5 and 40+2=42."),
            ]
        )
    )


def tool_loop_graph(
    checkpointer: Any,
    model: Any,
    tools: Sequence[Any],
    inputs: list[list[BaseMessage]] | None = None,
    interrupt_before: Sequence[str] = (),
) -> Any:
    """agent ⇄ ToolNode(tools), routed by `tools_condition`: the model's answers decide. Each
    model input is recorded in `inputs` when given; the graph stops before the nodes named in
    `interrupt_before`."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if inputs is not None:
            inputs.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer, interrupt_before=list(interrupt_before))


def agent_graph(checkpointer: Any) -> Any:
    return tool_loop_graph(checkpointer, scripted_model(), [get_weather, add])


def approval_graph(checkpointer: Any) -> Any:
    def plan(state: MessagesState) -> dict[str, Any]:
        return {
            "messages": [
                AIMessage(
                    "I will refund order 42 ($120). Needs approval.",
                    tool_calls=[
                        {
                            "name": "refund",
                            "args": {"order": 42, "amount": 120},
                            "id": "call_r1",
                            "type": "tool_call",
                        }
                    ],
                )
            ]
        }

    def approve(state: MessagesState) -> dict[str, Any]:
        decision = interrupt({"question": "approve refund?", "tool_call_id": "call_r1"})
        return {"messages": [AIMessage(f"Refund {'done' if decision == 'yes' else 'rejected'}.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("plan", plan)
    graph.add_node("approve", approve)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    return graph.compile(checkpointer=checkpointer)


def run_script(checkpointer: Any) -> dict[str, tuple[Any, RunnableConfig]]:
    """Two agent turns with tool calls; a paused approval resumed. Returns name -> (app,
    config) of each thread."""
    agent = agent_graph(checkpointer)
    tools: RunnableConfig = {"configurable": {"thread_id": "tools-" + uuid.uuid4().hex[:8]}}
    agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]}, tools)
    agent.invoke({"messages": [HumanMessage("Compute 2+3 and 40+2")]}, tools)
    approval = approval_graph(checkpointer)
    paused: RunnableConfig = {"configurable": {"thread_id": "hitl-" + uuid.uuid4().hex[:8]}}
    approval.invoke({"messages": [HumanMessage("refund my order 42")]}, paused)
    approval.invoke(Command(resume="yes"), paused)
    return {"tools": (agent, tools), "approval": (approval, paused)}


def message_form(message: BaseMessage) -> dict[str, Any]:
    """A message without its id (ids are random per run)."""
    return {
        "type": message.type,
        "content": message.content,
        "tool_calls": [
            {"name": c["name"], "args": c["args"], "id": c["id"]}
            for c in getattr(message, "tool_calls", [])
        ],
        "tool_call_id": getattr(message, "tool_call_id", None),
        "status": getattr(message, "status", None),
    }


def values_form(values: dict[str, Any]) -> dict[str, Any]:
    return {
        name: [message_form(m) for m in value] if name == "messages" else value
        for name, value in values.items()
    }


def history(app: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    """get_state_history, newest first, with checkpoint ids replaced by their positions."""
    snapshots = list(app.get_state_history(config))
    position = {s.config["configurable"]["checkpoint_id"]: i for i, s in enumerate(snapshots)}
    out = []
    for snapshot in snapshots:
        metadata = dict(snapshot.metadata or {})
        parent = snapshot.parent_config
        out.append(
            {
                "values": values_form(snapshot.values),
                "next": snapshot.next,
                "source": metadata.get("source"),
                "step": metadata.get("step"),
                "parents": metadata.get("parents"),
                "parent": None
                if parent is None
                else position.get(parent["configurable"]["checkpoint_id"], "missing"),
                "tasks": [
                    (task.name, [i.value for i in task.interrupts], task.error is not None)
                    for task in snapshot.tasks
                ],
                "interrupts": [i.value for i in snapshot.interrupts],
            }
        )
    return out
