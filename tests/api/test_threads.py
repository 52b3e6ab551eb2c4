"""POST/GET /api/v1/threads/ and GET /api/v1/threads/{id}/, and task status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from tests import factories
from tests.api.conftest import post_json
from threads.domain.errors import InvalidEvent
from threads.models import (
    AuditEntry,
    SideEffect,
    SideEffectStatus,
    SummaryPhase,
    SummaryVersion,
    TaskState,
    Thread,
    ThreadStatus,
)
from threads.services.integrity import integrity_check
from threads.services.tasks import task_run_finish, task_run_progress, task_run_start
from threads.services.threads import thread_get_or_create

pytestmark = pytest.mark.django_db

CREATE = {
    "external_id": "order-20001",
    "title": "Refund",
    "context_window": 32000,
    "reserved_output": 1000,
    "reasoning_reserve": 100,
    "safety_margin": 300,
    "encoding": "o200k_base",
    "high_watermark": 0.9,
    "low_watermark": 0.4,
}


def test_create_then_post_again_returns_the_same_thread(agent, workspace):
    created = post_json(agent, "/api/v1/threads/", CREATE)
    assert created.status_code == 201, created.content
    body = created.json()
    for key, value in CREATE.items():
        assert body[key] == value
    assert body["last_seq"] == 0 and body["head_version"] == 0 and body["chain_ok"] is True
    assert body["parent_thread"] is None and body["parent_checkpoint"] is None
    again = post_json(
        agent, "/api/v1/threads/", {"external_id": "order-20001", "context_window": 64000}
    )
    assert again.status_code == 200
    assert again.json()["id"] == body["id"]
    assert again.json()["context_window"] == 32000  # an existing thread is returned unchanged
    assert Thread.objects.filter(workspace=workspace).count() == 1
    audit = AuditEntry.objects.get(action="thread.create")
    assert audit.actor_label == "api key default"
    assert audit.target_id == body["id"]


def test_create_uses_defaults(agent):
    body = post_json(agent, "/api/v1/threads/", {"external_id": "plain"}).json()
    assert body["encoding"] == "cl100k_base"
    assert body["context_window"] == 16000
    assert body["summarizer"] == "structured"


@pytest.mark.parametrize(
    "bad, field",
    [
        ({}, "external_id"),
        ({"external_id": ""}, "external_id"),
        ({"external_id": "a/b"}, "external_id"),
        ({"external_id": "x" * 201}, "external_id"),
        ({"external_id": "t", "context_window": -1}, "context_window"),
        ({"external_id": "t", "reserved_output": "many"}, "reserved_output"),
        ({"external_id": "t", "safety_margin": 2**31}, "safety_margin"),
        ({"external_id": "t", "reasoning_reserve": 1.5}, "reasoning_reserve"),
        ({"external_id": "t", "encoding": "gpt2"}, "encoding"),
        ({"external_id": "t", "high_watermark": 1.5}, "high_watermark"),
        ({"external_id": "t", "low_watermark": 0.9}, "low_watermark"),  # above the default high
        ({"external_id": "t", "high_watermark": 0.5, "low_watermark": 0.5}, "low_watermark"),
        ({"external_id": "t", "low_watermark": 0}, "low_watermark"),
        ({"external_id": "t", "summarizer": "magic"}, "summarizer"),
        ({"external_id": "t", "colour": "red"}, "colour"),
        ({"external_id": 5}, "external_id"),
        ({"external_id": "t", "title": 5}, "title"),
        ({"external_id": "t", "context_window": "1000"}, "context_window"),
        ({"external_id": "t", "context_window": 1000.0}, "context_window"),
        ({"external_id": "t", "fixed_tokens": True}, "fixed_tokens"),
        ({"external_id": "t", "high_watermark": "0.9"}, "high_watermark"),
        ({"external_id": "t", "context_window": 0}, "context_window"),
        ({"external_id": "t", "context_window": 1000, "reserved_output": 5000}, "context_window"),
        ({"external_id": "t", "context_window": 2500}, "context_window"),  # 2500 - 2000 - 500
    ],
)
def test_create_validates_settings(agent, bad, field):
    response = post_json(agent, "/api/v1/threads/", bad)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["fields"]
    assert not Thread.objects.exists()


def test_create_refuses_a_non_object(agent):
    response = post_json(agent, "/api/v1/threads/", ["order-1"])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_people_cannot_create_threads(operator_client):
    token = "b" * 32
    operator_client.cookies["csrftoken"] = token
    response = operator_client.post(
        "/api/v1/threads/",
        data=json.dumps({"external_id": "p"}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 403
    assert not Thread.objects.filter(external_id="p").exists()


def test_get_by_uuid_and_by_external_id(agent, thread):
    factories.append(thread, factories.user("hi"), factories.call("c", "t"))
    by_id = agent.get(f"/api/v1/threads/{thread.id}/").json()
    by_external = agent.get(f"/api/v1/threads/{thread.external_id}/").json()
    assert by_id == by_external
    thread.refresh_from_db()
    assert by_id["id"] == str(thread.id)
    assert by_id["last_seq"] == 2
    assert by_id["chain_head"] == thread.chain_head
    assert by_id["token_total"] == thread.token_total > 0
    assert by_id["covered_until"] == 0
    assert by_id["first_bad_seq"] is None
    assert agent.get("/api/v1/threads/no-such-thread/").status_code == 404
    assert agent.get("/api/v1/threads/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_an_external_id_that_looks_like_a_uuid(agent, workspace):
    looks_like = "12345678-1234-5678-1234-567812345678"
    thread = factories.make_thread(workspace, external_id=looks_like)
    assert agent.get(f"/api/v1/threads/{looks_like}/").json()["id"] == str(thread.id)


def test_lineage_of_a_fork_is_shown(agent, workspace, thread):
    fork = factories.make_thread(workspace, external_id="fork", parent_thread=thread)
    body = agent.get(f"/api/v1/threads/{fork.id}/").json()
    assert body["parent_thread"] == str(thread.id)


@pytest.fixture
def population(workspace: Any) -> dict[str, Thread]:
    """Threads each with one problem, plus a quiet one."""
    unknown = factories.make_thread(workspace, external_id="refund-unknown", title="Refund A")
    factories.append(
        unknown,
        factories.call("c", "refund", side_effect_key="k"),
        factories.result("c", "timeout"),
    )
    pending = factories.make_thread(workspace, external_id="needs-approval", title="Payout")
    factories.append(pending, {"kind": "approval_request", "action": "pay", "arguments": {}})
    failed = factories.make_thread(workspace, external_id="bad-summary", title="refund B")
    factories.append(failed, factories.user("x"))
    SummaryVersion.objects.create(
        thread=failed,
        version=1,
        phase=SummaryPhase.REJECTED,
        covered_from=1,
        covered_until=1,
        chain_hash=failed.chain_head,
        backend="structured",
        checksum="0" * 64,
        content={},
        rendered="",
    )
    Thread.objects.filter(pk=failed.pk).update(last_version=1)
    archived = factories.make_thread(workspace, external_id="old", status=ThreadStatus.ARCHIVED)
    quiet = factories.make_thread(workspace, external_id="quiet")
    return {
        "unknown": unknown,
        "pending": pending,
        "failed": failed,
        "archived": archived,
        "quiet": quiet,
    }


def _ids(agent: Any, **params: Any) -> set[str]:
    response = agent.get("/api/v1/threads/", params)
    assert response.status_code == 200, response.content
    return {t["external_id"] for t in response.json()["results"]}


def test_list_filters(agent, population):
    assert _ids(agent) == {t.external_id for t in population.values()}
    assert _ids(agent, q="REFUND") == {"refund-unknown", "bad-summary"}  # id or title
    assert _ids(agent, status="archived") == {"old"}
    assert _ids(agent, has_unknown_side_effects="true") == {"refund-unknown"}
    assert "refund-unknown" not in _ids(agent, has_unknown_side_effects="false")
    assert _ids(agent, pending_approvals="true") == {"needs-approval"}
    assert _ids(agent, verification="failed") == {"bad-summary"}
    assert _ids(agent, q="refund", has_unknown_side_effects="true") == {"refund-unknown"}
    flags = {t["external_id"]: t for t in agent.get("/api/v1/threads/").json()["results"]}
    assert flags["refund-unknown"]["has_unknown_side_effects"] is True
    assert flags["needs-approval"]["pending_approvals"] is True
    assert flags["bad-summary"]["verification_failed"] is True
    assert flags["quiet"]["has_unknown_side_effects"] is False


def test_a_committed_version_after_a_rejected_one_clears_failed(agent, population):
    failed = population["failed"]
    SummaryVersion.objects.create(
        thread=failed,
        version=2,
        phase=SummaryPhase.COMMITTED,
        covered_from=1,
        covered_until=1,
        chain_hash=failed.chain_head,
        backend="structured",
        checksum="0" * 64,
        content={},
        rendered="",
    )
    Thread.objects.filter(pk=failed.pk).update(last_version=2, head_version=2)
    assert _ids(agent, verification="failed") == set()


def test_a_broken_chain_is_failed_verification(agent, population):
    """?verification=failed means what the dashboard's "Failed verification" means: a
    rejected summary version, or a hash chain that no longer verifies."""
    broken = population["quiet"]
    events = factories.append(broken, factories.user("refund order 1"), factories.assistant("ok"))
    factories.tamper(events[0], content="refund order 2")
    integrity_check(thread=broken, full=True)
    broken.refresh_from_db()
    assert broken.chain_ok is False
    assert _ids(agent, verification="failed") == {"bad-summary", "quiet"}


def test_resolving_the_side_effect_clears_the_filter(agent, population):
    SideEffect.objects.filter(thread=population["unknown"]).update(
        status=SideEffectStatus.SUCCEEDED
    )
    assert _ids(agent, has_unknown_side_effects="true") == set()


@pytest.mark.parametrize(
    "params",
    [
        {"status": "gone"},
        {"verification": "passed"},
        {"has_unknown_side_effects": "maybe"},
        {"limit": 0},
        {"limit": 501},
        {"offset": -1},
        {"offset": 2**64},
    ],
)
def test_list_rejects_bad_filters(agent, params):
    response = agent.get("/api/v1/threads/", params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_list_pages(agent, workspace):
    for i in range(7):
        factories.make_thread(workspace, external_id=f"t-{i}")
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = agent.get("/api/v1/threads/", {"limit": 3, "offset": offset}).json()
        assert page["count"] == 7
        seen += [t["external_id"] for t in page["results"]]
        offset = page["next_offset"]
    assert sorted(seen) == sorted(f"t-{i}" for i in range(7))
    assert len(seen) == 7


def test_list_query_count_does_not_grow_with_the_page(agent, workspace, population):
    agent.get("/api/v1/threads/")  # the key's first use records last_used_at
    counts = []
    for extra in range(2):
        for i in range(10):
            factories.make_thread(workspace, external_id=f"more-{extra}-{i}")
        with CaptureQueriesContext(connection) as queries:
            assert agent.get("/api/v1/threads/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 3


def test_task_status(agent, workspace, thread):
    run = task_run_start(workspace=workspace, thread=thread, kind="fold", send=lambda _id: None)
    body = agent.get(f"/api/v1/tasks/{run.id}/").json()
    assert body == {
        **body,
        "task_id": run.id,
        "state": "PENDING",
        "progress": {"done": 0, "total": 0},
        "result": None,
        "kind": "fold",
        "thread": str(thread.id),
    }
    task_run_progress(run.id, done=3, total=10)
    body = agent.get(f"/api/v1/tasks/{run.id}/").json()
    assert (body["state"], body["progress"]) == (TaskState.PROGRESS, {"done": 3, "total": 10})
    task_run_finish(run.id, result={"version": 2})
    body = agent.get(f"/api/v1/tasks/{run.id}/").json()
    assert (body["state"], body["result"]) == ("SUCCESS", {"version": 2})
    missing = agent.get("/api/v1/tasks/no-such-task/")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_thread_create_service_reraises_a_constraint_violation(workspace):
    # Only a lost race on external_id returns the winner; bad settings are the caller's bug.
    with pytest.raises(IntegrityError):
        thread_get_or_create(
            workspace=workspace, external_id="bad", high_watermark=0.4, low_watermark=0.6
        )
    assert not Thread.objects.filter(external_id="bad").exists()


def test_create_refuses_the_llm_summarizer_without_an_llm_endpoint(agent, settings):
    settings.CTXADMIN_LLM_BASE_URL = ""
    response = post_json(agent, "/api/v1/threads/", {"external_id": "x", "summarizer": "llm"})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "no LLM endpoint configured" in error["fields"]["summarizer"]
    assert not Thread.objects.exists()


def test_create_takes_the_llm_summarizer_with_an_llm_endpoint(agent, settings):
    settings.CTXADMIN_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    response = post_json(agent, "/api/v1/threads/", {"external_id": "x", "summarizer": "llm"})
    assert response.status_code == 201, response.content
    assert response.json()["summarizer"] == "llm"


def test_posting_an_existing_llm_thread_still_answers_it_unchanged(agent, workspace, settings):
    # Created while an endpoint was configured: a replay of its create is not a new setting.
    settings.CTXADMIN_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    factories.make_thread(workspace, external_id="x", summarizer="llm")
    settings.CTXADMIN_LLM_BASE_URL = ""
    response = post_json(agent, "/api/v1/threads/", {"external_id": "x", "summarizer": "llm"})
    assert response.status_code == 200, response.content


def test_the_service_refuses_the_llm_summarizer_without_an_llm_endpoint(workspace, settings):
    settings.CTXADMIN_LLM_BASE_URL = ""
    with pytest.raises(InvalidEvent) as refused:
        thread_get_or_create(workspace=workspace, external_id="x", summarizer="llm")
    assert "summarizer" in refused.value.fields
