"""Imports over the API (docs/api.md, "Imports — `/api/v1/imports/`"): an upload answers 202 with a
task, its import reports every conversation (created, updated, skipped, refused with its position),
a second upload of the same file creates nothing, and access follows docs/api.md, "Auth and errors".

The SQLite run executes the task eagerly, after the request's commit; the PostgreSQL run of
./scripts/test also sends the 200-conversation file through a real Celery worker.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware.csrf import _get_new_csrf_string
from django.urls import path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from ctxadmin.celery import app as celery_app
from integrations.trace_imports import api as imports
from integrations.trace_imports.models import TraceImport
from integrations.trace_imports.services.uploads import UPLOAD_FORM_OVERHEAD
from tests import factories
from tests.runtime.conftest import real_worker, wait_for_task  # noqa: F401 (a fixture)
from threads.api import tasks
from threads.models import AuditEntry, Event, TaskState, Thread

pytestmark = pytest.mark.django_db

TAU_BENCH = Path(__file__).resolve().parent.parent / "data" / "tau-bench-gpt-4o-airline.json.gz"
URL = "/api/v1/imports/"


def chat(id: str, *texts: str) -> dict[str, Any]:
    roles = ("user", "assistant")
    return {
        "id": id,
        "messages": [{"role": roles[n % 2], "content": t} for n, t in enumerate(texts)],
    }


TWO_CHATS = json.dumps([chat("chat-1", "hi", "hello"), chat("chat-2", "a", "b", "c")]).encode()


@pytest.fixture(autouse=True)
def agents_may_import(workspace: Any) -> None:
    """These tests upload as the workspace's agent: the workspace allows it (off by default,
    tests/api/test_import_limits.py)."""
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])


@pytest.fixture
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def upload(
    client: APIClient,
    content: bytes,
    *,
    fmt: str = "openai-chat",
    name: str = "chats.json",
    **fields: Any,
) -> Any:
    body = {"file": SimpleUploadedFile(name, content), "format": fmt, **fields}
    return client.post(URL, body, format="multipart")


def imported(client: APIClient, content: bytes, capture: Any, **kw: Any) -> dict[str, Any]:
    """Upload, let the task run (eagerly, after commit), and answer the import's report."""
    with capture(execute=True):
        answer = upload(client, content, **kw)
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert set(body) >= {"task_id", "import_id"}
    report = client.get(f"{URL}{body['import_id']}/")
    assert report.status_code == 200, report.content
    return {**report.json(), "_post": body}


