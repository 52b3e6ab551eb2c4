"""Resolving side effects: by a person with evidence, or by the tool's status check
(docs/repairs.md, "Side effects and approvals")."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from ctxadmin.celery import app as celery_app
from tests import factories as f
from threads.api.auth import AgentPrincipal
from threads.domain.errors import Conflict, InvalidEvent, PermissionDenied
from threads.models import (
    ApiKey,
    AuditEntry,
    Event,
    SideEffect,
    SummaryVersion,
    TaskRun,
    TaskState,
    Thread,
    ToolStatusCheck,
)
from threads.services.integrity import integrity_check
from threads.services.side_effects import side_effect_resolve, side_effect_status_check

pytestmark = pytest.mark.django_db


def refund(thread: Thread, *, status: str | None = "timeout", key: str = "refund-1") -> SideEffect:
    bodies: list[dict[str, Any]] = [
        f.user("refund order 10086"),
        f.call("c1", "refund", {"amount": 25}, side_effect_key=key),
    ]
    if status is not None:
        bodies.append(f.result("c1", status=status))
    f.append(thread, *bodies)
    return SideEffect.objects.get(thread=thread, tool_call_id="c1")


@pytest.fixture
def operator(workspace: Any) -> Any:
    return f.make_person(workspace, "otto", "operator")


def test_resolution_is_an_event_on_the_chain(thread: Thread, operator: Any) -> None:
    effect = refund(thread)
    assert effect.status == "unknown"  # a timeout is never "failed"

    event = side_effect_resolve(
        side_effect=effect, actor=operator, status="succeeded", evidence="ledger entry 77"
    )

    assert event.kind == "side_effect_resolution" and event.seq == 4
    assert event.data == {
        "tool_call_id": "c1",
        "call_seq": 2,
        "side_effect_id": effect.pk,
        "status": "succeeded",
        "evidence": "ledger entry 77",
        "actor": "otto",
    }
    effect.refresh_from_db()
    assert effect.status == "succeeded" and effect.result_seq == 3
    thread.refresh_from_db()
    assert thread.last_seq == 4 and thread.chain_head == event.hash
    assert integrity_check(thread=thread, full=True).ok
    entry = AuditEntry.objects.get(action="side_effect.resolve")
    assert entry.before == {"status": "unknown"}
    assert entry.after == {"status": "succeeded", "evidence": "ledger entry 77", "seq": 4}


@pytest.fixture
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def test_a_resolution_triggers_a_structural_fold(
    thread: Thread, operator: Any, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    effect = refund(thread)
    with django_capture_on_commit_callbacks(execute=True):
        side_effect_resolve(side_effect=effect, actor=operator, status="failed", evidence="none")
    head = SummaryVersion.objects.filter(thread=thread).order_by("-version").first()
    assert head is not None and head.phase == "committed" and head.covered_until == 4
    assert head.trigger["kind"] == "structural" and "resolved failed" in head.trigger["reason"]


def test_a_running_side_effect_may_be_resolved(thread: Thread, operator: Any) -> None:
    effect = refund(thread, status=None)
    assert effect.status == "running"
    side_effect_resolve(side_effect=effect, actor=operator, status="cancelled", evidence="voided")
    effect.refresh_from_db()
    assert effect.status == "cancelled"


def test_resolving_twice_is_a_conflict(thread: Thread, operator: Any) -> None:
    effect = refund(thread)
    side_effect_resolve(side_effect=effect, actor=operator, status="failed", evidence="no entry")
    stale = SideEffect.objects.get(pk=effect.pk)
    with pytest.raises(Conflict) as conflict:
        side_effect_resolve(side_effect=stale, actor=operator, status="succeeded", evidence="x")
    assert conflict.value.code == "already_resolved"
    assert Event.objects.filter(thread=thread, kind="side_effect_resolution").count() == 1


def test_a_settled_result_cannot_be_overridden(thread: Thread, operator: Any) -> None:
    effect = refund(thread, status="succeeded")
    with pytest.raises(Conflict):
        side_effect_resolve(side_effect=effect, actor=operator, status="failed", evidence="x")


@pytest.mark.parametrize(
    ("status", "evidence", "field"),
    [
        ("succeeded", "", "evidence"),
        ("succeeded", "   ", "evidence"),
        ("timeout", "x", "status"),
        ("unknown", "x", "status"),
    ],
)
def test_resolution_input_is_validated(
    thread: Thread, operator: Any, status: str, evidence: str, field: str
) -> None:
    effect = refund(thread)
    with pytest.raises(InvalidEvent) as invalid:
        side_effect_resolve(side_effect=effect, actor=operator, status=status, evidence=evidence)
    assert field in invalid.value.fields
    assert not Event.objects.filter(kind="side_effect_resolution").exists()


def test_only_members_of_the_workspace_resolve(thread: Thread, workspace: Any) -> None:
    effect = refund(thread)
    outsider = f.make_person(f.make_workspace("globex")[0], "eve", "admin")
    agent = AgentPrincipal(workspace=workspace, key=ApiKey.objects.get(workspace=workspace))
    actor: Any
    for actor in (outsider, agent):
        with pytest.raises(PermissionDenied):
            side_effect_resolve(side_effect=effect, actor=actor, status="failed", evidence="x")
    effect.refresh_from_db()
    assert effect.status == "unknown"


# --- status checks against a real HTTP server -----------------------------------------------


class ToolServer:
    """The tool's own system on 127.0.0.1: answers per idempotency key."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                server.requests.append(self.path)
                key = self.path.rsplit("/", 1)[-1]
                code, body = server.answers.get(key, (404, b'{"error": "unknown key"}'))
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def answer(self, key: str, body: Any, code: int = 200) -> None:
        self.answers[key] = (code, body if isinstance(body, bytes) else json.dumps(body).encode())


