"""Secrets at ingest (docs/event-log.md, "Secrets at ingest"; docs/api.md, "Append — `POST`
(agents)"): an agent posts a tool result holding a real-looking key, and the event answer, the log,
the thread answer, the list filter, the timeline and the thread list flag it, `/metrics` and the
Operations page count it; the secret itself is in none of the flag, the audit, `/metrics`, the
Operations page or the log output. Ordinary events carry no flag; the chain still verifies, the
flag being derived and outside it; CTXADMIN_DETECT_SECRETS=0 turns detection off."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client as BrowserClient
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from tests import factories
from tests.api.conftest import post_json
from threads.domain.canonical import canonical_text
from threads.models import AuditEntry, Event, Thread
from threads.selectors import event_dicts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

# AWS's documented example key pair and made-up tokens in real formats.
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "R2d2C3po" * 4 + "bb8x"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
SECRET_TEXTS = (AWS_KEY_ID, AWS_SECRET, GITHUB_TOKEN, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE")

AWS_FLAG = {"type": "AWS Access Key", "field": "result.credentials.access_key_id"}


def leaked_result() -> dict[str, Any]:
    """A tool result an agent got back from a `read_config` tool, keys and all."""
    return factories.result(
        "c1",
        value={
            "credentials": {
                "access_key_id": AWS_KEY_ID,
                "config": f"aws_secret_access_key = '{AWS_SECRET}'",
            },
            "deploy_token": GITHUB_TOKEN,
            "ssh_key": PRIVATE_KEY,
        },
    )


LEAK_FLAGS = [
    AWS_FLAG,
    {"type": "AWS Access Key", "field": "result.credentials.config"},
    {"type": "GitHub Token", "field": "result.deploy_token"},
    {"type": "Private Key", "field": "result.ssh_key"},
]


def metric(name: str, settings: Any) -> tuple[float, str]:
    settings.CTXADMIN_METRICS_TOKEN = "t"
    page = BrowserClient().get("/metrics", HTTP_AUTHORIZATION="Bearer t")
    assert page.status_code == 200
    text = page.content.decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value, text
    raise AssertionError(f"no {name}")


def no_secret_in(text: str) -> None:
    for secret in SECRET_TEXTS:
        assert secret not in text


def test_a_leaked_key_is_flagged_everywhere_and_shown_nowhere(
    agent: APIClient,
    thread: Thread,
    events_url: str,
    workspace: Any,
    settings: Any,
    caplog: Any,
) -> None:
    before, _ = metric("ctxadmin_events_with_secrets_total", settings)
    # Every logger at INFO, ctxadmin's own at DEBUG too. (Not Django's template engine at
    # DEBUG: it logs the whole context of a variable it fails to look up, event bodies and all,
    # whatever they hold; no deployment runs it so, CTXADMIN_LOG_LEVEL being WARNING.)
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.INFO, logger="django")
    for own in ("threads", "ctxadmin", "integrations"):
        caplog.set_level(logging.DEBUG, logger=own)
    clean = factories.make_thread(workspace, external_id="clean-thread")
    post_json(agent, f"/api/v1/threads/{clean.pk}/events/", factories.user("nothing to see"))

    answer = post_json(
        agent,
        events_url,
        {
            "events": [
                factories.user("Deploy the service with the staging config"),
                factories.call("c1", "read_config", {"path": "deploy/staging.env"}),
                leaked_result(),
                factories.assistant("I read the config and will deploy now."),
            ]
        },
    )
    assert answer.status_code == 201, answer.content
    events = answer.json()
    assert [("secrets" in e) for e in events] == [False, False, True, False]
    assert events[2]["secrets"] == LEAK_FLAGS
    no_secret_in(canonical_text(events[2]["secrets"]))

    # The log as read back, the event row, and a replay say the same.
    page = agent.get(events_url).json()["events"]
    assert [e.get("secrets") for e in page] == [None, None, LEAK_FLAGS, None]
    assert Event.objects.get(thread=thread, seq=3).secrets == LEAK_FLAGS
    assert Event.objects.filter(thread=thread, secrets__isnull=True).count() == 3

    # The thread counts it; the list filters on it.
    detail = agent.get(f"/api/v1/threads/{thread.pk}/").json()
    assert detail["events_with_secrets"] == 1
    assert agent.get(f"/api/v1/threads/{clean.pk}/").json()["events_with_secrets"] == 0
    listed = agent.get("/api/v1/threads/", {"has_secrets": "1"}).json()
    assert [t["external_id"] for t in listed["results"]] == [thread.external_id]
    unlisted = agent.get("/api/v1/threads/", {"has_secrets": "0"}).json()
    assert [t["external_id"] for t in unlisted["results"]] == [clean.external_id]

    # /metrics counts it, with nothing of the secret.
    after, text = metric("ctxadmin_events_with_secrets_total", settings)
    assert after == before + 1
    no_secret_in(text)

    # People: the timeline's badge, the list's filter and badge, the Operations page's count.
    person = BrowserClient()
    person.force_login(factories.make_person(workspace, "olga", "operator"))
    timeline = person.get(f"/threads/{thread.pk}/").content.decode()
    assert "secret: AWS Access Key in result.credentials.access_key_id" in timeline
    assert "secret: Private Key in result.ssh_key" in timeline
    assert timeline.count('class="badge badge-bad secret-flag"') == 4
    threads_page = person.get("/threads/", {"secrets": "1"}).content.decode()
    assert "1 event with secrets" in threads_page
    assert thread.external_id in threads_page and clean.external_id not in threads_page
    operations = person.get("/operations/").content.decode()
    assert 'id="secrets-total">1<' in operations
    no_secret_in(operations)

    # Nothing was audited with it, and nothing logged it.
    no_secret_in(canonical_text(list(AuditEntry.objects.values("before", "after", "action"))))
    no_secret_in(caplog.text)


def test_ordinary_events_carry_no_flag(agent: APIClient, thread: Thread, events_url: str) -> None:
    answer = post_json(
        agent,
        events_url,
        {
            "events": [
                factories.user("What is the status of reservation 4WQ150? My id is chen_3290."),
                factories.call("c1", "get_reservation", {"reservation_id": "4WQ150"}),
                factories.result(
                    "c1",
                    value={
                        "reservation_id": "4WQ150",
                        "request_uuid": "123e4567-e89b-12d3-a456-426614174000",
                        "receipt_sha256": (
                            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                        ),
                        "flights": [{"flight_number": "HAT170", "price": 1048}],
                        "note": "password reset link sent; see https://example.com/help",
                    },
                ),
                factories.assistant("Your reservation is confirmed for May 22."),
            ]
        },
    )
    assert answer.status_code == 201, answer.content
    assert all("secrets" not in e for e in answer.json())
    assert not Event.objects.filter(thread=thread, secrets__isnull=False).exists()
    thread.refresh_from_db()
    assert thread.events_with_secrets == 0


def test_a_batch_flags_only_the_right_events_and_the_chain_verifies(
    agent: APIClient, thread: Thread, events_url: str, workspace: Any
) -> None:
    bodies: list[dict[str, Any]] = [factories.user(f"question {n}") for n in range(6)]
    bodies[1] = factories.user(f"my key is {AWS_KEY_ID}, keep it")
    bodies[4] = {
        "kind": "annotation",
        "type": "fact",
        "authority": "tool",
        "payload": {"key": "db_url", "value": "postgres://app:s3cr3t-pw@db.internal:5432/prod"},
    }
    answer = post_json(agent, events_url, {"events": bodies})
    assert answer.status_code == 201, answer.content
    flags = [e.get("secrets") for e in answer.json()]
    assert flags == [
        None,
        [{"type": "AWS Access Key", "field": "content"}],
        None,
        None,
        [{"type": "Basic Auth Credentials", "field": "payload.value"}],
        None,
    ]
    thread.refresh_from_db()
    assert thread.events_with_secrets == 2

    # The flag is derived: the chain covers the stored form without it, and still verifies.
    out = io.StringIO()
    call_command("verify_chains", stdout=out, stderr=io.StringIO())
    assert "OK" in out.getvalue() and "BROKEN" not in out.getvalue().upper()
    stored = event_dicts(thread)
    assert [e["hash"] for e in stored] == [a["hash"] for a in answer.json()]
    assert [e.get("secrets") for e in stored] == flags

    # A replay answers with the original, flag included.
    again = post_json(agent, events_url, {**bodies[1], "client_event_id": "k-1"})
    replay = post_json(agent, events_url, {**bodies[1], "client_event_id": "k-1"})
    assert replay.status_code == 200
    assert replay.json()["secrets"] == again.json()["secrets"]
    assert replay.json()["replayed"] is True

    # The other appenders (an import, the LangGraph mirror, a fork's copy) flag too.
    (row,) = factories.append(thread, factories.assistant(f"the token is {GITHUB_TOKEN}"))
    assert row.secrets == [{"type": "GitHub Token", "field": "content"}]
    thread.refresh_from_db()
    assert thread.events_with_secrets == 4


def test_detection_can_be_turned_off(
    agent: APIClient, thread: Thread, events_url: str, settings: Any
) -> None:
    settings.CTXADMIN_DETECT_SECRETS = False
    answer = post_json(agent, events_url, factories.user(f"key {AWS_KEY_ID}"))
    assert answer.status_code == 201
    assert "secrets" not in answer.json()
    thread.refresh_from_db()
    assert thread.events_with_secrets == 0
    settings.CTXADMIN_DETECT_SECRETS = True
    answer = post_json(agent, events_url, factories.user(f"key {AWS_KEY_ID}"))
    assert answer.json()["secrets"] == [{"type": "AWS Access Key", "field": "content"}]
    thread.refresh_from_db()
    assert thread.events_with_secrets == 1


def test_a_large_batch_carries_its_flags_in_the_copy(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    """From COPY_MIN_ROWS events a batch goes in with COPY on PostgreSQL: the flags with it."""
    bodies = [factories.user(f"line {n}") for n in range(120)]
    bodies[77] = factories.user(f"the deploy key: {GITHUB_TOKEN}")
    answer = post_json(agent, events_url, {"events": bodies})
    assert answer.status_code == 201, answer.content
    assert [e["seq"] for e in answer.json() if "secrets" in e] == [78]
    stored = Event.objects.filter(thread=thread, secrets__isnull=False)
    assert list(stored.values_list("seq", "secrets")) == [
        (78, [{"type": "GitHub Token", "field": "content"}])
    ]
    thread.refresh_from_db()
    assert thread.events_with_secrets == 1
