"""`POST /api/v1/threads/{id}/events/{seq}/redact/` (docs/event-log.md, "Redaction"): admins
only, the event as it now reads everywhere the API answers it, 409 twice, 400 without a reason,
404 for another workspace; the working context reads it as a placeholder, pairs still hold."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post
from threads.models import Thread

pytestmark = pytest.mark.django_db

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def leaky(thread: Thread) -> Thread:
    f.append(
        thread,
        f.user("read the env"),
        f.call("c1", "read_env", {"file": ".env"}),
        f.result("c1", value=f"AWS_ACCESS_KEY_ID={SECRET}"),
        f.assistant("done"),
    )
    return thread


def _redact(client: APIClient, thread: Thread, seq: int, body: Any) -> Any:
    return post(client, f"/api/v1/threads/{thread.pk}/events/{seq}/redact/", body)


def test_an_admin_redacts_and_every_answer_reads_it_redacted(
    leaky: Thread, workspace: Any, agent: APIClient
) -> None:
    admin = person(workspace, "admin", "ada")
    answer = _redact(admin, leaky, 3, {"reason": "leaked AWS key"})
    assert answer.status_code == 200, answer.content
    event = answer.json()
    assert event["seq"] == 3 and event["kind"] == "tool_result" and len(event["hash"]) == 64
    assert event["redacted"]["by"] == "ada" and event["redacted"]["reason"] == "leaked AWS key"
    assert "result" not in event and event["metadata"] == {}
    assert event["tool_call_id"] == "c1" and event["call_seq"] == 2
    page = agent.get(f"/api/v1/threads/{leaky.pk}/events/").json()["events"]
    assert page[2] == event
    assert SECRET not in str(page)
    context = agent.get(f"/api/v1/threads/{leaky.pk}/context/")
    assert context.status_code == 200
    assert SECRET not in context.content.decode()
    events = context.json()["events"]
    redacted = next(e for e in events if e["seq"] == 3)
    assert redacted["result"] == "[redacted at seq 3: leaked AWS key]"
    # The call keeps its id, so its redacted result still pairs with it.
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert not context.json()["unanswered_calls"]
    again = _redact(admin, leaky, 3, {"reason": "again"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_redacted"


def test_who_may_redact_and_what_is_refused(
    leaky: Thread, workspace: Any, agent: APIClient
) -> None:
    assert _redact(agent, leaky, 3, {"reason": "x"}).status_code == 403
    assert _redact(person(workspace, "reviewer"), leaky, 3, {"reason": "x"}).status_code == 403
    admin = person(workspace, "admin")
    missing = _redact(admin, leaky, 3, {})
    assert missing.status_code == 400 and "reason" in missing.json()["error"]["fields"]
    assert _redact(admin, leaky, 99, {"reason": "x"}).status_code == 404
    other = person(f.make_workspace("globex")[0], "admin", "gus")
    assert _redact(other, leaky, 3, {"reason": "x"}).status_code == 404
    assert SECRET in str(agent.get(f"/api/v1/threads/{leaky.pk}/events/").json())


def test_the_schema_describes_the_redaction() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/v1/threads/{id}/events/{seq}/redact/"]["post"]
    assert {"200", "202", "400", "403", "404", "409"} <= set(operation["responses"])
    event = schema["components"]["schemas"]["EventOutput"]["properties"]
    assert "redacted" in event


def test_the_integrity_answer_and_verify_chains_report_the_redaction(
    leaky: Thread, workspace: Any, agent: APIClient
) -> None:
    admin = person(workspace, "admin", "ada")
    assert _redact(admin, leaky, 3, {"reason": "leaked AWS key"}).status_code == 200
    out = io.StringIO()
    call_command("verify_chains", "--full", stdout=out)
    assert f"{leaky.external_id} ({leaky.pk}) redacted at seq 3" in out.getvalue()
    integrity = agent.get(f"/api/v1/threads/{leaky.pk}/integrity/").json()
    assert integrity["status"] == "ok"
    assert [(r["seq"], r["by"], r["reason"]) for r in integrity["redactions"]] == [
        (3, "ada", "leaked AWS key")
    ]


def test_where_a_second_admin_is_required_the_redaction_waits_for_one(
    leaky: Thread, workspace: Any, agent: APIClient
) -> None:
    out = io.StringIO()
    call_command(
        "workspace_settings", workspace.name, "--redaction-needs-second-admin", "on", stdout=out
    )
    assert "redaction_needs_second_admin on" in out.getvalue()
    ada = person(workspace, "admin", "ada")
    asked = _redact(ada, leaky, 3, {"reason": "leaked AWS key"})
    assert asked.status_code == 202, asked.content
    approval_id = asked.json()["approval_id"]
    assert asked.json()["status"] == "pending"
    assert SECRET in str(agent.get(f"/api/v1/threads/{leaky.pk}/events/").json())
    again = _redact(ada, leaky, 3, {"reason": "leaked AWS key"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "redaction_pending"
    decide = f"/api/v1/approvals/{approval_id}/decide/"
    body = {"decision": "approve", "reason": "yes"}
    # Not the admin who asked, and not a reviewer.
    assert post(ada, decide, body).status_code == 403
    assert post(person(workspace, "reviewer"), decide, body).status_code == 403
    assert SECRET in str(agent.get(f"/api/v1/threads/{leaky.pk}/events/").json())
    grace = person(workspace, "admin", "grace")
    assert post(grace, decide, body).status_code == 200
    events = agent.get(f"/api/v1/threads/{leaky.pk}/events/").json()["events"]
    assert SECRET not in str(events)
    assert events[2]["redacted"]["by"] == "ada, approved by grace"
