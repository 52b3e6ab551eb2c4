"""A LangGraph agent in a workspace that redacts secrets at ingest (docs/event-log.md, "Secrets
redacted at ingest"): the user's pasted key is stored without its secret, the graph reads the
message back so, and its next run appends nothing twice."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from ctxadmin_client.langgraph import CtxadminSaver
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from tests.langgraph.conftest import Server
from tests.langgraph.graphs import ToolFakeChatModel
from threads.models import Event, Thread
from threads.services.workspaces import workspace_settings_update

KEY = "AKIAIOSFODNN7EXAMPLE"
PLACEHOLDER = "[secret removed at ingest: AWS Access Key]"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _graph(saver: CtxadminSaver) -> Any:
    model = ToolFakeChatModel(messages=iter([AIMessage("noted"), AIMessage("done")]))

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    return graph.compile(checkpointer=saver)


def test_a_masked_message_is_read_back_masked_and_never_appended_twice(
    server: Server, saver: CtxadminSaver
) -> None:
    workspace_settings_update(
        workspace=server.workspace, actor_label="test", redact_secrets_at_ingest=True
    )
    app = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "masked-agent"}}
    app.invoke({"messages": [HumanMessage(f"deploy with {KEY}", id="u-1")]}, config)
    app.invoke({"messages": [HumanMessage("and now?", id="u-2")]}, config)

    thread = Thread.objects.get(workspace=server.workspace, external_id="masked-agent")
    messages = list(
        Event.objects.filter(thread=thread, kind="message")
        .order_by("seq")
        .values_list("role", "data")
    )
    # Four messages, each once: the second run did not append the first again.
    assert [role for role, _ in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0][1]["content"] == f"deploy with {PLACEHOLDER}"
    assert not Event.objects.filter(thread=thread, data__icontains=KEY).exists()
    # The graph reads its state back without the key, and goes on.
    state = app.get_state(config).values["messages"]
    assert [m.content for m in state] == [f"deploy with {PLACEHOLDER}", "noted", "and now?", "done"]
