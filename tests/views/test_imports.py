"""The Imports page (docs/api.md, "Dashboard URLs" and "Imports — `/api/v1/imports/`"): admins only,
an upload queues the import and shows its progress region, then the per-conversation report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ctxadmin.celery import app as celery_app
from integrations.trace_imports.models import TraceImport
from threads.models import TaskRun, TaskState

pytestmark = pytest.mark.django_db

CHATS = json.dumps(
    [
        {"id": "chat-1", "messages": [{"role": "user", "content": "hi"}]},
        {"id": "chat-2", "no": "messages"},
        {"id": "chat-3", "messages": [{"role": "user", "content": "<b>bold</b>"}]},
    ]
).encode()


@pytest.fixture
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def post_upload(client: Client, workspace: Any, content: bytes = CHATS, **extra: Any) -> Any:
    body = {
        "file": SimpleUploadedFile("chats.json", content),
        "format": "openai-chat",
        "workspace": str(workspace.pk),
    }
    return client.post("/imports/new/", {**body, **extra.pop("data", {})}, **extra)


def test_only_admins_see_the_page_and_the_nav_link(
    admin: Client, operator: Client, reviewer: Client, workspace: Any
) -> None:
    page = admin.get("/imports/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/imports/"' in html and 'name="file"' in html
    assert '<option value="openai-chat">' in html and '<option value="jsonl">' in html
    assert "langgraph-postgres" in html and "disabled" in html  # listed, command-only
    for person in (operator, reviewer):
        assert person.get("/imports/").status_code == 403
        assert 'href="/imports/"' not in person.get("/threads/").content.decode()
        assert post_upload(person, workspace).status_code == 403
    assert not TraceImport.objects.exists()
    assert Client().get("/imports/").status_code == 302  # to the login page


@pytest.mark.usefixtures("eager")
def test_an_upload_redirects_to_its_report(
    admin: Client, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        answer = post_upload(admin, workspace)
    trace_import = TraceImport.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/imports/{trace_import.pk}/"
    page = admin.get(answer["Location"]).content.decode()
    assert "2 created" in page and "1 refused" in page
    assert page.count('class="outcome-created"') == 2 and 'class="outcome-refused"' in page
    assert "no `messages`" in page
    chat_3 = trace_import.report[2]["thread"]
    assert f'href="/threads/{chat_3}/"' in page
    assert "<b>bold</b>" not in page  # a title is text, never markup
    refused_only = admin.get(f"{answer['Location']}?outcome=refused").content.decode()
    assert refused_only.count('class="outcome-') == 1
    listing = admin.get("/imports/").content.decode()
    assert "chats.json" in listing and "succeeded" in listing


@pytest.mark.usefixtures("eager")
def test_an_htmx_upload_answers_the_import_region(
    admin: Client, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        answer = post_upload(admin, workspace, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    region = answer.content.decode()
    trace_import = TraceImport.objects.get()
    assert f'id="import-{trace_import.pk}"' in region and "<html" not in region
    # The task ran after the request's commit; the region's reload shows the report.
    reloaded = admin.get(f"/imports/{trace_import.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in reloaded
    assert "2 created" in reloaded and 'hx-trigger="task-finished' not in reloaded


def test_a_running_import_polls_its_task_and_reloads_when_it_ends(
    admin: Client, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # no worker: it stays pending
        answer = post_upload(admin, workspace, HTTP_HX_REQUEST="true")
    trace_import = TraceImport.objects.get()
    region = answer.content.decode()
    assert f'hx-get="/tasks/{trace_import.task_run_id}/progress/' in region
    assert 'hx-trigger="task-finished from:body"' in region
    progress = admin.get(f"/tasks/{trace_import.task_run_id}/progress/", HTTP_HX_REQUEST="true")
    assert "HX-Trigger" not in progress  # still running: nothing to announce
    TaskRun.objects.filter(pk=trace_import.task_run_id).update(state=TaskState.SUCCESS)
    finished = admin.get(f"/tasks/{trace_import.task_run_id}/progress/", HTTP_HX_REQUEST="true")
    assert json.loads(finished["HX-Trigger"]) == {
        "task-finished": {"task_id": trace_import.task_run_id}
    }


def test_refused_uploads_are_explained(admin: Client, workspace: Any) -> None:
    wrong = post_upload(admin, workspace, data={"format": "langgraph-postgres"})
    assert wrong.status_code == 400 and "must be one of" in wrong.content.decode()
    missing = admin.post("/imports/new/", {"format": "openai-chat", "workspace": workspace.pk})
    assert missing.status_code == 400 and "choose a file" in missing.content.decode()
    assert not TraceImport.objects.exists()


@pytest.mark.usefixtures("eager")
def test_another_workspace_import_is_404_and_an_operator_403(
    admin: Client,
    operator: Client,
    outsider: Client,
    workspace: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        post_upload(admin, workspace)
    url = f"/imports/{TraceImport.objects.get().pk}/"
    assert outsider.get(url).status_code == 404
    assert operator.get(url).status_code == 403
    assert "chats.json" not in outsider.get("/imports/").content.decode()
    # The outsider cannot aim an upload at acme either.
    assert post_upload(outsider, workspace).status_code == 404
    assert TraceImport.objects.count() == 1
    assert admin.get("/imports/not-a-uuid/").status_code == 404


def test_the_list_page_does_not_grow_with_imports(admin: Client, workspace: Any) -> None:
    def add(count: int) -> None:
        for _ in range(count):
            TraceImport.objects.create(
                workspace=workspace, actor_label="x", format="jsonl", size=1, sha256="0"
            )

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin.get("/imports/").status_code == 200
        return len(captured)

    add(2)
    few = queries()
    add(6)
    assert queries() == few


def test_the_upload_address_answers_a_get_with_the_form(admin: Client, operator: Client) -> None:
    """A link to /imports/new/ (or a reload of the form's address) reaches the form, not a 405."""
    answer = admin.get("/imports/new/", follow=True)
    assert answer.status_code == 200
    assert answer.redirect_chain[-1][0].startswith("/imports/")
    assert 'name="file"' in answer.content.decode()
    assert operator.get("/imports/new/", follow=True).status_code == 403


def test_the_form_names_no_benchmark_tools(admin: Client) -> None:
    page = admin.get("/imports/").content.decode()
    assert "reservation" not in page and "send_certificate" not in page


BOOKING = json.dumps(
    [
        {
            "id": "agent-run-1",
            "messages": [
                {"role": "system", "content": "You are a booking agent."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "cancel_reservation", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "t1", "content": "cancelled"},
            ],
        },
        {
            "id": "agent-run-2",
            "messages": [{"role": "user", "content": "  Please   move my flight to Friday  "}],
        },
    ]
).encode()


@pytest.mark.parametrize(("tools", "effects"), [("", 0), ("cancel_reservation", 1)])
def test_an_upload_marks_only_the_tools_it_names_and_titles_every_thread(
    admin: Client,
    workspace: Any,
    eager: None,
    django_capture_on_commit_callbacks: Any,
    tools: str,
    effects: int,
) -> None:
    from threads.models import SideEffect, Thread

    with django_capture_on_commit_callbacks(execute=True):
        post_upload(admin, workspace, BOOKING, data={"side_effect_tools": tools})
    assert SideEffect.objects.filter(thread__workspace=workspace).count() == effects
    titles = dict(Thread.objects.filter(workspace=workspace).values_list("external_id", "title"))
    assert titles == {
        "agent-run-1": "chats.json #1",
        "agent-run-2": "Please move my flight to Friday",
    }
