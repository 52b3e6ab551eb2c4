"""A thread whose chain is broken says so wherever its history is served: the API's working
context carries the integrity verdict, and every thread page shows a banner
(docs/api.md, "Working context — `GET /api/v1/threads/{id}/context/`", docs/repairs.md,
"Checkpoints, rollback, fork")."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from tests.services.test_checkpoints import two_versions
from threads.models import Event, Thread
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db


@pytest.fixture
def broken(thread: Thread) -> Thread:
    """Checkpoints on the thread, its chain verified, then event 6 edited in place and the
    break recorded by the integrity check."""
    two_versions(thread)
    f.append(thread, f.user("one more"))
    integrity_check(thread=thread, full=True)
    f.tamper(Event.objects.get(thread=thread, seq=6), tool_name="refund_everything")
    verdict = integrity_check(thread=thread, full=True)
    assert not verdict.ok and verdict.first_bad_seq == 6
    thread.refresh_from_db()
    return thread


def test_the_working_context_carries_a_broken_chain(agent: APIClient, broken: Thread) -> None:
    answer = agent.get(f"/api/v1/threads/{broken.pk}/context/")
    assert answer.status_code == 200
    integrity = answer.json()["integrity"]
    assert integrity.pop("verified_at")
    assert integrity == {
        "chain_ok": False,
        "first_bad_seq": 6,
        "verified_until": 5,
        "reaches_break": True,
    }


def test_the_working_context_of_a_sound_chain(agent: APIClient, thread: Thread) -> None:
    f.append(thread, f.user("hello"))
    integrity_check(thread=thread)
    integrity = agent.get(f"/api/v1/threads/{thread.pk}/context/").json()["integrity"]
    assert integrity.pop("verified_at")
    assert integrity == {
        "chain_ok": True,
        "first_bad_seq": None,
        "verified_until": 1,
        "reaches_break": False,
    }


def test_the_working_context_of_a_never_verified_chain_says_so(
    agent: APIClient, thread: Thread
) -> None:
    f.append(thread, f.user("hello"))
    integrity = agent.get(f"/api/v1/threads/{thread.pk}/context/").json()["integrity"]
    assert integrity["verified_at"] is None and integrity["reaches_break"] is False


@pytest.mark.parametrize("read", ["WorkingContext", "LanggraphTuple"])
def test_the_schema_documents_the_integrity_of_every_resume_read(
    client: Client, db: Any, read: str
) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    context = schema["components"]["schemas"][read]
    assert "integrity" in context["required"]
    prop = context["properties"]["integrity"]
    ref = (prop.get("$ref") or prop["allOf"][0]["$ref"]).rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][ref]["properties"]) == {
        "chain_ok",
        "first_bad_seq",
        "verified_until",
        "verified_at",
        "reaches_break",
    }


@pytest.mark.parametrize("tail", ["", "context/", "summaries/", "summaries/1/", "checkpoints/"])
def test_every_thread_page_shows_a_broken_chain_banner(
    operator: Client, broken: Thread, tail: str
) -> None:
    page = operator.get(f"/threads/{broken.pk}/{tail}")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'class="alert alert-bad chain-broken" role="alert"' in body
    assert "chain is broken at event" in body and f"/threads/{broken.pk}/?seq=6" in body


def test_a_sound_chain_shows_no_banner(operator: Client, thread: Thread) -> None:
    f.append(thread, f.user("hello"))
    integrity_check(thread=thread)
    assert "chain-broken" not in operator.get(f"/threads/{thread.pk}/").content.decode()


def _problem_styled(body: str, words: str) -> bool:
    """Whether `words` sit in a badge or an alert (what reads as a problem)."""
    import re

    return bool(re.search(r'class="[^"]*(badge|alert)[^"]*"[^>]*>[^<]*' + words, body))


def test_a_chain_not_checked_yet_reads_as_no_problem(operator: Client, thread: Thread) -> None:
    """A fresh thread (no sweep yet): its header says so in plain words, its list row shows no
    problem, the Integrity page neither; only a broken chain is styled as a problem."""
    f.append(thread, f.user("hello"))
    header = operator.get(f"/threads/{thread.pk}/").content.decode()
    assert "not checked yet" in header and not _problem_styled(header, "not checked yet")
    assert "not verified yet" not in header
    listing = operator.get("/threads/").content.decode()
    assert "chain" not in listing.split(thread.external_id, 1)[1].split("</tr>", 1)[0]
    integrity = operator.get("/integrity/").content.decode()
    assert "not checked yet" in integrity and not _problem_styled(integrity, "not checked yet")


def test_a_broken_chain_is_a_problem_in_the_header_and_the_list(
    operator: Client, broken: Thread
) -> None:
    header = operator.get(f"/threads/{broken.pk}/").content.decode()
    assert _problem_styled(header, "broken at 6")
    assert _problem_styled(operator.get("/threads/").content.decode(), "chain broken @6")
