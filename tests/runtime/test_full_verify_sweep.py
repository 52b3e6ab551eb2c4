"""The scheduled sweep re-verifies every thread from genesis over CTXADMIN_FULL_VERIFY_PERIOD,
so an in-place edit of an event it verified once is caught without a manual verify; the
integrity page and API say when each thread was last fully verified (docs/repairs.md,
"Integrity sweep")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tests import factories
from tests.factories import tamper
from tests.runtime.test_integrity import fill
from threads.models import Event, Thread
from threads.tasks import integrity_sweep_task

pytestmark = pytest.mark.django_db


def _age(thread: Thread, by: timedelta) -> None:
    """As if the thread's last full verification were `by` ago."""
    Thread.objects.filter(pk=thread.pk).update(fully_verified_at=timezone.now() - by)


def test_with_a_short_period_every_sweep_catches_an_edit_of_a_verified_event(
    workspace: Any, settings: Any
) -> None:
    settings.CTXADMIN_FULL_VERIFY_PERIOD = timedelta(seconds=1)
    thread = factories.make_thread(workspace, "order-1")
    fill(thread, units=2)
    assert integrity_sweep_task() == {"checked": 1, "broken": []}
    thread.refresh_from_db()
    assert thread.chain_ok and thread.verified_until == 8

    tamper(Event.objects.get(thread=thread, seq=3), status="failed")
    assert integrity_sweep_task() == {
        "checked": 1,
        "broken": [{"thread": str(thread.pk), "first_bad_seq": 3}],
    }


def test_the_sweep_catches_an_edit_below_verified_until_once_the_period_has_passed(
    workspace: Any, settings: Any
) -> None:
    settings.CTXADMIN_FULL_VERIFY_PERIOD = timedelta(hours=24)
    thread = factories.make_thread(workspace, "order-1")
    fill(thread, units=2)
    assert integrity_sweep_task() == {"checked": 1, "broken": []}
    thread.refresh_from_db()
    assert thread.verified_until == 8 and thread.fully_verified_at is not None

    tamper(Event.objects.get(thread=thread, seq=2), content="something else")
    # Within the period the sweep stays incremental: the edit is below verified_until.
    assert integrity_sweep_task() == {"checked": 1, "broken": []}

    _age(thread, timedelta(hours=25))
    assert integrity_sweep_task() == {
        "checked": 1,
        "broken": [{"thread": str(thread.pk), "first_bad_seq": 2}],
    }
    thread.refresh_from_db()
    assert (thread.chain_ok, thread.first_bad_seq) == (False, 2)
    assert thread.fully_verified_at is not None
    assert timezone.now() - thread.fully_verified_at < timedelta(minutes=1)


def test_each_sweep_fully_verifies_a_bounded_share_oldest_first(
    workspace: Any, settings: Any
) -> None:
    # 12 threads, a sweep every 10 minutes, a period of one hour: 2 full checks per sweep
    # re-verify all 12 within the period.
    settings.CTXADMIN_FULL_VERIFY_PERIOD = timedelta(hours=1)
    threads = [factories.make_thread(workspace, f"t-{n}") for n in range(12)]
    for thread in threads:
        fill(thread, units=1)
    integrity_sweep_task()  # first sight: every walk starts at genesis
    for n, thread in enumerate(threads):
        _age(thread, timedelta(hours=2, minutes=n))  # t-11 is the oldest
        tamper(Event.objects.get(thread=thread, seq=1), content="edited")

    result = integrity_sweep_task()
    assert [b["thread"] for b in result["broken"]] == [str(threads[11].pk), str(threads[10].pk)]
    for _ in range(5):
        integrity_sweep_task()
    assert not Thread.objects.filter(chain_ok=True).exists()


def test_the_page_and_the_api_say_when_a_thread_was_last_fully_verified(
    workspace: Any, agent: APIClient
) -> None:
    thread = factories.make_thread(workspace, "order-1")
    fill(thread, units=1)
    never = agent.get(f"/api/v1/threads/{thread.pk}/integrity/").json()
    assert never["fully_verified_at"] is None
    integrity_sweep_task()
    thread.refresh_from_db()
    assert thread.fully_verified_at is not None
    stamp = thread.fully_verified_at.isoformat()
    answer = agent.get(f"/api/v1/threads/{thread.pk}/integrity/").json()
    assert answer["fully_verified_at"] == stamp

    person = Client()
    person.force_login(factories.make_person(workspace, "ops", "operator"))
    page = person.get("/integrity/").content.decode()
    assert "Fully verified" in page and f'datetime="{stamp}"' in page
