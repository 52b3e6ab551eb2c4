"""A deterministic LangGraph agent that can be killed at a step, for the crash test of pipelined
writes (tests/langgraph/test_pipeline.py): run as a script, it checkpoints through
CtxadminSaver and kills its own process (SIGKILL: no exit handler runs) when its node runs for
the `kill_at`-th time.

    python tests/langgraph/crash_agent.py URL KEY THREAD_ID DURABILITY KILL_AT
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

STEPS = 12  # the node's runs in a whole run


def crash_graph(checkpointer: Any, kill_at: int | None = None) -> Any:
    """START -> step -> step ... (STEPS times) -> END; each run of `step` adds one AI message
    whose id is its position, so two savers' states compare as they are."""

    def step(state: MessagesState) -> dict[str, Any]:
        done = len(state["messages"]) - 1  # the human message first
        if kill_at is not None and done + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"messages": [AIMessage(f"step {done + 1}", id=f"step-{done + 1}")]}

    def more(state: MessagesState) -> str:
        return "step" if len(state["messages"]) - 1 < STEPS else END

    graph = StateGraph(MessagesState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", more)
    return graph.compile(checkpointer=checkpointer)


FIRST: MessagesState = {"messages": [HumanMessage("count", id="human-0")]}


def main() -> None:
    from ctxadmin_client.langgraph import CtxadminSaver

    url, key, thread_id, durability, kill_at = sys.argv[1:6]
    saver = CtxadminSaver.from_url(url, key)
    app = crash_graph(saver, int(kill_at))
    app.invoke(FIRST, {"configurable": {"thread_id": thread_id}}, durability=durability)
    raise SystemExit("the run ended: it was to be killed")


if __name__ == "__main__":
    main()
