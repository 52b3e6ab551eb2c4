"""Every body names only fields its operation declares, each of its declared JSON type: anything
else is 400 `validation_error` naming the field, and nothing is written (docs/api.md, "Codes")."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint
from tests.api.conftest import log_state
from tests.api.test_checkpoints_api import person, post, url
from tests.api.test_repairs_api import approval_request
from tests.services.test_checkpoints import two_versions
from tests.services.test_side_effects import refund
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    SideEffectStatus,
    TaskRun,
    Thread,
)

pytestmark = pytest.mark.django_db


def _refused(answer: Any, field: str) -> None:
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["fields"], error


def _writes() -> tuple[int, int, int]:
    return AuditEntry.objects.count(), TaskRun.objects.count(), Checkpoint.objects.count()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "succeeded", "evidence": 5}, "evidence"),
        ({"status": "succeeded", "evidence": "the ledger", "bogus": 1}, "bogus"),
    ],
)
def test_a_resolution_names_only_its_fields(
    thread: Thread, workspace: Any, body: Any, field: str
) -> None:
    unknown_refund = refund(thread)
    before, writes = log_state(thread), _writes()
    answer = post(
        person(workspace, "operator"), f"/api/v1/side-effects/{unknown_refund.pk}/resolve/", body
    )
    _refused(answer, field)
    unknown_refund.refresh_from_db()
    assert unknown_refund.status == SideEffectStatus.UNKNOWN
    assert (log_state(thread), _writes()) == (before, writes)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "approve", "reason": "fine", "bogus": 1}, "bogus"),
        ({"decision": "approve", "reason": ["fine"]}, "reason"),
    ],
)
def test_a_decision_names_only_its_fields(
    thread: Thread, workspace: Any, body: Any, field: str
) -> None:
    approval = approval_request(thread)
    before, writes = log_state(thread), _writes()
    answer = post(person(workspace, "reviewer"), f"/api/v1/approvals/{approval.pk}/decide/", body)
    _refused(answer, field)
    assert ApprovalRequest.objects.get(pk=approval.pk).decision_event_id is None
    assert (log_state(thread), _writes()) == (before, writes)


@pytest.mark.parametrize(
    ("tail", "role", "body", "field"),
    [
        ("checkpoints/", "operator", {"label": "op", "bogus": 1}, "bogus"),
        ("rollback/", "admin", {"checkpoint": "1", "reason": "bad"}, "checkpoint"),
        ("rollback/", "admin", {"checkpoint": 1.0, "reason": "bad"}, "checkpoint"),
        ("fork/", "reviewer", {"checkpoint": True, "external_id": "f-1"}, "checkpoint"),
        ("fork/", "reviewer", {"checkpoint": 1, "external_id": "f-1", "title": "x"}, "title"),
    ],
)
def test_a_repair_names_only_its_fields(
    thread: Thread, workspace: Any, tail: str, role: str, body: Any, field: str
) -> None:
    two_versions(thread)
    before, writes = log_state(thread), _writes()
    threads = Thread.objects.count()
    _refused(post(person(workspace, role), url(thread, tail), body), field)
    assert (log_state(thread), _writes(), Thread.objects.count()) == (before, writes, threads)


@pytest.mark.parametrize("tail", ["fold/", "verify/"])
def test_an_agent_request_names_only_its_fields(
    agent: APIClient, thread: Thread, tail: str
) -> None:
    writes = _writes()
    _refused(post(agent, url(thread, tail), {"reason": "x", "bogus": 1}), "bogus")
    assert _writes() == writes
    assert post(agent, url(thread, tail)).status_code == 202  # no body at all, or {}


def test_a_langgraph_put_names_only_its_fields(agent: APIClient, thread: Thread) -> None:
    body = {"checkpoint_id": "c-1", "checkpoint": {}, "bogus": 1}
    _refused(post(agent, url(thread, "langgraph/checkpoints/"), body), "bogus")
    assert not LanggraphCheckpoint.objects.exists()
