"""Asking a person: `request_approval` opens an approval the agent can name, and
`wait_for_decision` returns the reviewer's decision, made while the client waits (through the
approvals service, from another thread, as a person pressing the button would), or raises
ApprovalTimeout when nobody decides in time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from ctxadmin_client import ApprovalTimeout, AsyncClient, Client
from django.db import connection
from django.utils import timezone

from tests import factories
from tests.client.conftest import Server
from threads.models import ApprovalRequest, Event
from threads.services.approvals import approval_decide


def decide_later(
    server: Server, approval_id: int, decision: str, delay: float = 0.3
) -> tuple[threading.Thread, list[BaseException]]:
    """A reviewer decides `approval_id` after `delay` seconds, on a thread of its own (with its
    own database connection, closed at the end; no ORM on the caller's thread, so an event
    loop may call this)."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            reviewer = factories.make_person(
                server.workspace, f"reviewer-{approval_id}", "reviewer"
            )
            time.sleep(delay)
            approval_decide(
                approval=ApprovalRequest.objects.select_related("thread__workspace").get(
                    pk=approval_id
                ),
                actor=reviewer,
                decision=decision,
                reason=f"{decision}d by the on-call reviewer",
            )
        except BaseException as exc:  # reported by the test
            failures.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    return worker, failures


def test_request_then_wait_for_the_decision(server: Server) -> None:
    with Client(server.url, server.api_key) as client:
        thread = client.thread("refund-10086")
        thread.append({"kind": "message", "role": "user", "content": "refund order 10086"})
        approval = thread.request_approval(
            "refund", {"order": 10086, "amount": 180}, tool_name="payments"
        )
        assert approval["status"] == "pending" and approval["decision"] is None
        assert approval["approval_seq"] == 2
        assert (approval["action"], approval["tool_name"]) == ("refund", "payments")
        request = Event.objects.get(thread_id=thread.id, seq=2)
        assert request.kind == "approval_request"
        assert ApprovalRequest.objects.get(pk=approval["id"]).request_event_id == request.pk

        worker, failures = decide_later(server, approval["id"], "approve")
        started = time.monotonic()
        decided = thread.wait_for_decision(approval["id"], timeout=30, poll_interval=0.05)
        worker.join()
        assert failures == []
        assert time.monotonic() - started < 10
        assert (decided["status"], decided["decision"]) == ("approved", "approve")
        assert decided["reason"] == "approved by the on-call reviewer"
        assert decided["decided_by"] == f"reviewer-{approval['id']}"
        assert decided["decision_seq"] == 3
        assert [a["status"] for a in thread.approvals()] == ["approved"]
        # The decision is in the log, the request's seq named.
        *_, request_event, decision_event = thread.events()
        assert (request_event["kind"], decision_event["kind"]) == (
            "approval_request",
            "approval_decision",
        )
        assert decision_event["approval_seq"] == 2 and decision_event["decision"] == "approve"


def test_wait_for_decision_times_out(server: Server) -> None:
    with Client(server.url, server.api_key) as client:
        thread = client.thread("nobody-home")
        approval = thread.request_approval("delete_account", {"user": 7})
        started = time.monotonic()
        with pytest.raises(ApprovalTimeout) as waited:
            thread.wait_for_decision(approval["id"], timeout=0.4, poll_interval=0.1)
        assert 0.4 <= time.monotonic() - started < 5
        assert waited.value.approval["id"] == approval["id"]
        assert waited.value.approval["status"] == "pending"
        assert waited.value.expired is False
        assert issubclass(ApprovalTimeout, TimeoutError)
        # Still pending: a later wait can still get the decision.
        worker, failures = decide_later(server, approval["id"], "reject", delay=0.1)
        decided = thread.wait_for_decision(approval["id"], timeout=30, poll_interval=0.05)
        worker.join()
        assert failures == [] and decided["decision"] == "reject"


def test_an_expired_request_ends_the_wait_at_once(server: Server) -> None:
    with Client(server.url, server.api_key) as client:
        thread = client.thread("too-late")
        approval = thread.request_approval(
            "refund", {"order": 1}, expires_at="2020-01-01T00:00:00Z"
        )
        assert approval["status"] == "pending"  # the server keeps it pending, undecidable
        started = time.monotonic()
        with pytest.raises(ApprovalTimeout) as waited:
            thread.wait_for_decision(approval["id"], timeout=30, poll_interval=0.05)
        assert waited.value.expired is True
        assert time.monotonic() - started < 5


def test_the_servers_word_on_expiry_ends_the_wait(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the client's clock the request has an hour left; by the server's it has expired
    (clocks apart): the client takes the server's `expired`, not its own reading."""
    with Client(server.url, server.api_key) as client:
        thread = client.thread("clocks-apart")
        in_an_hour = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        approval = thread.request_approval("refund", {"order": 2}, expires_at=in_an_hour)
        moved = timezone.now() + timedelta(hours=2)
        monkeypatch.setattr(timezone, "now", lambda: moved)  # the server's clock only
        with pytest.raises(ApprovalTimeout) as waited:
            thread.wait_for_decision(approval["id"], timeout=2, poll_interval=0.05)
        assert waited.value.expired is True


def test_wait_for_an_unknown_approval_is_not_found(server: Server) -> None:
    from ctxadmin_client import NotFoundError

    with Client(server.url, server.api_key) as client:
        thread = client.thread("no-approvals")
        with pytest.raises(NotFoundError):
            thread.wait_for_decision(123456, timeout=1)


@pytest.mark.asyncio
async def test_async_request_and_wait(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        thread = await client.thread("async-approval")
        approval = await thread.request_approval("refund", {"order": 1})
        assert approval["approval_seq"] == 1 and approval["status"] == "pending"
        with pytest.raises(ApprovalTimeout):
            await thread.wait_for_decision(approval["id"], timeout=0.2, poll_interval=0.05)
        worker, failures = decide_later(server, approval["id"], "approve", 0.2)
        decided = await thread.wait_for_decision(approval["id"], timeout=30, poll_interval=0.05)
        worker.join()
        assert failures == [] and decided["status"] == "approved"
