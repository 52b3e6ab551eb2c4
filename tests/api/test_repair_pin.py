"""A repair that stays repaired (docs/repairs.md, "Rollback", docs/api.md,
"Rollback — `POST /api/v1/threads/{id}/rollback/`"): an `llm` summariser lies, an admin rolls back
to the honest version and pins the thread; events that would fold it fold nothing, the context
serves the restored summary; the admin takes the thread off the `llm` summariser and releases the
pin, and the fold runs again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_checkpoints_api import person, post
from tests.runtime.conftest import eager_tasks  # noqa: F401 (a fixture)
from tests.summarizers.test_llm import FakeEndpoint
from threads.models import AuditEntry, Checkpoint, SummaryPhase, SummaryVersion, Thread
from threads.services.folding import fold_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture
def endpoint(settings: Any) -> Iterator[FakeEndpoint]:
    server = FakeEndpoint()
    settings.CTXADMIN_LLM_BASE_URL = server.base_url
    settings.CTXADMIN_LLM_MODEL = "m-1"
    settings.CTXADMIN_LLM_TIMEOUT = 5
    yield server
    server.close()


HONEST = {
    "task": {"goal": "Refund order 7", "status": "unknown", "source_event_ids": [1]},
    "requests": [{"text": "Refund order 7", "truncated": False, "source_event_ids": [1]}],
    "constraints": [],
    "facts": [],
    "completed_actions": [],
    "pending": [],
    "decisions": [],
    "open_questions": [],
    "narrative": "A refund of order 7 was attempted and timed out; its outcome is unknown.",
}
# The lie of issue #22: the refund timed out, the summary says the customer was paid.
LIE = {
    **HONEST,
    "task": {"goal": "Refund order 7", "status": "succeeded", "source_event_ids": [1]},
    "facts": [
        {
            "key": "refund",
            "value": "succeeded: $120 returned",
            "authority": "tool",
            "confidence": "confirmed",
            "status": "active",
            "source_event_ids": [3],
        }
    ],
    "narrative": "The refund went through: the customer was paid $120.",
}


def _fold_by_hand(agent: APIClient, thread: Thread, capture: Any) -> None:
    with capture(execute=True):
        answer = post(agent, f"/api/v1/threads/{thread.pk}/fold/")
    assert answer.status_code == 202, answer.content


def test_a_pinned_rollback_holds_until_released(
    endpoint: FakeEndpoint,
    workspace: Any,
    agent: APIClient,
    django_capture_on_commit_callbacks: Any,
) -> None:
    capture = django_capture_on_commit_callbacks
    thread = f.make_thread(workspace, external_id="lying-llm", summarizer="llm")
    admin = person(workspace, "admin", "ada")

    # v1: the llm summariser is honest about the timed-out refund.
    endpoint.content = json.dumps(HONEST)
    with capture(execute=True):
        f.append(
            thread,
            f.user("Refund order 7"),
            f.call("r1", "refund", {"amount": 120}, side_effect_key="refund-7"),
            f.result("r1", "timeout"),
            f.assistant("The refund timed out."),
        )
    thread.refresh_from_db()
    honest = SummaryVersion.objects.get(thread=thread, version=thread.head_version)
    assert honest.phase == SummaryPhase.COMMITTED
    assert honest.content["narrative"] == HONEST["narrative"]

    # The summariser starts lying; whatever verification makes of the lie, the admin rolls
    # back to the honest version and pins the thread.
    endpoint.content = json.dumps(LIE)
    f.append(thread, f.user("Did the refund go through?"), f.assistant("Let me check."))
    _fold_by_hand(agent, thread, capture)
    checkpoint = Checkpoint.objects.get(thread=thread, summary_version=honest)
    with capture(execute=True):
        answer = post(
            admin,
            f"/api/v1/threads/{thread.pk}/rollback/",
            {"checkpoint": checkpoint.pk, "reason": "v2 claims a refund nobody saw", "pin": True},
        )
    assert answer.status_code == 200, answer.content
    restored = answer.json()["version"]
    thread.refresh_from_db()
    assert thread.head_version == restored
    shown = agent.get(f"/api/v1/threads/{thread.pk}/").json()
    assert shown["pinned_by"] == "ada"
    assert shown["pin_reason"] == "v2 claims a refund nobody saw"
    assert shown["pinned_at"] is not None

    # While pinned: events that would fold the thread (a side effect's result), "Fold now"
    # and the fold task itself write no version and never ask the summariser.
    asked, versions = len(endpoint.requests), SummaryVersion.objects.filter(thread=thread).count()
    with capture(execute=True):
        f.append(
            thread,
            f.user("Then notify the customer"),
            f.call("n1", "notify", {"order": 7}, side_effect_key="notify-7"),
            f.result("n1", "succeeded", {"sent": True}),
            f.assistant("Notified."),
        )
    thread.refresh_from_db()
    assert thread.head_version == restored
    assert SummaryVersion.objects.filter(thread=thread).count() == versions
    refused = post(agent, f"/api/v1/threads/{thread.pk}/fold/")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "thread_pinned"
    assert (
        fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "redelivered"}) is None
    )
    thread.refresh_from_db()
    assert thread.head_version == restored
    assert SummaryVersion.objects.filter(thread=thread).count() == versions
    assert len(endpoint.requests) == asked
    context = agent.get(f"/api/v1/threads/{thread.pk}/context/").json()
    assert context["summary"]["version"] == restored
    assert context["summary"]["content"]["narrative"] == HONEST["narrative"]
    assert context["summary"]["content"]["task"]["status"] == "unknown"
    assert [e["seq"] for e in context["events"]] == list(
        range(checkpoint.cursor + 1, thread.last_seq + 1)
    )

    # The admin takes the thread off the llm summariser, then releases the pin: the fold the
    # pinned time held back runs, with the structured summariser.
    changed = admin.patch(
        f"/api/v1/threads/{thread.pk}/",
        data=json.dumps({"summarizer": "structured"}),
        content_type="application/json",
    )
    assert changed.status_code == 200 and changed.json()["summarizer"] == "structured"
    with capture(execute=True):
        released = post(
            admin, f"/api/v1/threads/{thread.pk}/unpin/", {"reason": "summariser replaced"}
        )
    assert released.status_code == 200, released.content
    assert released.json()["pinned_at"] is None and released.json()["pinned_by"] == ""
    thread.refresh_from_db()
    assert thread.head_version > restored
    head = SummaryVersion.objects.get(thread=thread, version=thread.head_version)
    assert head.phase == SummaryPhase.COMMITTED and head.backend == "structured"
    assert head.covered_until == thread.last_seq
    assert len(endpoint.requests) == asked
    refund = [t for t in head.content["tool_state"] if t["tool_call_id"] == "r1"]
    assert refund[0]["status"] == "unknown"
    actions = list(
        AuditEntry.objects.filter(thread=thread, action__startswith="thread.")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions[-3:] == ["thread.rollback", "thread.settings", "thread.unpin"]
    unpin = AuditEntry.objects.get(thread=thread, action="thread.unpin")
    assert unpin.before is not None and unpin.before["pinned_by"] == "ada"
    assert unpin.after == {"reason": "summariser replaced"}


def test_a_rollback_without_pin_lets_the_next_fold_run(
    workspace: Any, agent: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    capture = django_capture_on_commit_callbacks
    thread = f.make_thread(workspace, external_id="unpinned")
    with capture(execute=True):
        f.append(
            thread,
            f.user("Refund order 8"),
            f.call("r1", "refund", side_effect_key="refund-8"),
            f.result("r1", "succeeded"),
            f.assistant("Done."),
        )
    thread.refresh_from_db()
    checkpoint = Checkpoint.objects.get(thread=thread, summary_version__version=1)
    admin = person(workspace, "admin")
    answer = post(
        admin,
        f"/api/v1/threads/{thread.pk}/rollback/",
        {"checkpoint": checkpoint.pk, "reason": "look again"},
    )
    assert answer.status_code == 200
    assert agent.get(f"/api/v1/threads/{thread.pk}/").json()["pinned_at"] is None
    with capture(execute=True):
        f.append(
            thread,
            f.user("and order 9"),
            f.call("r2", "refund", side_effect_key="refund-9"),
            f.result("r2", "succeeded"),
            f.assistant("Done too."),
        )
    thread.refresh_from_db()
    assert thread.covered_until == thread.last_seq  # the structural trigger folded it
    released = post(admin, f"/api/v1/threads/{thread.pk}/unpin/", {"reason": "nothing to release"})
    assert released.status_code == 409
    assert released.json()["error"]["code"] == "thread_not_pinned"


@pytest.mark.parametrize("role", ["operator", "reviewer"])
def test_only_an_admin_releases_a_pin_and_with_a_reason(
    workspace: Any, agent: APIClient, role: str, django_capture_on_commit_callbacks: Any
) -> None:
    thread = f.make_thread(workspace, external_id="pinned")
    with django_capture_on_commit_callbacks(execute=True):
        f.append(
            thread,
            f.user("Refund order 8"),
            f.call("r1", "refund", side_effect_key="refund-8"),
            f.result("r1", "succeeded"),
            f.assistant("Done."),
        )
    checkpoint = Checkpoint.objects.get(thread=thread, summary_version__version=1)
    admin = person(workspace, "admin")
    pinned = {"checkpoint": checkpoint.pk, "reason": "hold it", "pin": True}
    assert post(admin, f"/api/v1/threads/{thread.pk}/rollback/", pinned).status_code == 200
    url = f"/api/v1/threads/{thread.pk}/unpin/"
    assert post(agent, url, {"reason": "x"}).status_code == 403
    assert post(person(workspace, role), url, {"reason": "x"}).status_code == 403
    blank = post(admin, url, {"reason": "  "})
    assert blank.status_code == 400 and "reason" in blank.json()["error"]["fields"]
    thread.refresh_from_db()
    assert thread.pinned_at is not None and thread.pinned_by == "admin-x"
