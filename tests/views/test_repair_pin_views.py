"""The dashboard's repair controls (docs/repairs.md, "Rollback"): the rollback form's pin, the pin
shown on the thread page and in the thread list, its release, the settings form, and the rejected
candidates on the summaries tab."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests import factories as f
from tests.views.test_actions import first_checkpoint
from threads.models import AuditEntry, SummaryPhase, SummaryVersion, Thread
from threads.services import fold_preparation, folding

pytestmark = pytest.mark.django_db

FORM = {
    "summarizer": "structured",
    "context_window": "32000",
    "reserved_output": "2000",
    "reasoning_reserve": "0",
    "safety_margin": "500",
    "fixed_tokens": "0",
    "high_watermark": "0.9",
    "low_watermark": "0.5",
}


def pin(admin: Client, story: Thread, reason: str = "v2 lost the refund") -> None:
    checkpoint = first_checkpoint(story)
    preview = admin.get(
        f"/threads/{story.pk}/checkpoints/{checkpoint.pk}/rollback-preview/"
    ).content.decode()
    assert 'name="pin" value="1"' in preview
    answer = admin.post(
        f"/threads/{story.pk}/rollback/",
        {"checkpoint": checkpoint.pk, "reason": reason, "pin": "1"},
    )
    assert answer.status_code == 302, answer.content


def test_a_pinned_rollback_is_shown_refuses_fold_now_and_is_released(
    admin: Client, story: Thread
) -> None:
    pin(admin, story)
    story.refresh_from_db()
    head = story.head_version
    page = admin.get(f"/threads/{story.pk}/").content.decode()
    assert "Pinned by" in page and "admin-person" in page and "v2 lost the refund" in page
    assert f'action="/threads/{story.pk}/unpin/"' in page
    listed = admin.get("/threads/").content.decode()
    assert "pinned by admin-person" in listed

    summaries = admin.get(f"/threads/{story.pk}/summaries/").content.decode()
    assert "Folds are paused" in summaries and f"/threads/{story.pk}/fold/" not in summaries
    refused = admin.post(f"/threads/{story.pk}/fold/", HTTP_HX_REQUEST="true")
    assert refused.status_code == 409 and "paused" in refused.content.decode()
    story.refresh_from_db()
    assert story.head_version == head and story.last_version == head

    no_reason = admin.post(f"/threads/{story.pk}/unpin/", {"reason": ""}, HTTP_HX_REQUEST="true")
    assert no_reason.status_code == 400
    released = admin.post(
        f"/threads/{story.pk}/unpin/", {"reason": "checked by hand"}, HTTP_HX_REQUEST="true"
    )
    assert released.status_code == 200
    region = released.content.decode()
    assert 'id="thread-repair"' in region and "Pinned by" not in region
    story.refresh_from_db()
    assert story.pinned_at is None
    assert AuditEntry.objects.get(action="thread.unpin").after == {"reason": "checked by hand"}
    assert "pinned by" not in admin.get("/threads/").content.decode()


def test_a_rollback_without_the_box_ticked_does_not_pin(admin: Client, story: Thread) -> None:
    checkpoint = first_checkpoint(story)
    admin.post(f"/threads/{story.pk}/rollback/", {"checkpoint": checkpoint.pk, "reason": "x"})
    story.refresh_from_db()
    assert story.pinned_at is None
    assert "Pinned by" not in admin.get(f"/threads/{story.pk}/").content.decode()


def test_the_settings_form_changes_the_thread(admin: Client, story: Thread) -> None:
    page = admin.get(f"/threads/{story.pk}/").content.decode()
    assert f'action="/threads/{story.pk}/settings/"' in page
    answer = admin.post(f"/threads/{story.pk}/settings/", FORM, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    assert 'value="32000"' in answer.content.decode()
    story.refresh_from_db()
    assert (story.context_window, story.high_watermark) == (32000, 0.9)
    entry = AuditEntry.objects.get(action="thread.settings")
    assert entry.before == {"context_window": 16000, "high_watermark": 0.8}


@pytest.mark.parametrize(
    "change, named",
    [({"low_watermark": "0.95"}, "low_watermark"), ({"context_window": "abc"}, "context_window")],
)
def test_a_bad_settings_form_changes_nothing(
    admin: Client, story: Thread, change: dict[str, str], named: str
) -> None:
    answer = admin.post(
        f"/threads/{story.pk}/settings/", {**FORM, **change}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 400 and named in answer.content.decode()
    story.refresh_from_db()
    assert (story.context_window, story.high_watermark) == (16000, 0.8)
    assert not AuditEntry.objects.filter(action="thread.settings").exists()


def test_other_roles_see_no_controls_and_are_refused(
    operator: Client, reviewer: Client, admin: Client, story: Thread
) -> None:
    pin(admin, story)
    for client in (operator, reviewer):
        page = client.get(f"/threads/{story.pk}/").content.decode()
        assert "Pinned by" in page  # everyone sees the pin
        assert "/settings/" not in page and f"/threads/{story.pk}/unpin/" not in page
        assert client.post(f"/threads/{story.pk}/settings/", FORM).status_code == 403
        assert client.post(f"/threads/{story.pk}/unpin/", {"reason": "x"}).status_code == 403
    story.refresh_from_db()
    assert story.pinned_at is not None and story.context_window == 16000


def test_an_admin_pauses_folds_from_the_header_and_others_cannot(
    operator: Client, reviewer: Client, admin: Client, story: Thread
) -> None:
    url = f"/threads/{story.pk}/pause/"
    for client in (operator, reviewer):
        assert url not in client.get(f"/threads/{story.pk}/").content.decode()
        assert client.post(url, {"reason": "x"}).status_code == 403
    assert f'action="{url}"' in admin.get(f"/threads/{story.pk}/").content.decode()
    blank = admin.post(url, {"reason": " "}, HTTP_HX_REQUEST="true")
    assert blank.status_code == 400
    story.refresh_from_db()
    assert story.pinned_at is None
    paused = admin.post(url, {"reason": "summariser under review"}, HTTP_HX_REQUEST="true")
    assert paused.status_code == 200
    assert "Pinned by" in paused.content.decode() and "summariser under review" in (
        paused.content.decode()
    )
    story.refresh_from_db()
    head = story.head_version
    refused = admin.post(f"/threads/{story.pk}/fold/", HTTP_HX_REQUEST="true")
    assert refused.status_code == 409
    story.refresh_from_db()
    assert story.pinned_by == "admin-person" and story.last_version == head
    assert AuditEntry.objects.filter(action="thread.pause").count() == 1


def reject_a_candidate(story: Thread) -> SummaryVersion:
    """A candidate altered after it was prepared: verification refuses it by its checksum."""
    f.append(story, f.assistant("Asking for approval."))
    candidate = fold_preparation.fold_prepare(thread_id=story.pk, trigger={"kind": "manual"})
    assert candidate is not None
    SummaryVersion.objects.filter(pk=candidate.pk).update(
        content={**candidate.content, "narrative": "edited after it was prepared"}
    )
    candidate.refresh_from_db()
    assert folding.summary_decide(version=candidate) == folding.Outcome.REJECTED
    return candidate


def test_rejected_candidates_are_listed_with_the_checks_that_refused_them(
    operator: Client, story: Thread
) -> None:
    candidate = reject_a_candidate(story)
    page = operator.get(f"/threads/{story.pk}/summaries/").content.decode()
    assert "Rejected candidates (1)" in page
    section = page[page.index("Rejected candidates (1)") :]
    assert f"v{candidate.version}" in section
    assert "<strong>checksum</strong>" in section
    assert "its checksum does not recompute" in section
    assert candidate.phase == SummaryPhase.REJECTED


def test_the_api_lists_rejected_candidates_with_their_checks(story: Thread, agent: Any) -> None:
    candidate = reject_a_candidate(story)
    url = f"/api/v1/threads/{story.pk}/summaries/"
    assert len(agent.get(url).json()) == 3
    [rejected] = agent.get(url, {"phase": "rejected"}).json()
    assert rejected["version"] == candidate.version and rejected["verification"]["ok"] is False
    refused = [c for c in rejected["verification"]["checks"] if not c["ok"]]
    assert [c["name"] for c in refused] == ["checksum"] and refused[0]["detail"]
    assert agent.get(url, {"phase": "bogus"}).status_code == 400


def test_the_contracts_names_list_rejected_candidates_and_the_pause(
    story: Thread, agent: Any
) -> None:
    """docs/api.md, "Versions — `GET /api/v1/threads/{id}/summaries/` and `…/summaries/{version}/`"
    and "Settings — `PATCH /api/v1/threads/{id}/`": `?status=rejected` with `failed_checks`; the
    thread answer's `folds_paused`, `paused_by` and `pause_reason` read the pin."""
    candidate = reject_a_candidate(story)
    url = f"/api/v1/threads/{story.pk}/summaries/"
    [rejected] = agent.get(url, {"status": "rejected"}).json()
    assert rejected["version"] == candidate.version
    assert rejected["failed_checks"] == ["checksum"]
    thread = agent.get(f"/api/v1/threads/{story.pk}/").json()
    assert thread["folds_paused"] is False and thread["paused_by"] == ""
    Thread.objects.filter(pk=story.pk).update(
        pinned_at=timezone.now(), pinned_by="ada", pin_reason="bad summary"
    )
    thread = agent.get(f"/api/v1/threads/{story.pk}/").json()
    assert (thread["folds_paused"], thread["paused_by"], thread["pause_reason"]) == (
        True,
        "ada",
        "bad summary",
    )
