"""Integrity page after a tampered row, and the audit log's filters."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from tests.factories import tamper
from threads.models import Event, Thread
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db


def test_integrity_names_the_first_bad_seq_and_the_last_safe_checkpoint(
    operator: Client, story: Thread
) -> None:
    tamper(
        Event.objects.get(thread=story, seq=6), content="I never asked for a refund"
    )  # "go ahead", inside v2's range
    integrity_check(thread=story, full=True)
    story.refresh_from_db()
    assert not story.chain_ok and story.first_bad_seq == 6
    page = operator.get("/integrity/").content.decode()
    assert "broken" in page and "?seq=6" in page
    assert "last safe: " in page and "@ #5" in page  # v1's checkpoint stands before the break
    assert "Unsafe checkpoints" in page and "@ #9" in page
    listing = operator.get("/threads/?failed=1").content.decode()
    assert "order-10086" in listing and "chain broken @6" in listing
    checkpoints = operator.get(f"/threads/{story.pk}/checkpoints/").content.decode()
    assert "unsafe" in checkpoints


def test_audit_filters_by_person_action_and_thread(
    operator: Client, reviewer: Client, story: Thread, workspace: Any
) -> None:
    other = f.make_thread(workspace, external_id="other-thread")
    operator.post(f"/threads/{story.pk}/checkpoints/new/", {"label": "a"})
    operator.post(f"/threads/{other.pk}/checkpoints/new/", {"label": "b"})
    reviewer.post(
        f"/approvals/{story.approvals.get(action='issue_store_credit').pk}/decide/",
        {"decision": "reject", "reason": "over the limit"},
    )

    def rows(query: str) -> str:
        body = operator.get(f"/audit/?{query}").content.decode()
        return body[body.index("<tbody>") : body.index("</tbody>")]

    by_person = rows("actor=reviewer-person")
    assert "approval.decide" in by_person and "checkpoint.create" not in by_person
    by_action = rows("action=checkpoint.create")
    assert by_action.count("checkpoint.create") == 2 and "approval.decide" not in by_action
    by_thread = rows("thread=other-thread&action=checkpoint.create")
    assert by_thread.count("checkpoint.create") == 1 and "other-thread" in by_thread
    by_uuid = rows(f"thread={other.pk}")
    assert "other-thread" in by_uuid and "order-10086" not in by_uuid


def test_audit_paginates(operator: Client, workspace: Any) -> None:
    for n in range(55):
        f.make_thread(workspace, external_id=f"t-{n}")  # each writes thread.create
    first = operator.get("/audit/").content.decode()
    assert "Page 1 of 2" in first and "page=2" in first
    second = operator.get("/audit/?page=2").content.decode()
    assert "Page 2 of 2" in second


def test_audit_of_another_workspace_is_invisible(outsider: Client, story: Thread) -> None:
    body = outsider.get("/audit/?thread=order-10086").content.decode()
    assert "No entries." in body
