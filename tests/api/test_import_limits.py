"""Imports that cannot run away (docs/api.md, "Imports — `/api/v1/imports/`"): agent keys import
only where the workspace allows it, per-import limits refuse with the limit named, the answer shows
progress while the import runs, and an admin's cancel stops it between two conversations.

Tasks run eagerly after the request's commit (with the real worker:
tests/worker/test_import_fairness.py).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from rest_framework.test import APIClient

from ctxadmin.celery import app as celery_app
from integrations.trace_imports.models import ImportState, TraceImport
from integrations.trace_imports.services import uploads
from tests import factories
from threads.models import AuditEntry, Event, Thread

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

URL = "/api/v1/imports/"


@pytest.fixture(autouse=True)
def eager() -> Iterator[None]:
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def chats(count: int, *, messages: int = 1, tag: str = "c") -> bytes:
    return json.dumps(
        [
            {
                "id": f"{tag}-{n}",
                "messages": [{"role": "user", "content": f"m{k}"} for k in range(messages)],
            }
            for n in range(count)
        ]
    ).encode()


def csrf(client: APIClient | Client) -> dict[str, Any]:
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    return {"HTTP_X_CSRFTOKEN": token}


def upload(client: APIClient, content: bytes, capture: Any, **extra: Any) -> Any:
    with capture(execute=True):
        return client.post(
            URL,
            {"file": SimpleUploadedFile("chats.json", content), "format": "openai-chat"},
            format="multipart",
            **extra,
        )


def allow_agents(workspace: Any) -> None:
    workspace.agents_may_import = True
    workspace.save(update_fields=["agents_may_import"])


# --- Who may import ---------------------------------------------------------------------------


def test_an_agent_imports_only_once_an_admin_allows_it(
    agent: APIClient, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    refused = upload(agent, chats(2), django_capture_on_commit_callbacks)
    assert refused.status_code == 403, refused.content
    error = refused.json()["error"]
    assert error["code"] == "permission_denied" and "may not import" in error["message"]
    assert not TraceImport.objects.exists() and not Thread.objects.exists()

    # An admin turns it on from the Imports page; audited.
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(factories.make_person(workspace, "boss", "admin"))
    operator = Client(enforce_csrf_checks=True)
    operator.force_login(factories.make_person(workspace, "op", "operator"))
    denied = operator.post(
        "/imports/agents/", {"workspace": workspace.pk, "allowed": "1"}, **csrf(operator)
    )
    assert denied.status_code == 403
    page = admin.get("/imports/").content.decode()
    assert "may not import" in page and "Allow agent uploads" in page
    answer = admin.post(
        "/imports/agents/", {"workspace": workspace.pk, "allowed": "1"}, **csrf(admin)
    )
    assert answer.status_code == 302
    assert AuditEntry.objects.get(action="workspace.agents_may_import").after == {
        "agents_may_import": True
    }
    accepted = upload(agent, chats(2), django_capture_on_commit_callbacks)
    assert accepted.status_code == 202, accepted.content
    assert Thread.objects.count() == 2


def test_a_person_with_the_admin_role_imports_whatever_the_setting(
    admin_client_ws: APIClient, workspace: Any, django_capture_on_commit_callbacks: Any
) -> None:
    assert workspace.agents_may_import is False
    answer = upload(
        admin_client_ws, chats(2), django_capture_on_commit_callbacks, **csrf(admin_client_ws)
    )
    assert answer.status_code == 202, answer.content
    assert Thread.objects.count() == 2


# --- Limits -----------------------------------------------------------------------------------


def test_a_file_over_the_conversations_limit_imports_nothing(
    agent: APIClient, workspace: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    allow_agents(workspace)
    settings.CTXADMIN_MAX_IMPORT_CONVERSATIONS = 3
    answer = upload(agent, chats(4), django_capture_on_commit_callbacks)
    assert answer.status_code == 202
    report = agent.get(f"{URL}{answer.json()['import_id']}/").json()
    assert report["state"] == "failed"
    assert "CTXADMIN_MAX_IMPORT_CONVERSATIONS" in report["error"]
    assert "4 conversations" in report["error"] and "nothing was imported" in report["error"]
    assert report["report"] == [] and not Thread.objects.exists()
    # At the limit, it imports.
    assert upload(agent, chats(3, tag="ok"), django_capture_on_commit_callbacks).status_code == 202
    assert Thread.objects.count() == 3


def test_the_events_limit_stops_before_the_conversation_that_would_cross_it(
    agent: APIClient, workspace: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    allow_agents(workspace)
    settings.CTXADMIN_MAX_IMPORT_EVENTS = 5
    answer = upload(agent, chats(4, messages=2), django_capture_on_commit_callbacks)
    report = agent.get(f"{URL}{answer.json()['import_id']}/").json()
    assert report["state"] == "failed"
    # 2 + 2 events fit; the third conversation's 2 more would make 6.
    assert "conversation 2:" in report["error"]
    assert "CTXADMIN_MAX_IMPORT_EVENTS" in report["error"]
    assert "stopped after 2 of 4 conversations" in report["error"]
    assert [line["index"] for line in report["report"]] == [0, 1]
    assert report["conversations"] == {"total": 4, "done": 2}
    assert report["events_appended"] == 4 == Event.objects.count()
    # Nothing half-imported: exactly the reported conversations have threads.
    assert sorted(Thread.objects.values_list("external_id", flat=True)) == ["c-0", "c-1"]


def test_unpacked_bytes_over_the_limit(
    agent: APIClient, workspace: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    allow_agents(workspace)
    content = chats(20)
    settings.CTXADMIN_MAX_IMPORT_UNPACKED_BYTES = len(content) - 1
    # Plain JSON: its size is what it unpacks to, known at upload: 413 in the error shape.
    plain = upload(agent, content, django_capture_on_commit_callbacks)
    assert plain.status_code == 413, plain.content
    error = plain.json()["error"]
    assert error["code"] == "payload_too_large"
    assert "CTXADMIN_MAX_IMPORT_UNPACKED_BYTES" in error["message"]
    assert not TraceImport.objects.exists()
    # Gzipped: known only once unpacked, so the import fails naming the limit.
    packed = upload(agent, gzip.compress(content), django_capture_on_commit_callbacks)
    assert packed.status_code == 202
    report = agent.get(f"{URL}{packed.json()['import_id']}/").json()
    assert report["state"] == "failed"
    assert "CTXADMIN_MAX_IMPORT_UNPACKED_BYTES" in report["error"]
    assert not Thread.objects.exists()


# --- Progress and cancel ----------------------------------------------------------------------


def test_the_answer_shows_progress_while_the_import_runs(
    agent: APIClient,
    workspace: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    allow_agents(workspace)
    monkeypatch.setattr(uploads, "REPORT_INTERVAL", 0)
    seen: list[tuple[str, dict[str, int], int]] = []
    real = uploads.conversations_import

    def watched(**kwargs: Any) -> Any:
        import_id = str(TraceImport.objects.get().pk)

        def progress(done: int, total: int) -> None:
            kwargs["progress"](done, total)
            answer = agent.get(f"{URL}{import_id}/").json()
            seen.append((answer["state"], answer["conversations"], answer["events_appended"]))

        return real(**{**kwargs, "progress": progress})

    monkeypatch.setattr(uploads, "conversations_import", watched)
    upload(agent, chats(3, messages=2), django_capture_on_commit_callbacks)
    assert seen == [
        ("running", {"total": 3, "done": 1}, 2),
        ("running", {"total": 3, "done": 2}, 4),
        ("running", {"total": 3, "done": 3}, 6),
    ]


def test_an_admin_cancels_a_running_import_between_conversations(
    agent: APIClient,
    admin_client_ws: APIClient,
    workspace: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    allow_agents(workspace)
    real = uploads.conversations_import
    token = csrf(admin_client_ws)

    def cancelled_after_two(**kwargs: Any) -> Any:
        import_id = str(TraceImport.objects.get().pk)

        def progress(done: int, total: int) -> None:
            kwargs["progress"](done, total)
            if done == 2:
                # An agent may not cancel; an admin may.
                assert agent.post(f"{URL}{import_id}/cancel/").status_code == 403
                answer = admin_client_ws.post(f"{URL}{import_id}/cancel/", **token)
                assert answer.status_code == 200, answer.content
                assert answer.json()["state"] == "running"
                assert answer.json()["cancelled_by"] == "admin-user"

        return real(**{**kwargs, "progress": progress})

    monkeypatch.setattr(uploads, "conversations_import", cancelled_after_two)
    answer = upload(agent, chats(5), django_capture_on_commit_callbacks)
    report = agent.get(f"{URL}{answer.json()['import_id']}/").json()
    assert report["state"] == "cancelled"
    assert report["error"].startswith("cancelled by admin-user; stopped after 2 of 5")
    assert [line["index"] for line in report["report"]] == [0, 1]
    assert sorted(Thread.objects.values_list("external_id", flat=True)) == ["c-0", "c-1"]
    entry = AuditEntry.objects.get(action="import.cancel")
    assert entry.actor_label == "admin-user" and entry.before == {"state": "running"}
    # Once ended, there is nothing to cancel.
    again = admin_client_ws.post(f"{URL}{report['id']}/cancel/", **token)
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"


def test_a_pending_import_cancelled_never_runs(
    agent: APIClient, admin_client_ws: APIClient, workspace: Any, operator_client: APIClient
) -> None:
    allow_agents(workspace)
    # Not run: no commit callbacks executed, as when no worker has taken it yet.
    answer = agent.post(
        URL,
        {"file": SimpleUploadedFile("chats.json", chats(3)), "format": "openai-chat"},
        format="multipart",
    )
    import_id = answer.json()["import_id"]
    refused = operator_client.post(f"{URL}{import_id}/cancel/", **csrf(operator_client))
    assert refused.status_code == 403
    cancelled = admin_client_ws.post(f"{URL}{import_id}/cancel/", **csrf(admin_client_ws))
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    # The worker takes the task later: it imports nothing.
    ran = uploads.import_run(import_id=import_id)
    assert ran["state"] == ImportState.CANCELLED and "before it started" in ran["error"]
    assert not Thread.objects.exists()


def test_the_imports_page_shows_events_and_a_cancel_button(
    agent: APIClient, workspace: Any
) -> None:
    allow_agents(workspace)
    answer = agent.post(
        URL,
        {"file": SimpleUploadedFile("chats.json", chats(3)), "format": "openai-chat"},
        format="multipart",
    )
    import_id = answer.json()["import_id"]
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(factories.make_person(workspace, "boss", "admin"))
    listing = admin.get("/imports/").content.decode()
    assert f'action="/imports/{import_id}/cancel/"' in listing and ">Events<" in listing
    detail = admin.get(f"/imports/{import_id}/").content.decode()
    assert "Cancel import" in detail and 'id="import-progress"' in detail
    done = admin.post(f"/imports/{import_id}/cancel/", **csrf(admin))
    assert done.status_code == 302
    detail = admin.get(f"/imports/{import_id}/").content.decode()
    assert "Cancel import" not in detail and "before it started" in detail
    assert TraceImport.objects.get().state == ImportState.CANCELLED
    other_id = agent.post(
        URL,
        {"file": SimpleUploadedFile("more.json", chats(3)), "format": "openai-chat"},
        format="multipart",
    ).json()["import_id"]
    # The progress line polls itself and shows the import's figures as they move.
    TraceImport.objects.filter(pk=other_id).update(
        state=ImportState.RUNNING,
        conversations_total=3,
        conversations_done=1,
        created_count=1,
        events_appended=7,
    )
    part = admin.get(f"/imports/{other_id}/?part=progress", HTTP_HX_REQUEST="true")
    text = part.content.decode()
    assert text.lstrip().startswith('<p class="small muted" id="import-progress"')
    assert "1 of 3 conversations · 7 events appended" in text and "every 2s" in text