@pytest.fixture
def tool_server() -> Iterator[ToolServer]:
    server = ToolServer()
    worker = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    worker.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def status_check(workspace: Any, tool_server: ToolServer) -> ToolStatusCheck:
    return ToolStatusCheck.objects.create(
        workspace=workspace,
        tool_name="refund",
        url_template=tool_server.url + "/refunds/{idempotency_key}",
    )


def test_conclusive_status_check_appends_the_resolution(
    thread: Thread, workspace: Any, tool_server: ToolServer, status_check: ToolStatusCheck
) -> None:
    effect = refund(thread, key="refund 10086/a")
    tool_server.answer("refund%2010086%2Fa", {"status": "succeeded", "refund_id": "R-9"})
    run = TaskRun.objects.create(id="t-1", workspace=workspace, thread=thread, kind="check")

    outcome = side_effect_status_check(side_effect_id=effect.pk, task_id=run.id)

    assert tool_server.requests == ["/refunds/refund%2010086%2Fa"]  # the key is URL-quoted
    assert outcome["resolved"] is True and outcome["status"] == "succeeded"
    event = Event.objects.get(thread=thread, kind="side_effect_resolution")
    assert event.data["actor"] == "status-check" and event.data["status"] == "succeeded"
    assert '"refund_id":"R-9"' in event.data["evidence"]
    effect.refresh_from_db()
    assert effect.status == "succeeded"
    run.refresh_from_db()
    assert run.state == TaskState.SUCCESS
    assert run.result is not None and run.result["seq"] == event.seq
    assert AuditEntry.objects.get(action="side_effect.resolve").actor_label == "status-check"
    # Idempotent: a second run (a redelivered task) leaves it alone.
    again = side_effect_status_check(side_effect_id=effect.pk)
    assert again["resolved"] is False and again["status"] == "succeeded"
    assert Event.objects.filter(kind="side_effect_resolution").count() == 1


@pytest.mark.parametrize(
    ("code", "body"),
    [
        (200, {"status": "unknown"}),
        (200, {"state": "done"}),
        (200, b"not json"),
        (500, {"status": "succeeded"}),
        (404, {"error": "x"}),
    ],
)
def test_inconclusive_status_checks_change_nothing(
    thread: Thread, tool_server: ToolServer, status_check: ToolStatusCheck, code: int, body: Any
) -> None:
    effect = refund(thread)
    tool_server.answer("refund-1", body, code)
    outcome = side_effect_status_check(side_effect_id=effect.pk)
    assert outcome["resolved"] is False
    assert not Event.objects.filter(kind="side_effect_resolution").exists()
    effect.refresh_from_db()
    assert effect.status == "unknown"


def test_status_check_refuses_non_http_urls(thread: Thread, workspace: Any) -> None:
    effect = refund(thread)
    ToolStatusCheck.objects.create(
        workspace=workspace, tool_name="refund", url_template="file:///etc/{idempotency_key}"
    )
    outcome = side_effect_status_check(side_effect_id=effect.pk)
    assert outcome["resolved"] is False and "http" in outcome["error"]


def test_status_check_of_an_unreachable_tool(thread: Thread, workspace: Any) -> None:
    effect = refund(thread)
    ToolStatusCheck.objects.create(
        workspace=workspace,
        tool_name="refund",
        url_template="http://127.0.0.1:9/{idempotency_key}",  # discard port: refused
    )
    outcome = side_effect_status_check(side_effect_id=effect.pk)
    assert outcome["resolved"] is False and "failed" in outcome["error"]
