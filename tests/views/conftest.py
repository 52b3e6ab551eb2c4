"""A thread with a story to show (lookups, a refund that timed out, a pending approval, a
constraint, agent content that tries to be HTML) and people of every role."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.models import SummaryPhase, Thread
from threads.services import folding

MANUAL = {"kind": "manual", "reason": "test"}
HOSTILE = '<script>alert(1)</script><div hx-post="/x">'


def fold(thread: Thread) -> Any:
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.phase == SummaryPhase.COMMITTED, version
    thread.refresh_from_db()
    return version


def build_story(thread: Thread) -> Thread:
    """v1 covers a lookup; v2 covers a refund that timed out (unknown); then a pending
    approval and a hostile user message stay raw after the head."""
    f.append(
        thread,
        f.user("Refund order 10086, but never more than $200."),
        f.annotation("constraint", "user", {"text": "never refund more than $200"}),
        f.call("c1", "lookup_order", {"order": 10086}),
        f.result("c1", value={"total": 180}, verified_facts=[{"key": "order_total", "value": 180}]),
        f.assistant("The order total is $180."),
    )
    fold(thread)
    f.append(
        thread,
        f.user("go ahead"),
        f.call("c2", "refund", {"order": 10086, "amount": 180}, side_effect_key="refund-10086"),
        f.result("c2", status="timeout"),
        f.assistant("The refund timed out."),
    )
    fold(thread)
    f.append(
        thread,
        f.user(HOSTILE),
        {
            "kind": "approval_request",
            "action": "issue_store_credit",
            "arguments": {"order": 10086, "amount": 20},
            "tool_name": "credit",
        },
    )
    thread.refresh_from_db()
    return thread


@pytest.fixture
def story(workspace: Any) -> Thread:
    return build_story(f.make_thread(workspace, external_id="order-10086", title="Refund"))


def login(workspace: Any, role: str, *, csrf: bool = False, username: str = "") -> Client:
    user = f.make_person(workspace, username or f"{role}-person", role)
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def operator(workspace: Any) -> Client:
    return login(workspace, "operator")


@pytest.fixture
def reviewer(workspace: Any) -> Client:
    return login(workspace, "reviewer")


@pytest.fixture
def admin(workspace: Any) -> Client:
    return login(workspace, "admin")


@pytest.fixture
def outsider(db: Any) -> Client:
    """An admin of another workspace: sees none of acme's threads."""
    other, _ = f.make_workspace("globex")
    return login(other, "admin", username="stranger")
