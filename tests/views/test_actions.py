"""Every dashboard action: who sees its button, who the server lets through (403 otherwise),
404 across workspaces, CSRF, the htmx and plain-form answers, and the audit entry it leaves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.views.conftest import login
from threads import selectors
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    SideEffect,
    SummaryPhase,
    TaskRun,
    Thread,
    ToolStatusCheck,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    from ctxadmin.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def unknown_effect(thread: Thread) -> SideEffect:
    return SideEffect.objects.get(thread=thread, idempotency_key="refund-10086")


def pending(thread: Thread, action: str = "issue_store_credit") -> ApprovalRequest:
    return ApprovalRequest.objects.get(thread=thread, action=action)


def first_checkpoint(thread: Thread) -> Checkpoint:
    checkpoint = Checkpoint.objects.filter(thread=thread).order_by("cursor").first()
    assert checkpoint is not None
    return checkpoint


# --- side effects ---------------------------------------------------------------------------


def test_operator_resolves_an_unknown_side_effect_with_evidence(
    operator: Client, story: Thread
) -> None:
    effect = unknown_effect(story)
    page = operator.get("/side-effects/").content.decode()
    assert f'action="/side-effects/{effect.pk}/resolve/"' in page
    refused = operator.post(
        f"/side-effects/{effect.pk}/resolve/",
        {"status": "succeeded", "evidence": "  "},
        HTTP_HX_REQUEST="true",
    )
    assert refused.status_code == 400 and refused["HX-Retarget"] == "#notice"
    assert b"evidence" in refused.content
    response = operator.post(
        f"/side-effects/{effect.pk}/resolve/",
        {"status": "succeeded", "evidence": "provider shows re_123 settled"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith(f'<article class="card" id="effect-{effect.pk}"')
    assert "resolved succeeded" in body and "re_123 settled" in body
    effect.refresh_from_db()
    assert effect.status == "succeeded"
    entry = AuditEntry.objects.get(action="side_effect.resolve")
    assert entry.actor_label == "operator-person" and entry.target_id == str(effect.pk)
    audit = operator.get("/audit/?action=side_effect.resolve").content.decode()
    assert "side_effect.resolve" in audit and "operator-person" in audit
    again = operator.post(
        f"/side-effects/{effect.pk}/resolve/", {"status": "failed", "evidence": "second try"}
    )
    assert again.status_code == 409
    stale = operator.post(
        f"/side-effects/{effect.pk}/resolve/",
        {"status": "failed", "evidence": "second try"},
        HTTP_HX_REQUEST="true",
    )
    assert stale.status_code == 409
    refreshed = stale.content.decode().split(f'<article class="card" id="effect-{effect.pk}"')
    assert len(refreshed) == 2 and refreshed[1].startswith(' hx-swap-oob="true"')
    assert "resolved succeeded" in refreshed[1]


def test_a_plain_form_post_redirects_back(operator: Client, story: Thread) -> None:
    effect = unknown_effect(story)
    response = operator.post(
        f"/side-effects/{effect.pk}/resolve/",
        {"status": "failed", "evidence": "provider says declined"},
    )
    assert response.status_code == 302 and response["Location"] == "/side-effects/"


def test_status_check_needs_a_configured_tool(operator: Client, story: Thread) -> None:
    effect = unknown_effect(story)
    response = operator.post(f"/side-effects/{effect.pk}/check/", HTTP_HX_REQUEST="true")
    assert response.status_code == 409 and b"no status check" in response.content


def test_status_check_runs_and_shows_progress(
    operator: Client, story: Thread, django_capture_on_commit_callbacks: Any
) -> None:
    effect = unknown_effect(story)
    ToolStatusCheck.objects.create(
        workspace=story.workspace,
        tool_name="refund",
        url_template="http://127.0.0.1:9/status/{idempotency_key}",
    )
    with django_capture_on_commit_callbacks(execute=False):
        response = operator.post(f"/side-effects/{effect.pk}/check/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    run = TaskRun.objects.get(kind="side_effect_status_check")
    assert f'hx-get="/tasks/{run.id}/progress/' in response.content.decode()
    assert 'hx-trigger="every 1s"' in response.content.decode()


def test_another_workspace_cannot_touch_side_effects(outsider: Client, story: Thread) -> None:
    effect = unknown_effect(story)
    assert (
        outsider.post(
            f"/side-effects/{effect.pk}/resolve/", {"status": "succeeded", "evidence": "x"}
        ).status_code
        == 404
    )
    assert outsider.post(f"/side-effects/{effect.pk}/check/").status_code == 404
    assert b"refund-10086" not in outsider.get("/side-effects/").content


# --- approvals ------------------------------------------------------------------------------


def test_operator_sees_the_queue_without_buttons_and_is_refused(
    operator: Client, story: Thread
) -> None:
    approval = pending(story)
    page = operator.get("/approvals/").content.decode()
    assert "issue_store_credit" in page and "never refund more than $200" in page
    assert f"/approvals/{approval.pk}/decide/" not in page
    response = operator.post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "fine"}
    )
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize("decision,status", [("approve", "approved"), ("reject", "rejected")])
def test_reviewer_decides_with_a_reason(
    reviewer: Client, story: Thread, decision: str, status: str
) -> None:
    approval = pending(story)
    page = reviewer.get("/approvals/").content.decode()
    assert f'action="/approvals/{approval.pk}/decide/"' in page
    missing = reviewer.post(f"/approvals/{approval.pk}/decide/", {"decision": decision})
    assert missing.status_code == 400
    response = reviewer.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": decision, "reason": "within policy"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert f'id="approval-{approval.pk}"' in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == status and approval.reason == "within policy"
    assert AuditEntry.objects.filter(
        action="approval.decide", actor_label="reviewer-person", target_id=str(approval.pk)
    ).exists()
    twice = reviewer.post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "again"}
    )
    assert twice.status_code == 409
    # Decided meanwhile (another reviewer's tab): the notice says so, and the card is sent
    # along out of band as it stands now, without its buttons.
    stale = reviewer.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "again"},
        HTTP_HX_REQUEST="true",
    )
    assert stale.status_code == 409 and stale["HX-Retarget"] == "#notice"
    refreshed = stale.content.decode().split(f'<article class="card" id="approval-{approval.pk}"')
    assert len(refreshed) == 2 and refreshed[1].startswith(' hx-swap-oob="true"')
    assert status in refreshed[1] and 'value="approve"' not in refreshed[1]
    # The next answered action clears the notice.
    assert 'id="notice"' in response.content.decode()
    # The decision is an event of the log, linked back to its request.
    request_seq = approval.request_event.seq
    timeline = reviewer.get(f"/threads/{story.pk}/").content.decode()
    assert f'href="#seq-{request_seq}">↑ request #{request_seq}' in timeline
    assert f"approval {status}" in timeline


def test_another_workspace_cannot_decide(outsider: Client, story: Thread) -> None:
    approval = pending(story)
    assert (
        outsider.post(
            f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "x"}
        ).status_code
        == 404
    )
    assert b"issue_store_credit" not in outsider.get("/approvals/").content


# --- checkpoints: rollback and fork ---------------------------------------------------------


def test_only_admins_see_and_may_roll_back(
    operator: Client, reviewer: Client, story: Thread, workspace: Any
) -> None:
    checkpoint = first_checkpoint(story)
    for client in (operator, reviewer):
        page = client.get(f"/threads/{story.pk}/checkpoints/").content.decode()
        assert "Roll back" not in page
        assert (
            client.get(
                f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
            ).status_code
            == 403
        )
        assert (
            client.post(
                f"/threads/{story.pk}/rollback/", {"checkpoint": checkpoint.pk, "reason": "x"}
            ).status_code
            == 403
        )
    story.refresh_from_db()
    assert story.head_version == 2


def test_admin_rolls_back_behind_a_preview_and_a_reason(admin: Client, story: Thread) -> None:
    checkpoint = first_checkpoint(story)
    page = admin.get(f"/threads/{story.pk}/checkpoints/").content.decode()
    assert f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/" in page
    preview = admin.get(
        f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
    ).content.decode()
    assert "Versions replaced (1)" in preview and "refund-10086" in preview
    assert "issue_store_credit" in preview and 'name="reason" required' in preview
    no_reason = admin.post(f"/threads/{story.pk}/rollback/", {"checkpoint": checkpoint.pk})
    assert no_reason.status_code == 400
    story.refresh_from_db()
    assert story.head_version == 2
    response = admin.post(
        f"/threads/{story.pk}/rollback/",
        {"checkpoint": checkpoint.pk, "reason": "v2 lost the refund"},
    )
    story.refresh_from_db()
    assert story.head_version == 3 and story.covered_until == checkpoint.cursor
    assert response.status_code == 302
    assert response["Location"] == f"/threads/{story.pk}/summaries/3/"
    assert story.versions.get(version=2).phase == SummaryPhase.ROLLED_BACK
    entry = AuditEntry.objects.get(action="thread.rollback")
    assert entry.actor_label == "admin-person"
    assert "thread.rollback" in admin.get("/audit/").content.decode()


def test_a_rollback_form_sent_twice_rolls_back_once(admin: Client, story: Thread) -> None:
    """A double click (or another admin first): the second rollback from the same preview is
    refused, not applied on top of the first."""
    checkpoint = first_checkpoint(story)
    preview = admin.get(
        f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
    ).content.decode()
    assert 'name="after_rollback" value="0"' in preview and "data-submit-once" in preview
    body = {"checkpoint": checkpoint.pk, "reason": "v2 lost the refund", "after_rollback": "0"}
    assert admin.post(f"/threads/{story.pk}/rollback/", body).status_code == 302
    again = admin.post(f"/threads/{story.pk}/rollback/", body)
    assert again.status_code == 409
    assert "rolled back again after this preview" in again.content.decode()
    story.refresh_from_db()
    assert story.head_version == 3 and story.last_version == 3
    assert AuditEntry.objects.filter(action="thread.rollback").count() == 1
    # A new preview stands on the rollback that came first, and may be confirmed.
    entry = AuditEntry.objects.get(action="thread.rollback")
    preview = admin.get(
        f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
    ).content.decode()
    assert f'name="after_rollback" value="{entry.pk}"' in preview
    body["after_rollback"] = str(entry.pk)
    assert admin.post(f"/threads/{story.pk}/rollback/", body).status_code == 302
    assert AuditEntry.objects.filter(action="thread.rollback").count() == 2


@pytest.mark.parametrize("field", ["after_rollback", "after_version"])
def test_a_rollback_form_with_a_forged_token_is_refused(
    admin: Client, story: Thread, field: str
) -> None:
    """A preview token that is not the preview's number is refused, not ignored: the check
    it carries would go with it."""
    checkpoint = first_checkpoint(story)
    preview = admin.get(
        f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
    ).content.decode()
    assert f'name="{field}" value=' in preview
    body = {"checkpoint": checkpoint.pk, "reason": "v2 lost the refund", field: "abc"}
    answer = admin.post(f"/threads/{story.pk}/rollback/", body)
    assert answer.status_code == 400
    assert f"{field} must be the preview" in answer.content.decode()
    assert not AuditEntry.objects.filter(action="thread.rollback").exists()


def test_rollback_of_an_unknown_checkpoint_is_404(
    admin: Client, story: Thread, outsider: Client
) -> None:
    assert (
        admin.post(
            f"/threads/{story.pk}/rollback/", {"checkpoint": "999999", "reason": "x"}
        ).status_code
        == 404
    )
    checkpoint = first_checkpoint(story)
    assert (
        outsider.post(
            f"/threads/{story.pk}/rollback/", {"checkpoint": checkpoint.pk, "reason": "x"}
        ).status_code
        == 404
    )


def test_fork_needs_a_reviewer(operator: Client, reviewer: Client, story: Thread) -> None:
    checkpoint = first_checkpoint(story)
    assert (
        "Fork from a checkpoint"
        not in operator.get(f"/threads/{story.pk}/checkpoints/").content.decode()
    )
    assert (
        operator.post(
            f"/threads/{story.pk}/fork/", {"checkpoint": checkpoint.pk, "external_id": "f1"}
        ).status_code
        == 403
    )
    response = reviewer.post(
        f"/threads/{story.pk}/fork/", {"checkpoint": checkpoint.pk, "external_id": "order-10086-b"}
    )
    child = Thread.objects.get(external_id="order-10086-b")
    assert response.status_code == 302 and response["Location"] == f"/threads/{child.pk}/"
    assert child.parent_thread_id == story.pk
    assert "fork of" in reviewer.get(f"/threads/{child.pk}/").content.decode()


def test_operator_creates_a_checkpoint(operator: Client, story: Thread) -> None:
    before = Checkpoint.objects.filter(thread=story).count()
    response = operator.post(f"/threads/{story.pk}/checkpoints/new/", {"label": "before fix"})
    assert response.status_code == 302
    assert Checkpoint.objects.filter(thread=story).count() == before + 1
    assert "before fix" in operator.get(f"/threads/{story.pk}/checkpoints/").content.decode()


# --- fold and verify, with polled progress --------------------------------------------------


def test_fold_now_shows_progress_until_the_task_finishes(
    operator: Client,
    story: Thread,
    eager_tasks: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    assert 'hx-post="/threads/' in operator.get(f"/threads/{story.pk}/summaries/").content.decode()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = operator.post(f"/threads/{story.pk}/fold/", HTTP_HX_REQUEST="true")
    run = TaskRun.objects.get(kind="fold")
    body = response.content.decode()
    assert response.status_code == 200
    assert f'hx-get="/tasks/{run.id}/progress/' in body and 'hx-trigger="every 1s"' in body
    polling = operator.get(f"/tasks/{run.id}/progress/").content.decode()
    assert 'hx-trigger="every 1s"' in polling and "pending" in polling
    for callback in callbacks:  # the commit happens: the (eager) task runs
        callback()
    run.refresh_from_db()
    assert run.state == "SUCCESS"
    finished = operator.get(f"/tasks/{run.id}/progress/?back=/threads/").content.decode()
    assert "hx-trigger" not in finished and "success" in finished
    assert "Refresh page" in finished
    # The summaries page reloads its versions itself (task-finished), so it offers no link.
    reloading = operator.get(f"/tasks/{run.id}/progress/?back=/threads/&reloads=1")
    assert "Refresh page" not in reloading.content.decode()
    assert "task-finished" in reloading["HX-Trigger"]
    story.refresh_from_db()
    assert story.head_version == 3 and story.covered_until == story.last_seq


def test_task_progress_of_another_workspace_is_404(
    outsider: Client, operator: Client, story: Thread
) -> None:
    operator.post(f"/threads/{story.pk}/fold/")
    run = TaskRun.objects.get(kind="fold")
    assert outsider.get(f"/tasks/{run.id}/progress/").status_code == 404


def test_verify_now_runs_the_chain_check(
    operator: Client, story: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(f"/threads/{story.pk}/verify/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    run = TaskRun.objects.get(kind="verify")
    run.refresh_from_db()
    assert run.state == "SUCCESS"
    story.refresh_from_db()
    assert story.verified_until == story.last_seq and story.chain_ok
    assert AuditEntry.objects.filter(action="verify_requested", actor_label="operator-person")
    page = operator.get("/integrity/").content.decode()
    assert "Verify now" in page and "never" not in page.split("order-10086")[1][:400]


def test_another_workspace_cannot_fold_or_verify(outsider: Client, story: Thread) -> None:
    assert outsider.post(f"/threads/{story.pk}/fold/").status_code == 404
    assert outsider.post(f"/threads/{story.pk}/verify/").status_code == 404
    assert outsider.post(f"/threads/{story.pk}/checkpoints/new/").status_code == 404
    assert not TaskRun.objects.exists()


def test_actions_refuse_get(admin: Client, story: Thread) -> None:
    for url in (
        f"/threads/{story.pk}/fold/",
        f"/threads/{story.pk}/rollback/",
        f"/threads/{story.pk}/fork/",
        f"/threads/{story.pk}/verify/",
        f"/side-effects/{unknown_effect(story).pk}/resolve/",
        f"/approvals/{pending(story).pk}/decide/",
    ):
        assert admin.get(url).status_code == 405, url


# --- CSRF -----------------------------------------------------------------------------------


def test_posts_need_the_csrf_token_that_the_page_hands_htmx(workspace: Any, story: Thread) -> None:
    client = login(workspace, "reviewer", csrf=True)
    approval = pending(story)
    url = f"/approvals/{approval.pk}/decide/"
    assert client.post(url, {"decision": "approve", "reason": "ok"}).status_code == 403
    page = client.get("/approvals/").content.decode()
    # The token reaches htmx once, through hx-headers on <body>.
    start = page.index("hx-headers='") + len("hx-headers='")
    headers = page[start : page.index("'", start)]
    token = headers.split('"X-CSRFToken": "')[1].split('"')[0]
    response = client.post(
        url, {"decision": "approve", "reason": "ok"}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    approval.refresh_from_db()
    assert approval.status == "approved"


@pytest.mark.parametrize("path", ["fold/", "verify/", "checkpoints/new/"])
def test_thread_actions_need_csrf(workspace: Any, story: Thread, path: str) -> None:
    client = login(workspace, "admin", csrf=True)
    assert client.post(f"/threads/{story.pk}/{path}").status_code == 403
    assert not TaskRun.objects.exists()


def test_people_of_two_workspaces_act_in_each_by_their_role(story: Thread) -> None:
    other, _ = f.make_workspace("initech")
    f.make_person(story.workspace, "dual", "operator")
    person = f.make_person(other, "dual", "reviewer")
    client = Client()
    client.force_login(person)
    theirs = f.make_thread(other, external_id="initech-1")
    f.append(theirs, {"kind": "approval_request", "action": "ship", "arguments": {}})
    page = client.get("/approvals/").content.decode()
    mine = ApprovalRequest.objects.get(thread=theirs)
    assert f"/approvals/{mine.pk}/decide/" in page  # reviewer in initech
    assert f"/approvals/{pending(story).pk}/decide/" not in page  # operator in acme
    assert (
        client.post(
            f"/approvals/{pending(story).pk}/decide/", {"decision": "approve", "reason": "x"}
        ).status_code
        == 403
    )


def test_a_forks_copies_in_the_queues_say_so(
    operator: Client, reviewer: Client, story: Thread
) -> None:
    """A fork copies the history up to its checkpoint, an unknown side effect with it: its
    card in the queue names the thread it was copied from, so nobody takes it for a second
    refund. (An approval request copied by a fork is labelled the same way.)"""
    newest = Checkpoint.objects.filter(thread=story).order_by("-cursor").first()
    assert newest is not None
    reviewer.post(f"/threads/{story.pk}/fork/", {"checkpoint": newest.pk, "external_id": "copy-1"})
    child = Thread.objects.select_related("parent_thread", "parent_checkpoint").get(
        external_id="copy-1"
    )
    copy = SideEffect.objects.get(thread=child, idempotency_key="refund-10086")
    assert copy.call_seq <= newest.cursor
    page = reviewer.get("/side-effects/").content.decode()
    card = page.split(f'id="effect-{copy.pk}"')[1].split("</article>")[0]
    assert "fork copy" in card and "copied with the history of order-10086" in card
    original = page.split(f'id="effect-{unknown_effect(story).pk}"')[1].split("</article>")[0]
    assert "fork copy" not in original
    # What the fork appends after its checkpoint is its own.
    assert selectors.fork_copied_from(child, newest.cursor) == "order-10086"
    assert selectors.fork_copied_from(child, newest.cursor + 1) == ""
    assert selectors.fork_copied_from(story, 1) == ""
