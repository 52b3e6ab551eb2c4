"""Issue #25's "Done when" for redaction (docs/event-log.md, "Redaction"): a LangGraph agent (a
real graph through the real CtxadminSaver) reads an AWS key into its thread, which is folded,
checkpointed and searchable; an admin redacts the tool result holding it. Then the key is in no
text, varchar, JSON or bytea/blob column of any table (tests/support_secret_scan.py), nor in the
context API, the export, the thread page or /metrics; verify_chains and verify_export pass and
report the redaction by seq; and the agent's next run works from the redacted context.

The stores beside the event are emptied by `content_scrub` (threads/services/content_scrub.py):
where it does nothing, the schema-wide scan, asserted last, names them.
"""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

from ctxadmin_client.langgraph import CtxadminSaver
from django.core.management import call_command
from django.db import connection
from django.test import Client as DjangoClient
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from rest_framework.test import APIClient

from integrations.langgraph_checkpointer.domain.messages import REDACTED_CONTENT
from tests import factories as f
from tests.langgraph.conftest import Server, server
from tests.langgraph.graphs import ToolFakeChatModel, tool_loop_graph
from tests.support_secret_scan import secret_locations
from threads.models import Event, EventKind, SummaryVersion, Thread
from threads.selectors.search import events_search
from threads.services.checkpoints import checkpoint_create
from threads.services.folding import fold_run
from threads.services.redaction import event_redact

__all__ = ["server"]

# detect-secrets' AWS plugin flags it (the documented example key).
SECRET = "AKIAIOSFODNN7EXAMPLE"
MANUAL = {"kind": "manual", "reason": "test"}
METRICS_TOKEN = "metrics-token-for-the-redaction-test"


@tool
def read_env(name: str) -> str:
    """Read one of the deployment's settings."""
    return f"AWS_ACCESS_KEY_ID={SECRET} region=eu-west-1" if name == "aws" else "unset"


def _agent(saver: CtxadminSaver, inputs: list[list[BaseMessage]]) -> Any:
    call = {"name": "read_env", "args": {"name": "aws"}, "id": "call_env", "type": "tool_call"}
    model = ToolFakeChatModel(
        messages=iter(
            [
                AIMessage("", tool_calls=[call]),
                AIMessage("The deployment has its AWS key."),
                AIMessage("Deploying with the key from the vault."),
            ]
        )
    )
    return tool_loop_graph(saver, model, [read_env], inputs)


def test_a_redacted_secret_is_nowhere_and_the_agent_goes_on(
    server: Server, settings: Any, tmp_path: Path
) -> None:
    settings.CTXADMIN_METRICS_TOKEN = METRICS_TOKEN
    saver = CtxadminSaver.from_url(server.url, server.api_key)
    inputs: list[list[BaseMessage]] = []
    app = _agent(saver, inputs)
    config: RunnableConfig = {"configurable": {"thread_id": "deploy-" + uuid.uuid4().hex[:8]}}
    # The person pastes the key; the tool reads it too.
    app.invoke({"messages": [HumanMessage(f"Deploy with AWS key {SECRET} please")]}, config)
    thread = Thread.objects.get(
        workspace=server.workspace, external_id=config["configurable"]["thread_id"]
    )
    admin = f.make_person(server.workspace, "ada", "admin")
    assert fold_run(thread_id=thread.pk, trigger=MANUAL) is not None
    assert SummaryVersion.objects.filter(thread=thread).exists()
    checkpoint_create(thread=thread, label="before the redaction", actor=admin)
    assert events_search(workspace_ids=[server.workspace.pk], q=SECRET)
    assert "threads_event.data" in secret_locations(connection, SECRET)
    pasted = Event.objects.get(thread=thread, kind=EventKind.MESSAGE, role="user")
    read = Event.objects.get(thread=thread, kind=EventKind.TOOL_RESULT)

    event_redact(thread=thread, seq=pasted.seq, actor=admin, reason="pasted AWS key")
    event_redact(thread=thread, seq=read.seq, actor=admin, reason="leaked AWS key")

    notes = [f"redacted at seq {pasted.seq}", f"redacted at seq {read.seq}"]
    # The event and the search index.
    assert not events_search(workspace_ids=[server.workspace.pk], q=SECRET)
    assert SECRET not in str(Event.objects.filter(thread=thread).values_list("data", "metadata"))
    # /metrics.
    person = DjangoClient()
    person.force_login(admin)
    metrics = person.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    assert metrics.status_code == 200 and SECRET not in metrics.content.decode()
    # The chain: verify_chains, the export and verify_export.
    out = io.StringIO()
    call_command("verify_chains", "--full", "--thread", str(thread.pk), stdout=out)
    assert all(note in out.getvalue() for note in notes)
    exported = tmp_path / "thread.jsonl"
    call_command("export_thread", str(thread.pk), str(exported), stdout=io.StringIO())
    assert SECRET not in exported.read_text("utf-8")
    out = io.StringIO()
    call_command("verify_export", str(exported), stdout=out)
    assert out.getvalue().startswith("OK") and all(note in out.getvalue() for note in notes)
    # The agent's next run starts from the redacted state: the model never sees the key.
    seen = len(inputs)
    final = app.invoke({"messages": [HumanMessage("Deploy now.")]}, config)
    assert final["messages"][-1].content == "Deploying with the key from the vault."
    shown = json.dumps([m.model_dump() for batch in inputs[seen:] for m in batch], default=str)
    assert SECRET not in shown
    assert REDACTED_CONTENT in shown  # the redacted messages keep their place, without content

    # What the stores beside the event hold too (the head summary's text, the LangGraph blobs):
    # content_scrub's part. The context API and the thread page show the summary.
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {server.api_key}")
    context = agent.get(f"/api/v1/threads/{thread.pk}/context/")
    assert context.status_code == 200 and SECRET not in context.content.decode()
    page = person.get(f"/threads/{thread.pk}/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    # No column of any table holds the key.
    assert secret_locations(connection, SECRET) == []
