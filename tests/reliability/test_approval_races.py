"""Two reviewers deciding the same approval at the same moment, 200 times: exactly one
decision each time, and the other reviewer is told 409 (docs/repairs.md, "Approvals", docs/api.md,
"Approvals").

Real concurrency: two long-lived threads, each with its own database connection, one deciding
through the API and one through the dashboard's form post, released together by a barrier
for every request. On PostgreSQL the thread row lock orders them; on SQLite (WAL, IMMEDIATE
transactions) the database's write lock does.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from threads.models import ApprovalRequest, AuditEntry, Event, EventKind

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 200
DECIDED = {"approve": "approved", "reject": "rejected"}


class Reviewer(threading.Thread):
    """Decides the round's approval when released; keeps its connection for all rounds."""

    def __init__(self, start: threading.Barrier, end: threading.Barrier, post: Any) -> None:
        super().__init__(daemon=True)
        self.start_barrier, self.end_barrier, self.post = start, end, post
        self.approval_id = 0
        self.decision = ""
        self.answer: tuple[int, str] = (0, "")
        self.stop = False

    def run(self) -> None:
        try:
            while True:
                self.start_barrier.wait()
                if self.stop:
                    return
                try:
                    self.answer = self.post(self.approval_id, self.decision)
                except BaseException as exc:  # reported by the round's asserts
                    self.answer = (-1, repr(exc))
                self.end_barrier.wait()
        finally:
            connections.close_all()


def api_reviewer(client: APIClient) -> Any:
    def post(approval_id: int, decision: str) -> tuple[int, str]:
        response = client.post(
            f"/api/v1/approvals/{approval_id}/decide/",
            {"decision": decision, "reason": "api reviewer"},
            format="json",
        )
        if response.status_code == 200:
            return 200, response.json()["status"]
        error = response.json()["error"]
        assert set(error) == {"code", "message", "fields"}, error
        return response.status_code, error["code"]

    return post


def dashboard_reviewer(client: Client) -> Any:
    def post(approval_id: int, decision: str) -> tuple[int, str]:
        response = client.post(
            f"/approvals/{approval_id}/decide/",
            {"decision": decision, "reason": "dashboard reviewer"},
            headers={"HX-Request": "true"},
        )
        page = response.content.decode()
        if response.status_code == 200:
            return 200, "decided"
        assert response["HX-Retarget"] == "#notice", page
        return response.status_code, "already_decided" if "already_decided" in page else page

    return post


def test_two_reviewers_deciding_at_once_200_times_make_one_decision_each_time(
    workspace: Any,
) -> None:
    thread = f.make_thread(workspace, external_id="approval-race")
    api = APIClient()
    api.force_login(f.make_person(workspace, "rita", "reviewer"))
    dashboard = Client()
    dashboard.force_login(f.make_person(workspace, "dan", "reviewer"))
    start, end = threading.Barrier(3), threading.Barrier(3)
    reviewers = [
        Reviewer(start, end, api_reviewer(api)),
        Reviewer(start, end, dashboard_reviewer(dashboard)),
    ]
    for reviewer in reviewers:
        reviewer.start()
    winners: Counter[str] = Counter()
    try:
        for round_ in range(ROUNDS):
            [request] = f.append(
                thread,
                {"kind": "approval_request", "action": f"refund {round_}", "arguments": {}},
            )
            approval = ApprovalRequest.objects.get(thread=thread, request_event__seq=request.seq)
            # They disagree, and take turns at which one approves.
            decisions = ["approve", "reject"] if round_ % 2 else ["reject", "approve"]
            for reviewer, decision in zip(reviewers, decisions, strict=True):
                reviewer.approval_id, reviewer.decision = approval.pk, decision
            start.wait(timeout=60)
            end.wait(timeout=120)
            answers = [reviewer.answer for reviewer in reviewers]
            won = [i for i, (status, _) in enumerate(answers) if status == 200]
            lost = [(status, answer) for status, answer in answers if status != 200]
            assert len(won) == 1 and lost == [(409, "already_decided")], (round_, answers)
            decisions_logged = Event.objects.filter(
                thread=thread,
                kind=EventKind.APPROVAL_DECISION,
                data__approval_seq=request.seq,
            )
            [decision_event] = list(decisions_logged)
            approval.refresh_from_db()
            assert decision_event.data["decision"] == decisions[won[0]]
            assert approval.status == DECIDED[decisions[won[0]]]
            assert approval.decision_event_id == decision_event.pk
            audits = AuditEntry.objects.filter(action="approval.decide", target_id=str(approval.pk))
            assert audits.count() == 1
            winners[("api", "dashboard")[won[0]]] += 1
    finally:
        for reviewer in reviewers:
            reviewer.stop = True
        start.wait(timeout=60)
        for reviewer in reviewers:
            reviewer.join(timeout=60)
    assert sum(winners.values()) == ROUNDS
    assert Event.objects.filter(thread=thread, kind=EventKind.APPROVAL_DECISION).count() == ROUNDS
    print(f"\n{ROUNDS} rounds: decided by {dict(winners)}")
