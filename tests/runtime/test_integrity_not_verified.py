"""`GET .../integrity/` of a thread no check has looked at yet says so (docs/api.md,
"Integrity — `POST /api/v1/threads/{id}/verify/`, `GET /api/v1/threads/{id}/integrity/`"): never
`chain_ok: true` with `verified_until: 0`, which read as "the chain verified" when nothing was
checked."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.factories import tamper
from tests.runtime.test_integrity import fill, verify
from threads.models import Thread

pytestmark = pytest.mark.django_db


def integrity(agent: APIClient, thread: Thread) -> dict[str, Any]:
    answer = agent.get(f"/api/v1/threads/{thread.pk}/integrity/")
    assert answer.status_code == 200
    return answer.json()


def test_a_never_verified_thread_is_not_verified_then_ok_once_checked(
    agent: APIClient, thread: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    events = fill(thread, units=2)
    never = integrity(agent, thread)
    assert never["status"] == "not_verified"
    assert never["verified"] is False
    assert never["chain_ok"] is None  # not true: nothing established it
    assert (never["verified_until"], never["verified_at"]) == (0, None)

    verify(agent, thread, django_capture_on_commit_callbacks)
    checked = integrity(agent, thread)
    assert (checked["status"], checked["verified"], checked["chain_ok"]) == ("ok", True, True)
    assert checked["verified_until"] == len(events)


def test_a_broken_chain_stays_broken_in_the_answer(
    agent: APIClient, thread: Thread, eager_tasks: None, django_capture_on_commit_callbacks: Any
) -> None:
    events = fill(thread, units=2)
    tamper(events[2], result={"order": 1, "status": "refunded"})  # seq 3
    verify(agent, thread, django_capture_on_commit_callbacks)
    broken = integrity(agent, thread)
    assert (broken["status"], broken["verified"], broken["chain_ok"]) == ("broken", True, False)
    assert broken["first_bad_seq"] == 3