@pytest.mark.usefixtures("eager")
def test_an_upload_answers_202_and_reports_every_conversation(
    agent: APIClient, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    report = imported(agent, TWO_CHATS, django_capture_on_commit_callbacks)
    assert report["state"] == "succeeded" and report["task_state"] == "SUCCESS"
    assert report["format"] == "openai-chat" and report["file_name"] == "chats.json"
    assert report["size"] == len(TWO_CHATS) and report["created_by"] == "api key default"
    assert report["conversations"] == {"total": 2, "done": 2}
    assert report["counts"] == {"created": 2, "updated": 0, "skipped": 0, "refused": 0}
    assert report["events_appended"] == 5
    threads = {t.external_id: str(t.pk) for t in Thread.objects.filter(workspace=workspace)}
    assert report["report"] == [
        {
            "index": 0,
            "external_id": "chat-1",
            "thread": threads["chat-1"],
            "outcome": "created",
            "events": 2,
            "appended": 2,
            "reason": "",
        },
        {
            "index": 1,
            "external_id": "chat-2",
            "thread": threads["chat-2"],
            "outcome": "created",
            "events": 3,
            "appended": 3,
            "reason": "",
        },
    ]
    # The task endpoint is the progress bar's source: conversations done / total.
    task = agent.get(f"/api/v1/tasks/{report['_post']['task_id']}/").json()
    assert task["kind"] == "import" and task["state"] == "SUCCESS"
    assert task["progress"] == {"done": 2, "total": 2}
    assert task["result"]["created"] == 2
    started = AuditEntry.objects.get(action="import.start")
    after: Any = started.after
    assert started.actor_label == "api key default" and after["format"] == "openai-chat"
    assert (after["file_name"], after["size"]) == ("chats.json", len(TWO_CHATS))
    finished: Any = AuditEntry.objects.get(action="import.finish").after
    assert (finished["created"], finished["events_appended"]) == (2, 5)


@pytest.mark.usefixtures("eager")
def test_items_left_out_of_a_conversation_are_named_in_its_report_line(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    """A conversation imports what it can; what the converter left out (an orphan tool
    result, an unknown role) is named in its line's reason, never dropped unsaid."""
    orphan = {"role": "tool", "tool_call_id": "zz", "content": "42"}
    wizard = {"role": "wizard", "content": "abracadabra"}
    content = json.dumps(
        [
            {"id": "partly", "messages": [{"role": "user", "content": "hi"}, orphan, wizard]},
            chat("whole", "hi", "hello"),
        ]
    ).encode()
    report = imported(agent, content, django_capture_on_commit_callbacks)
    first, second = report["report"]
    assert (first["outcome"], first["events"], first["appended"]) == ("created", 1, 1)
    assert first["reason"].startswith("2 items were not imported: item 1: ")
    assert "'zz'" in first["reason"] and "unknown role 'wizard'" in first["reason"]
    assert second["reason"] == ""


@pytest.mark.usefixtures("eager", "no_fold_triggers")
def test_the_tau_bench_file_twice_creates_200_then_skips_200(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    content = TAU_BENCH.read_bytes()  # gzipped: recognised by its content
    started = time.monotonic()
    first = imported(agent, content, django_capture_on_commit_callbacks, name="tau.json.gz")
    took = time.monotonic() - started
    assert first["counts"] == {"created": 200, "updated": 0, "skipped": 0, "refused": 0}
    assert len(first["report"]) == 200 and first["events_appended"] == Event.objects.count()
    events = Event.objects.count()
    started = time.monotonic()
    second = imported(agent, content, django_capture_on_commit_callbacks, name="tau.json.gz")
    print(f"200 conversations: first import {took:.1f} s, again {time.monotonic() - started:.1f} s")
    assert second["counts"] == {"created": 0, "updated": 0, "skipped": 200, "refused": 0}
    assert second["events_appended"] == 0 and Event.objects.count() == events
    assert [line["thread"] for line in second["report"]] == [
        line["thread"] for line in first["report"]
    ]
    assert Thread.objects.count() == 200


@pytest.mark.usefixtures("eager")
def test_a_bad_conversation_is_refused_with_its_position_and_the_others_import(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    content = json.dumps(
        [
            chat("ok-1", "hi", "hello"),
            {"id": "broken", "no": "messages"},
            chat("ok-2", "a", "b"),
            {
                "id": "bad-event",
                "messages": [{"role": "user", "content": "x"}, {"role": "user", "content": 5}],
            },
            chat("ok-3", "c"),
        ]
    ).encode()
    report = imported(agent, content, django_capture_on_commit_callbacks)
    assert report["state"] == "succeeded"
    assert report["counts"] == {"created": 3, "updated": 0, "skipped": 0, "refused": 2}
    outcomes = [(line["index"], line["outcome"]) for line in report["report"]]
    assert outcomes == [
        (0, "created"),
        (1, "refused"),
        (2, "created"),
        (3, "refused"),
        (4, "created"),
    ]
    refused = report["report"][1]
    assert refused["external_id"] == "broken" and refused["thread"] is None
    assert "conversation 1" in refused["reason"] and "no `messages`" in refused["reason"]
    bad_event = report["report"][3]
    assert bad_event["external_id"] == "bad-event" and bad_event["appended"] == 0
    assert "event 1: invalid message event" in bad_event["reason"]
    assert "content" in bad_event["reason"]
    # A refused conversation leaves no thread behind.
    assert set(Thread.objects.values_list("external_id", flat=True)) == {"ok-1", "ok-2", "ok-3"}


@pytest.mark.usefixtures("eager")
def test_a_conversation_that_grew_is_updated(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    imported(
        agent,
        json.dumps([chat("grow", "hi", "hello")]).encode(),
        django_capture_on_commit_callbacks,
    )
    longer = json.dumps([chat("grow", "hi", "hello", "more", "ok")]).encode()
    report = imported(agent, longer, django_capture_on_commit_callbacks)
    assert report["counts"] == {"created": 0, "updated": 1, "skipped": 0, "refused": 0}
    assert (report["report"][0]["events"], report["report"][0]["appended"]) == (4, 2)


@pytest.mark.usefixtures("eager")
def test_a_file_that_cannot_be_read_fails_the_import_with_the_reason(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    report = imported(agent, b"[{not json\n", django_capture_on_commit_callbacks)
    assert report["state"] == "failed" and report["task_state"] == "FAILURE"
    assert "cannot be read" in report["error"] and "line 1 is not JSON" in report["error"]
    assert report["conversations"] == {"total": 0, "done": 0} and report["report"] == []
    task = agent.get(f"/api/v1/tasks/{report['_post']['task_id']}/").json()
    assert task["state"] == "FAILURE" and "cannot be read" in task["result"]["error"]
    bomb = gzip.compress(b" " * 2000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("django.conf.settings.CTXADMIN_MAX_IMPORT_UNPACKED_BYTES", 1000)
        unpacked = imported(agent, bomb, django_capture_on_commit_callbacks)
    assert unpacked["state"] == "failed" and "unpacks to more than 1000" in unpacked["error"]


def test_an_unknown_format_or_a_missing_file_is_400(agent: APIClient) -> None:
    for fmt in ("xml", "langgraph-postgres"):
        answer = upload(agent, TWO_CHATS, fmt=fmt)
        assert answer.status_code == 400, fmt
        assert answer.json()["error"]["code"] == "validation_error"
        assert "format" in answer.json()["error"]["fields"]
    missing = agent.post(URL, {"format": "openai-chat"}, format="multipart")
    assert missing.status_code == 400 and "file" in missing.json()["error"]["fields"]
    json_body = agent.post(URL, {"format": "openai-chat"}, format="json")
    assert json_body.status_code == 415
    assert not TraceImport.objects.exists()


def test_a_file_over_the_limit_is_413(agent: APIClient, settings: Any) -> None:
    settings.CTXADMIN_MAX_IMPORT_BYTES = 100
    answer = upload(agent, b" " * 101)
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == "payload_too_large" and error["fields"]["limit"] == 100
    huge = upload(agent, b" " * (100 + UPLOAD_FORM_OVERHEAD + 1))  # refused by its length
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "payload_too_large"
    assert upload(agent, b"[]").status_code == 202
    assert TraceImport.objects.count() == 1


@pytest.mark.usefixtures("eager")
def test_another_workspace_gets_404(
    agent: APIClient, other_agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    report = imported(agent, TWO_CHATS, django_capture_on_commit_callbacks)
    url = f"{URL}{report['id']}/"
    assert other_agent.get(url).status_code == 404
    assert other_agent.get(url).json()["error"]["code"] == "not_found"
    stranger = factories.make_person(factories.make_workspace("initech")[0], "eve", "admin")
    person = APIClient()
    person.force_login(stranger)
    assert person.get(url).status_code == 404
    assert agent.get(f"{URL}not-a-uuid/").status_code == 404
    assert APIClient().get(url).status_code == 401


def _with_csrf(client: APIClient) -> dict[str, Any]:
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    return {"HTTP_X_CSRFTOKEN": token}


@pytest.mark.usefixtures("eager")
def test_people_need_the_admin_role_and_csrf(
    operator_client: APIClient,
    admin_client_ws: APIClient,
    workspace: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    refused = operator_client.post(
        URL,
        {"file": SimpleUploadedFile("a.json", TWO_CHATS), "format": "openai-chat"},
        format="multipart",
        **_with_csrf(operator_client),
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    no_csrf = admin_client_ws.post(
        URL, {"file": SimpleUploadedFile("a.json", TWO_CHATS), "format": "openai-chat"}
    )
    assert no_csrf.status_code == 403
    assert not TraceImport.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin_client_ws.post(
            URL,
            {"file": SimpleUploadedFile("a.json", TWO_CHATS), "format": "openai-chat"},
            format="multipart",
            **_with_csrf(admin_client_ws),
        )
    assert answer.status_code == 202, answer.content
    row = TraceImport.objects.get()
    assert (row.workspace, row.actor_label, row.created_count) == (workspace, "admin-user", 2)
    # An operator of the workspace reads the report; only importing needs the admin role.
    assert operator_client.get(f"{URL}{row.pk}/").status_code == 200
    actor: Any = AuditEntry.objects.get(action="import.start").actor
    assert actor.username == "admin-user"


def test_a_person_admin_of_several_workspaces_names_one(workspace: Any) -> None:
    other, _ = factories.make_workspace("globex")
    person = factories.make_person(workspace, "ada", "admin")
    factories.make_person(other, "ada", "operator")
    person.refresh_from_db()
    client = APIClient()
    client.force_login(person)
    body = {"file": SimpleUploadedFile("a.json", TWO_CHATS), "format": "openai-chat"}
    # Admin of one workspace: it is the one.
    assert client.post(URL, body, format="multipart").status_code == 202
    person = factories.make_person(other, "ada", "admin")
    client.force_login(person)  # setting the password again ended the session
    body["file"] = SimpleUploadedFile("a.json", TWO_CHATS)
    several = client.post(URL, body, format="multipart")
    assert several.status_code == 400 and "workspace" in several.json()["error"]["fields"]
    body["file"] = SimpleUploadedFile("a.json", TWO_CHATS)
    named = client.post(URL, {**body, "workspace": "globex"}, format="multipart")
    assert named.status_code == 202
    assert TraceImport.objects.get(pk=named.json()["import_id"]).workspace == other
    body["file"] = SimpleUploadedFile("a.json", TWO_CHATS)
    unknown = client.post(URL, {**body, "workspace": "initech"}, format="multipart")
    assert unknown.status_code == 404


@pytest.mark.usefixtures("eager")
def test_side_effect_tools_are_passed_to_the_import(
    agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    conversation = {
        "id": "refund",
        "messages": [
            {"role": "user", "content": "refund me"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "refund", "arguments": '{"amount": 5}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
    }
    content = json.dumps([conversation]).encode()
    report = imported(
        agent, content, django_capture_on_commit_callbacks, side_effect_tools="refund, other"
    )
    assert report["side_effect_tools"] == ["other", "refund"]
    call = Event.objects.get(kind="tool_call")
    assert call.data["side_effect"] is True and call.data["idempotency_key"] == "refund:c1"


ROUTES = [
    path("api/v1/imports/", imports.ImportCreateApi.as_view()),
    path("api/v1/imports/<str:id>/", imports.ImportDetailApi.as_view()),
    path("api/v1/tasks/<str:task_id>/", tasks.TaskDetailApi.as_view()),
]


def test_the_schema_of_the_imports_routes_has_no_warnings() -> None:
    GENERATOR_STATS.reset()
    schema = SchemaGenerator(patterns=ROUTES).get_schema(request=None, public=True)
    assert not GENERATOR_STATS._warn_cache, dict(GENERATOR_STATS._warn_cache)
    assert not GENERATOR_STATS._error_cache, dict(GENERATOR_STATS._error_cache)
    create = schema["paths"]["/api/v1/imports/"]["post"]
    assert {"202", "400", "403", "413"} <= set(create["responses"])
    form = create["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][form.rsplit("/", 1)[1]]["properties"]
    assert {"file", "format", "side_effect_tools"} <= set(fields)
    detail = schema["paths"]["/api/v1/imports/{id}/"]["get"]["responses"]["200"]
    name = detail["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert {"state", "counts", "conversations", "report"} <= set(
        schema["components"]["schemas"][name]["properties"]
    )


@pytest.mark.postgres
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("real_worker")
def test_the_tau_bench_file_through_the_real_worker(agent: APIClient) -> None:
    """Production's shape: the request only stores and enqueues; a Celery worker (another
    process, reading the upload from the database) imports, and the task run counts
    conversations. No side-effect tools, so the worker is not kept busy folding after."""
    content = TAU_BENCH.read_bytes()
    timings = []
    for expected in ({"created": 200, "skipped": 0}, {"created": 0, "skipped": 200}):
        started = time.monotonic()
        answer = upload(agent, content, name="tau.json.gz", side_effect_tools="none")
        answered = time.monotonic() - started
        assert answer.status_code == 202, answer.content
        body = answer.json()
        seen = set()
        while (task := agent.get(f"/api/v1/tasks/{body['task_id']}/").json())["state"] not in (
            "SUCCESS",
            "FAILURE",
        ):
            seen.add(task["progress"]["done"])
            assert time.monotonic() - started < 120, task
            time.sleep(0.05)
        run = wait_for_task(body["task_id"])
        assert run.state == TaskState.SUCCESS, run.result
        assert (run.done, run.total) == (200, 200)
        report = agent.get(f"{URL}{body['import_id']}/").json()
        counts = report["counts"]
        assert {k: counts[k] for k in expected} == expected, counts
        assert counts["refused"] == 0 and len(report["report"]) == 200
        # The request did not wait for the import: the task run moved through the middle.
        assert any(0 < done < 200 for done in seen), sorted(seen)
        timings.append((answered, time.monotonic() - started, len(seen)))
    print(
        "through the worker: "
        + "; ".join(
            f"202 in {a:.2f} s, done in {d:.1f} s, {n} progress values" for a, d, n in timings
        )
    )
