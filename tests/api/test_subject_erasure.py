"""Erasure by subject (docs/repairs.md, "Erasure by subject"; docs/api.md, "Erasure by subject —
`POST /api/v1/redactions/`"): an admin names a customer's e-mail address; a dry run reports
what would go and changes nothing; the run redacts every event of the workspace that mentions
it, in one audited batch, and afterwards the address is nowhere in the workspace's rows —
events, search index, summaries, LangGraph-free stores, the audit, the task's report — while
another workspace's copy stays, every chain verifies and names each redaction by seq."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests import factories
from tests.api.test_checkpoints_api import person
from tests.api.test_checkpoints_api import post as _post
from tests.api.test_summaries import eager
from tests.services.test_checkpoints import fold
from tests.support_secret_scan import find_everywhere
from threads.models import AuditEntry, Event, Redaction, Thread
from threads.services.redaction import SecondAdminRequired
from threads.services.subject_erasure import subject_erase

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers", "eager")]
__all__ = ["eager"]
_capture: Any = None


@pytest.fixture(autouse=True)
def _commit_callbacks(django_capture_on_commit_callbacks: Any) -> None:
    global _capture
    _capture = django_capture_on_commit_callbacks


def post(client: Any, url: str, body: Any) -> Any:
    """A POST whose after-commit work (the task it starts) runs, as a committed request's
    would."""
    with _capture(execute=True):
        return _post(client, url, body)


EMAIL = "alice.lidell@example.com"


def build(workspace: Any) -> tuple[Thread, Thread]:
    first = factories.make_thread(workspace, external_id="support-1")
    factories.append(
        first,
        factories.user(f"Please send the receipt to {EMAIL}"),
        factories.call("c1", "send_receipt", {"to": EMAIL, "order": 77}),
        factories.result("c1", value={"sent": True, "recipient": EMAIL}),
        factories.assistant("Sent. Anything else?"),
    )
    fold(first)
    factories.append(first, factories.user("no thanks"))
    second = factories.make_thread(workspace, external_id="support-2")
    factories.append(
        second,
        factories.user("Change my address to a.lidell@example.org"),
        factories.user(f"It was {EMAIL.upper()} before."),  # any case
    )
    return first, second


def task_report(client: Any, task_id: str) -> dict[str, Any]:
    answer = client.get(f"/api/v1/tasks/{task_id}/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["state"] == "SUCCESS", body
    return body["result"]


def test_a_subject_is_erased_from_the_workspace(workspace: Any) -> None:
    first, second = build(workspace)
    elsewhere, _ = factories.make_workspace("elsewhere")
    factories.append(factories.make_thread(elsewhere, external_id="x-1"), factories.user(EMAIL))
    admin = person(workspace, "admin")
    events_before = {(e.thread_id, e.seq, e.hash) for e in Event.objects.all()}

    # A dry run: the report, and not a row changed.
    answer = post(
        admin,
        "/api/v1/redactions/",
        {"query": EMAIL, "reason": "GDPR Art. 17 request", "dry_run": True},
    )
    assert answer.status_code == 202, answer.content
    dry = task_report(admin, answer.json()["task_id"])
    assert dry["dry_run"] is True
    assert (dry["threads"], dry["events"]) == (2, 4)
    assert {t["external_id"]: t["seqs"] for t in dry["thread_list"]} == {
        "support-1": [1, 2, 3],
        "support-2": [2],
    }
    assert dry["summary_versions"] >= 1
    assert not Redaction.objects.exists()
    assert Event.objects.filter(thread=first, seq=1).get().data["content"].endswith(EMAIL)
    assert EMAIL not in str(dry)

    # The run.
    answer = post(admin, "/api/v1/redactions/", {"query": EMAIL, "reason": "GDPR Art. 17 request"})
    assert answer.status_code == 202, answer.content
    report = task_report(admin, answer.json()["task_id"])
    assert {k: report[k] for k in ("dry_run", "threads", "events")} == {
        "dry_run": False,
        "threads": 2,
        "events": 4,
    }
    assert report["summary_versions"] == dry["summary_versions"]
    assert sorted((r.thread.external_id, r.seq) for r in Redaction.objects.all()) == [
        ("support-1", 1),
        ("support-1", 2),
        ("support-1", 3),
        ("support-2", 2),
    ]

    # The address is nowhere but in the other workspace's one event (and, on SQLite, that
    # event's row of the search index).
    where = find_everywhere(EMAIL)
    assert {table for table, _, _ in where} <= {
        "threads_event",
        "threads_event_search",
        "threads_event_search_text",
    }, where
    assert all(count == 1 for _, _, count in where), where
    # Nothing else of those threads changed: the other events and every hash are as they were.
    assert {(e.thread_id, e.seq, e.hash) for e in Event.objects.all()} == events_before
    assert Event.objects.get(thread=second, seq=1).data["content"].endswith("example.org")

    # One audited batch, holding the value's digest and counts, never the value.
    (batch,) = AuditEntry.objects.filter(action="subject_erased")
    assert batch.after is not None
    assert batch.after["events"] == 4 and EMAIL not in str(batch.after)

    # Every chain verifies and says where it was redacted.
    out = io.StringIO()
    call_command("verify_chains", "--full", stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert "BROKEN" not in text.upper()
    assert "redacted at seq 3" in text

    # Nothing left to find: a second run touches nothing.
    again = post(admin, "/api/v1/redactions/", {"query": EMAIL, "reason": "once more"})
    assert task_report(admin, again.json()["task_id"])["events"] == 0


def test_who_may_and_what_is_refused(workspace: Any, agent: Any) -> None:
    build(workspace)
    body = {"query": EMAIL, "reason": "request"}
    assert post(person(workspace, "operator"), "/api/v1/redactions/", body).status_code == 403
    assert (
        post(person(workspace, "reviewer", "rita"), "/api/v1/redactions/", body).status_code == 403
    )
    assert agent.post("/api/v1/redactions/", body, format="json").status_code == 403
    admin = person(workspace, "admin")
    for bad, field in (
        ({"query": EMAIL}, "reason"),
        ({"query": "", "reason": "r"}, "query"),
        ({"query": "--- ...", "reason": "r"}, "query"),
        ({"query": EMAIL, "reason": "r", "workspace": "nowhere"}, None),
        ({"query": EMAIL, "reason": "r", "surprise": 1}, "surprise"),
    ):
        answer = post(admin, "/api/v1/redactions/", bad)
        assert answer.status_code in (400, 404), (bad, answer.content)
        if field:
            assert field in answer.json()["error"]["fields"], answer.json()
    assert not Redaction.objects.exists()


def test_a_workspace_that_requires_a_second_admin_refuses_the_batch(workspace: Any) -> None:
    """One admin alone cannot erase through the batch where every redaction needs two: the
    run is refused and no event loses its content; the dry run still reports."""
    first, _ = build(workspace)
    workspace.redaction_needs_second_admin = True
    workspace.save(update_fields=["redaction_needs_second_admin"])
    admin = person(workspace, "admin")
    answer = post(admin, "/api/v1/redactions/", {"query": EMAIL, "reason": "request"})
    assert answer.status_code == 403, answer.content
    assert answer.json()["error"]["code"] == "second_admin_required"
    assert Event.objects.get(thread=first, seq=1).data["content"].endswith(EMAIL)
    assert not Redaction.objects.exists()
    dry = post(admin, "/api/v1/redactions/", {"query": EMAIL, "reason": "r", "dry_run": True})
    assert task_report(admin, dry.json()["task_id"])["events"] == 4
    # Turned on after the run was queued: the task refuses when it starts.
    with pytest.raises(SecondAdminRequired):
        subject_erase(
            workspace_id=workspace.pk,
            actor_id=get_user_model().objects.get(username="admin-x").pk,
            value=EMAIL,
            reason="queued before",
            dry_run=False,
        )
    assert not Redaction.objects.exists()
