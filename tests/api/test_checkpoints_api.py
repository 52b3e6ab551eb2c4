"""Checkpoints, rollback and fork over the API: roles, CSRF, workspaces, the contract's shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.conftest import log_state
from tests.factories import tamper
from tests.services.test_checkpoints import fold, parent_snapshot, two_versions
from threads.models import AuditEntry, Checkpoint, Event, SummaryVersion, Thread

pytestmark = pytest.mark.django_db


def with_csrf(client: APIClient) -> APIClient:
    """Give a session client the CSRF cookie and header a browser page would send."""
    token = get_random_string(32)
    client.cookies["csrftoken"] = token
    client.credentials(HTTP_X_CSRFTOKEN=token)
    return client


def post(client: APIClient, url: str, body: Any = None) -> Any:
    return client.post(url, data=json.dumps(body or {}), content_type="application/json")


def person(workspace: Any, role: str, name: str = "") -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(f.make_person(workspace, name or f"{role}-x", role))
    return with_csrf(client)


@pytest.fixture
def checkpoints(thread: Thread) -> tuple[Checkpoint, Checkpoint]:
    return two_versions(thread)


def url(thread: Thread, tail: str) -> str:
    return f"/api/v1/threads/{thread.pk}/{tail}"


def test_list_checkpoints(
    thread: Thread, checkpoints: Any, agent: APIClient, operator_client: APIClient
) -> None:
    for client in (agent, operator_client):
        answer = client.get(url(thread, "checkpoints/"))
        assert answer.status_code == 200
        rows = answer.json()
        assert [(r["summary_version"], r["cursor"]) for r in rows] == [(2, 8), (1, 4)]
        assert set(rows[0]) >= {
            "id",
            "summary_version",
            "cursor",
            "chain_hash",
            "summary_checksum",
            "safe",
            "unsafe_reason",
            "created_at",
            "label",
        }
        assert rows[0]["chain_hash"] == Event.objects.get(thread=thread, seq=8).hash
        assert rows[0]["safe"] is True


def test_another_workspace_sees_nothing(
    thread: Thread, checkpoints: Any, other_agent: APIClient, db: Any
) -> None:
    cp1, _ = checkpoints
    outsider = person(f.make_workspace("initech")[0], "admin", "eve")
    assert other_agent.get(url(thread, "checkpoints/")).status_code == 404
    for path, body in [
        ("checkpoints/", {"label": "x"}),
        ("rollback/", {"checkpoint": cp1.pk, "reason": "x"}),
        ("fork/", {"checkpoint": cp1.pk, "external_id": "b"}),
    ]:
        answer = post(outsider, url(thread, path), body)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "not_found"
    assert outsider.get(url(thread, f"checkpoints/{cp1.pk}/preview/")).status_code == 404


def test_create_checkpoint(
    thread: Thread, checkpoints: Any, workspace: Any, agent: APIClient
) -> None:
    operator = person(workspace, "operator")
    answer = post(operator, url(thread, "checkpoints/"), {"label": "before the fix"})
    assert answer.status_code == 201
    body = answer.json()
    assert body["label"] == "before the fix" and body["cursor"] == 8
    assert body["summary_version"] == 2 and body["created_by"] == "operator-x"
    assert post(agent, url(thread, "checkpoints/"), {"label": "x"}).status_code == 403


def test_csrf_is_enforced_for_people(thread: Thread, checkpoints: Any, workspace: Any) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(f.make_person(workspace, "ada", "admin"))
    cp1, _ = checkpoints
    answer = post(client, url(thread, "rollback/"), {"checkpoint": cp1.pk, "reason": "x"})
    assert answer.status_code == 403
    assert "CSRF" in answer.json()["error"]["message"]
    thread.refresh_from_db()
    assert thread.head_version == 2


def test_preview(thread: Thread, checkpoints: Any, admin_client_ws: APIClient) -> None:
    cp1, _ = checkpoints
    answer = admin_client_ws.get(url(thread, f"checkpoints/{cp1.pk}/preview/"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["safe"] is True and body["new_version"] == 3
    assert [(s["tool_call_id"], s["status"]) for s in body["side_effects"]] == [("c2", "unknown")]
    assert [v["version"] for v in body["versions_replaced"]] == [2]


def test_rollback_roles(thread: Thread, checkpoints: Any, workspace: Any, agent: APIClient) -> None:
    cp1, _ = checkpoints
    body = {"checkpoint": cp1.pk, "reason": "v2 lost the refund"}
    assert post(agent, url(thread, "rollback/"), body).status_code == 403
    for role in ("operator", "reviewer"):
        answer = post(person(workspace, role), url(thread, "rollback/"), body)
        assert answer.status_code == 403, role
        assert answer.json()["error"]["code"] == "permission_denied"
    thread.refresh_from_db()
    assert thread.head_version == 2


def test_rollback_needs_a_reason(thread: Thread, checkpoints: Any, workspace: Any) -> None:
    cp1, _ = checkpoints
    answer = post(person(workspace, "admin"), url(thread, "rollback/"), {"checkpoint": cp1.pk})
    assert answer.status_code == 400
    assert "reason" in answer.json()["error"]["fields"]


def test_rollback_then_the_context_shows_the_side_effects_again(
    thread: Thread, checkpoints: Any, workspace: Any, agent: APIClient
) -> None:
    cp1, _ = checkpoints
    before = agent.get(url(thread, "context/")).json()
    assert before["summary"]["covered_until"] == 8
    assert all(e["seq"] > 8 for e in before["events"])

    answer = post(
        person(workspace, "admin"),
        url(thread, "rollback/"),
        {"checkpoint": cp1.pk, "reason": "v2 lost the refund"},
    )

    assert answer.status_code == 200
    head = answer.json()
    assert head["version"] == 3 and head["phase"] == "committed"
    assert head["covered_until"] == 4 and head["restored_from"] == cp1.pk
    assert head["trigger"]["kind"] == "rollback"
    context = agent.get(url(thread, "context/")).json()
    assert context["summary"]["version"] == 3 and context["summary"]["covered_until"] == 4
    seqs = [e["seq"] for e in context["events"]]
    assert seqs == [5, 6, 7, 8]
    call = next(e for e in context["events"] if e["seq"] == 6)
    assert call["kind"] == "tool_call" and call["idempotency_key"] == "refund-10086"
    detail = agent.get(f"/api/v1/threads/{thread.pk}/").json()
    assert detail["head_version"] == 3 and detail["covered_until"] == 4
    assert SummaryVersion.objects.get(thread=thread, version=2).phase == "rolled_back"


def test_a_rollback_from_a_stale_preview_is_409(
    thread: Thread, checkpoints: Any, workspace: Any
) -> None:
    cp1, _ = checkpoints
    admin = person(workspace, "admin")
    preview = admin.get(url(thread, f"checkpoints/{cp1.pk}/preview/")).json()
    assert preview["after_rollback"] == 0
    assert preview["new_version"] == 3 and preview["clears_summary"] is False
    body = {"checkpoint": cp1.pk, "reason": "v2 lost the refund", "after_rollback": 0}
    assert post(admin, url(thread, "rollback/"), body).status_code == 200
    before = log_state(thread), SummaryVersion.objects.count()
    again = post(admin, url(thread, "rollback/"), body)
    assert again.status_code == 409, again.content
    assert again.json()["error"]["code"] == "rolled_back_since_preview"
    assert (log_state(thread), SummaryVersion.objects.count()) == before
    assert AuditEntry.objects.filter(action="thread.rollback").count() == 1


def test_a_rollback_after_a_fold_since_its_preview_is_409(
    thread: Thread, checkpoints: Any, workspace: Any
) -> None:
    """The preview named the versions to replace and the one to write; a fold since wrote
    another, so the preview no longer says what would happen."""
    cp1, _ = checkpoints
    admin = person(workspace, "admin")
    preview = admin.get(url(thread, f"checkpoints/{cp1.pk}/preview/")).json()
    assert preview["after_version"] == 2 and preview["new_version"] == 3
    f.append(thread, f.user("one more thing"), f.assistant("sure"))
    fold(thread)  # v3
    body = {
        "checkpoint": cp1.pk,
        "reason": "v2 lost the refund",
        "after_rollback": preview["after_rollback"],
        "after_version": preview["after_version"],
    }
    before = log_state(thread), SummaryVersion.objects.count()
    answer = post(admin, url(thread, "rollback/"), body)
    assert answer.status_code == 409, answer.content
    assert answer.json()["error"]["code"] == "folded_since_preview"
    assert (log_state(thread), SummaryVersion.objects.count()) == before
    fresh = admin.get(url(thread, f"checkpoints/{cp1.pk}/preview/")).json()
    body["after_version"] = fresh["after_version"]
    assert post(admin, url(thread, "rollback/"), body).status_code == 200


def test_rollback_to_an_unsafe_checkpoint_is_409(
    thread: Thread, checkpoints: Any, workspace: Any, agent: APIClient
) -> None:
    cp1, cp2 = checkpoints
    tamper(Event.objects.get(thread=thread, seq=6), arguments={"amount": 9999})
    assert agent.post(url(thread, "verify/")).status_code == 202  # queues a task; run it here
    from threads.services.integrity import integrity_check

    integrity_check(thread=thread, full=True)
    assert agent.get(url(thread, "integrity/")).json()["first_bad_seq"] == 6
    listed = {r["id"]: r for r in agent.get(url(thread, "checkpoints/")).json()}
    assert listed[cp2.pk]["safe"] is False and "seq 6" in listed[cp2.pk]["unsafe_reason"]
    assert listed[cp1.pk]["safe"] is True

    admin = person(workspace, "admin")
    refused = post(admin, url(thread, "rollback/"), {"checkpoint": cp2.pk, "reason": "x"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "checkpoint_unsafe"
    accepted = post(admin, url(thread, "rollback/"), {"checkpoint": cp1.pk, "reason": "x"})
    assert accepted.status_code == 200 and accepted.json()["covered_until"] == 4


def test_fork(thread: Thread, checkpoints: Any, workspace: Any, agent: APIClient) -> None:
    cp1, cp2 = checkpoints
    before = parent_snapshot(thread)
    body = {"checkpoint": cp2.pk, "external_id": "order-10086-retry"}
    assert post(agent, url(thread, "fork/"), body).status_code == 403
    assert post(person(workspace, "operator"), url(thread, "fork/"), body).status_code == 403

    answer = post(person(workspace, "reviewer"), url(thread, "fork/"), body)

    assert answer.status_code == 201
    fork = answer.json()
    assert fork["external_id"] == "order-10086-retry"
    assert fork["parent_thread"] == str(thread.pk) and fork["parent_checkpoint"] == cp2.pk
    assert fork["last_seq"] == 8 and fork["head_version"] == 1 and fork["covered_until"] == 8
    assert parent_snapshot(thread) == before
    # The agent carries on in the fork by its external_id.
    assert agent.get("/api/v1/threads/order-10086-retry/checkpoints/").status_code == 200
    again = post(person(workspace, "reviewer", "rex2"), url(thread, "fork/"), body)
    assert again.status_code == 409 and again.json()["error"]["code"] == "external_id_taken"


def test_a_fold_after_rollback_takes_a_higher_number(
    thread: Thread, checkpoints: Any, workspace: Any
) -> None:
    cp1, _ = checkpoints
    post(
        person(workspace, "admin"), url(thread, "rollback/"), {"checkpoint": cp1.pk, "reason": "x"}
    )
    assert fold(thread).version == 4
