"""Redaction in the dashboard (docs/event-log.md, "Redaction"): an admin's Redact form on each event
card (reason and confirmation required), the secret badge's one-click redaction, and the card of a
redacted event: who, when and why, nothing of the content."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests import factories as f
from threads.models import Event, Thread

pytestmark = pytest.mark.django_db

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def leaky(workspace: Any) -> Thread:
    thread = f.make_thread(workspace, "leaky")
    f.append(thread, f.user("deploy"), f.user(f"my key is {SECRET}"), f.assistant("ok"))
    return thread


def _page(client: Client, thread: Thread) -> str:
    answer = client.get(f"/threads/{thread.pk}/")
    assert answer.status_code == 200
    return answer.content.decode()


def test_an_admin_redacts_from_the_card_and_the_card_says_who_when_and_why(
    admin: Client, operator: Client, leaky: Thread
) -> None:
    assert f"/threads/{leaky.pk}/events/1/redact/" in _page(admin, leaky)
    assert "/redact/" not in _page(operator, leaky)
    url = f"/threads/{leaky.pk}/events/1/redact/"
    assert operator.post(url, {"reason": "x", "confirm": "1"}).status_code == 403
    unconfirmed = admin.post(url, {"reason": "typo"})
    assert unconfirmed.status_code == 400
    assert "user" in str(Event.objects.get(thread=leaky, seq=1).data)
    assert "content" in Event.objects.get(thread=leaky, seq=1).data
    answer = admin.post(url, {"reason": "typo of a customer", "confirm": "1"})
    assert answer.status_code in (302, 303)
    assert "content" not in Event.objects.get(thread=leaky, seq=1).data
    page = _page(admin, leaky)
    assert "Content redacted by admin" in page and "typo of a customer" in page
    assert f"/threads/{leaky.pk}/events/1/redact/" not in page  # not twice


def test_the_secret_badge_redacts_in_one_click(admin: Client, leaky: Thread) -> None:
    page = _page(admin, leaky)
    assert SECRET in page and "· redact" in page
    answer = admin.post(
        f"/threads/{leaky.pk}/events/2/redact/",
        {"reason": "secret found at ingest: AWS Access Key in content", "confirm": "1"},
    )
    assert answer.status_code in (302, 303)
    page = _page(admin, leaky)
    assert SECRET not in page and "secret found at ingest: AWS Access Key" in page
