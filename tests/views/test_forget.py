"""The Forget page (docs/dashboard.md, "The Forget page"; docs/repairs.md, "Erasure by subject";
docs/operations.md, "Retention"): an admin previews an erasure (the report, nothing changed),
runs it (the value gone from the events, the report counting them, audited once without the
value), and sets and dry-runs the retention policy; operators and reviewers get the 403 every
admin page gives, and a form without a reason is refused under its field."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.api.test_summaries import eager
from tests.views.conftest import login
from threads.models import AuditEntry, Event, Redaction, TaskRun, Thread, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers", "eager")]
__all__ = ["eager"]

EMAIL = "ada.customer@example.com"


def _mentioned_twice(workspace: Workspace) -> tuple[Thread, Thread]:
    first = f.make_thread(workspace, external_id="support-1")
    f.append(
        first,
        f.user(f"Please send the receipt to {EMAIL}"),
        f.assistant("Sent."),
    )
    second = f.make_thread(workspace, external_id="support-2")
    f.append(second, f.user("Hello"), f.user(f"my address was {EMAIL.upper()}"))
    return first, second


def _mentioning(value: str) -> list[tuple[str, int]]:
    return sorted(
        (e.thread.external_id, e.seq)
        for e in Event.objects.select_related("thread")
        if value.lower() in str(e.data).lower()
    )


def _erase(client: Client, capture: Any, action: str, reason: str = "GDPR erasure") -> Any:
    """Post the form as htmx does; the task it queues runs once the request commits."""
    with capture(execute=True):
        answer = client.post(
            "/forget/erase/",
            {"value": EMAIL, "reason": reason, "action": action},
            headers={"hx-request": "true"},
        )
    return answer


def _dry_run(client: Client, capture: Any) -> Any:
    """Ask for the retention dry run as htmx does; its task runs once the request commits."""
    with capture(execute=True):
        return client.post("/forget/retention/dry-run/", headers={"hx-request": "true"})


def _dry_run_report(client: Client) -> str:
    run = TaskRun.objects.filter(kind="retention_preview").latest("created_at")
    page = client.get(f"/forget/retention/dry-runs/{run.pk}/", headers={"hx-request": "true"})
    assert page.status_code == 200
    return page.content.decode()


def _report(client: Client) -> str:
    run = TaskRun.objects.filter(kind="subject_erasure").latest("created_at")
    page = client.get(f"/forget/erasures/{run.pk}/", headers={"hx-request": "true"})
    assert page.status_code == 200
    return page.content.decode()


def test_an_admin_previews_then_erases_a_value(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    first, second = _mentioned_twice(workspace)
    mentioned = [("support-1", 1), ("support-2", 2)]
    assert _mentioning(EMAIL) == mentioned

    answer = _erase(admin, django_capture_on_commit_callbacks, "preview")
    assert answer.status_code == 200
    assert answer["Cache-Control"] == "no-store"
    assert 'id="task-' in answer.content.decode()  # the task's progress region
    preview = _report(admin)
    assert "Preview: what the erasure would touch" in preview
    assert f"/threads/{first.pk}/" in preview and f"/threads/{second.pk}/" in preview
    assert ">support-1<" in preview and ">support-2<" in preview
    assert EMAIL not in preview.lower()
    assert _mentioning(EMAIL) == mentioned  # a preview changes nothing
    assert not Redaction.objects.exists()
    assert not AuditEntry.objects.filter(action="subject_erased").exists()

    _erase(admin, django_capture_on_commit_callbacks, "erase")
    report = _report(admin)
    assert "Erased" in report
    assert "2 threads" in report and "2 events" in report
    assert _mentioning(EMAIL) == []
    assert sorted((r.thread.external_id, r.seq) for r in Redaction.objects.all()) == mentioned
    [entry] = AuditEntry.objects.filter(action="subject_erased")
    assert entry.after is not None and (entry.after["threads"], entry.after["events"]) == (2, 2)
    assert entry.after["reason"] == "GDPR erasure"
    assert EMAIL not in str(entry.after).lower()


def test_a_plain_form_post_is_sent_to_the_report(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    _mentioned_twice(workspace)
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin.post(
            "/forget/erase/", {"value": EMAIL, "reason": "GDPR", "action": "preview"}
        )
    assert answer.status_code == 302
    run = TaskRun.objects.get(kind="subject_erasure")
    assert answer["Location"] == f"/forget/erasures/{run.pk}/"  # the run, not the value
    page = admin.get(answer["Location"]).content.decode()
    assert ">support-1<" in page and EMAIL not in page.lower()


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_other_roles_get_what_other_admin_pages_give(
    workspace: Workspace, role: str, django_capture_on_commit_callbacks: Any
) -> None:
    _mentioned_twice(workspace)
    client = login(workspace, role)
    assert client.get("/keys/").status_code == 403
    assert client.get("/forget/").status_code == 403
    assert _erase(client, django_capture_on_commit_callbacks, "erase").status_code == 403
    answer = client.post("/forget/retention/", {"retention_days": "1", "keep_checkpoints": "1"})
    assert answer.status_code == 403
    assert _dry_run(client, django_capture_on_commit_callbacks).status_code == 403
    assert not TaskRun.objects.filter(kind="retention_preview").exists()
    assert _mentioning(EMAIL) == [("support-1", 1), ("support-2", 2)]
    assert not TaskRun.objects.filter(kind="subject_erasure").exists()
    workspace.refresh_from_db()
    assert (workspace.retention_days, workspace.keep_checkpoints) == (None, None)
    assert "/forget/" not in client.get("/threads/").content.decode()


def test_an_empty_reason_is_refused_under_its_field(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    _mentioned_twice(workspace)
    answer = _erase(admin, django_capture_on_commit_callbacks, "erase", reason="   ")
    assert answer.status_code == 400
    page = answer.content.decode()
    assert 'id="erase-reason-error"' in page and "This field is required." in page
    assert not TaskRun.objects.filter(kind="subject_erasure").exists()
    assert not Redaction.objects.exists()
    assert _mentioning(EMAIL) == [("support-1", 1), ("support-2", 2)]


def test_a_value_with_nothing_to_search_for_is_refused_under_its_field(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin.post(
            "/forget/erase/",
            {"value": "@@@", "reason": "GDPR", "action": "preview"},
            headers={"hx-request": "true"},
        )
    assert answer.status_code == 400
    assert 'id="erase-value-error"' in answer.content.decode()
    assert not TaskRun.objects.filter(kind="subject_erasure").exists()


def test_another_tasks_report_is_not_an_erasure(admin: Client, workspace: Workspace) -> None:
    thread = f.make_thread(workspace)
    fold = TaskRun.objects.create(id="fold-1", workspace=workspace, thread=thread, kind="fold")
    assert admin.get(f"/forget/erasures/{fold.pk}/").status_code == 404
    assert admin.get(f"/forget/retention/dry-runs/{fold.pk}/").status_code == 404


def test_another_workspaces_dry_run_is_not_shown(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    other, _ = f.make_workspace("other")
    run = TaskRun.objects.create(id="dry-1", workspace=other, kind="retention_preview")
    assert admin.get(f"/forget/retention/dry-runs/{run.pk}/").status_code == 404


def test_the_retention_policy_is_set_and_dry_run(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    page = admin.get("/forget/").content.decode()
    assert page.count("<dd>off</dd>") == 2
    started = _dry_run(admin, django_capture_on_commit_callbacks)
    assert started.status_code == 200 and 'id="task-' in started.content.decode()
    # The region shows the task's progress and reloads itself from the run's report when the
    # progress announces the end.
    run = TaskRun.objects.get(kind="retention_preview")
    assert f'hx-get="/forget/retention/dry-runs/{run.pk}/"' in started.content.decode()
    assert 'hx-trigger="task-finished from:body"' in started.content.decode()
    assert "the workspace has no retention policy" in _dry_run_report(admin)

    idle = f.make_thread(workspace, external_id="idle-1")
    f.append(idle, f.user("hello"))
    busy = f.make_thread(workspace, external_id="busy-1")
    f.append(busy, f.user("hello"))
    f.age(idle, 40)

    answer = admin.post(
        "/forget/retention/",
        {"retention_days": "30", "keep_checkpoints": "5"},
        headers={"hx-request": "true"},
    )
    assert answer.status_code == 200 and "Retention policy saved." in answer.content.decode()
    workspace.refresh_from_db()
    assert (workspace.retention_days, workspace.keep_checkpoints) == (30, 5)
    entry = AuditEntry.objects.get(action="workspace.settings")
    assert entry.actor_label == "admin-person"
    assert entry.after == {"retention_days": 30, "keep_checkpoints": 5}

    assert _dry_run(admin, django_capture_on_commit_callbacks).status_code == 200
    text = _dry_run_report(admin)
    assert ">idle-1<" in text and ">busy-1<" not in text
    assert "1 thread" in text and "freed (estimated)" in text
    assert Thread.objects.filter(pk=idle.pk).exists()
    assert not AuditEntry.objects.filter(action="retention.apply").exists()

    # Emptied: off again.
    admin.post("/forget/retention/", {"retention_days": "", "keep_checkpoints": ""})
    workspace.refresh_from_db()
    assert (workspace.retention_days, workspace.keep_checkpoints) == (None, None)


def test_a_retention_setting_below_one_is_refused(admin: Client, workspace: Workspace) -> None:
    answer = admin.post("/forget/retention/", {"retention_days": "0", "keep_checkpoints": ""})
    assert answer.status_code == 400
    assert 'id="retention-days-error"' in answer.content.decode()
    workspace.refresh_from_db()
    assert workspace.retention_days is None


def test_a_retention_run_leaves_no_dry_run_naming_what_it_deleted(
    admin: Client, workspace: Workspace, django_capture_on_commit_callbacks: Any
) -> None:
    """A deleted thread keeps only its tombstone's digest of its external_id: the dry run that
    listed it goes with the run that deleted it, and nothing else stored names it."""
    from threads.models import ThreadTombstone
    from threads.services.retention import retention_apply

    idle = f.make_thread(workspace, external_id="alice-smith-refund")
    f.append(idle, f.user("hello"))
    f.age(idle, 40)
    admin.post("/forget/retention/", {"retention_days": "30", "keep_checkpoints": ""})
    _dry_run(admin, django_capture_on_commit_callbacks)
    assert ">alice-smith-refund<" in _dry_run_report(admin)

    retention_apply()
    assert not Thread.objects.filter(pk=idle.pk).exists()
    assert ThreadTombstone.objects.count() == 1
    assert not TaskRun.objects.filter(kind="retention_preview").exists()
    stored = [str(run.result) for run in TaskRun.objects.all()]
    stored += [f"{e.target_id} {e.before} {e.after}" for e in AuditEntry.objects.all()]
    assert not any("alice-smith-refund" in text for text in stored)


def test_a_failed_erasure_says_it_failed_not_erased(admin: Client, workspace: Workspace) -> None:
    """A task that failed answers `{"error": ...}`: the page shows the failure, never an
    "Erased" report with nothing in it."""
    run = TaskRun.objects.create(
        id="erasure-1",
        workspace=workspace,
        kind="subject_erasure",
        state="FAILURE",
        result={"error": "OperationalError: the database went away"},
    )
    page = admin.get(f"/forget/erasures/{run.pk}/", headers={"hx-request": "true"})
    text = page.content.decode()
    assert "Failed: OperationalError: the database went away" in text
    assert "Erased" not in text
