"""What the LangGraph checkpointer adds to the dashboard: the box under a thread's header that
says where its graph stands (threads.views.threads.thread_panels)."""

from __future__ import annotations

from typing import Any

from integrations.langgraph_checkpointer.selectors.graph_position import langgraph_graph_position
from threads import selectors
from threads.models import Thread

TEMPLATE = "langgraph_checkpointer/graph_position.html"


def graph_panel(thread: Thread) -> dict[str, Any] | None:
    """Where a LangGraph thread stands, with a link to each approval its interrupts wait on;
    None for a thread with no LangGraph checkpoint."""
    found = langgraph_graph_position(thread=thread)
    if found is None:
        return None
    return {
        "template": TEMPLATE,
        "position": found.position,
        "approvals": [
            {"approval": a, "target": selectors.approval_target(a, thread)} for a in found.approvals
        ],
    }
