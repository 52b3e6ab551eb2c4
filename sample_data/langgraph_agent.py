"""The demo's live LangGraph thread: a small offline agent (a scripted fake chat model, a real
`ToolNode`, one `interrupt()`), checkpointed by `CtxadminSaver` over ctxadmin's own API.

The saver speaks HTTP; the demo serves it in-process (an httpx WSGI transport to this Django
application), so the agent runs before the server starts and with `--no-serve` too, with no
network. It pauses on the reviewer's approval of a refund: the dashboard shows the thread, its
`langgraph:` checkpoints and a pending approval. Run again, it does nothing (the thread has
checkpoints already).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import httpx
from ctxadmin_client import Client
from ctxadmin_client.langgraph import CtxadminSaver
from django.core.handlers.wsgi import WSGIHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from threads.models import Workspace

THREAD_ID = "langgraph-order-5521"
# The Host the in-process requests carry (one of the default ALLOWED_HOSTS).
BASE_URL = "http://127.0.0.1"


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up in the shop's system."""
    return json.dumps(
        {"order_id": order_id, "item": "espresso machine", "amount": 89.90, "status": "delivered"}
    )


class _ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel refuses bind_tools; a scripted model needs none."""

    def bind_tools(self, tools: Sequence[Any], **kw: Any) -> _ScriptedModel:  # type: ignore[override]
        return self


def _graph(saver: CtxadminSaver) -> Any:
    model = _ScriptedModel(
        messages=iter(
            [
                AIMessage(
                    "Let me look the order up.",
                    tool_calls=[
                        {
                            "name": "lookup_order",
                            "args": {"order_id": "5521"},
                            "id": "call_lookup_5521",
                            "type": "tool_call",
                        }
                    ],
                ),
                AIMessage("Order 5521 ($89.90) qualifies for a refund; a reviewer must approve."),
            ]
        )
    )

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def approve_refund(state: MessagesState) -> dict[str, Any]:
        decision = interrupt({"action": "refund", "order_id": "5521", "amount": 89.90})
        verdict = "refunded" if decision.get("approved") else "not refunded"
        return {"messages": [AIMessage(f"Order 5521 {verdict}: {decision.get('reason', '')}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([lookup_order]))
    graph.add_node("approve_refund", approve_refund)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "approve_refund"})
    graph.add_edge("tools", "agent")
    graph.add_edge("approve_refund", END)
    return graph.compile(checkpointer=saver)


def langgraph_demo_run(*, workspace: Workspace, api_key: str) -> int:
    """Run the agent until it pauses on the refund's approval; the number of LangGraph
    checkpoints it wrote (0 when the thread has them already)."""
    if LanggraphCheckpoint.objects.filter(
        thread__workspace=workspace, thread__external_id=THREAD_ID
    ).exists():
        return 0
    client = Client(BASE_URL, api_key, transport=httpx.WSGITransport(app=WSGIHandler()))
    saver = CtxadminSaver(client)
    config: RunnableConfig = {"configurable": {"thread_id": THREAD_ID}}
    # The saver's first read of a new thread is answered 404 (no checkpoint yet), which Django
    # logs as a warning; in the demo's own run that is expected, so only errors are shown.
    requests_log = logging.getLogger("django.request")
    level = requests_log.level
    requests_log.setLevel(logging.ERROR)
    try:
        _graph(saver).invoke(
            {"messages": [HumanMessage("My order 5521 arrived broken. Please refund it.")]}, config
        )
    finally:
        requests_log.setLevel(level)
        saver.close()
    return LanggraphCheckpoint.objects.filter(
        thread__workspace=workspace, thread__external_id=THREAD_ID
    ).count()
