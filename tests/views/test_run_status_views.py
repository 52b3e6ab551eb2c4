"""Run status on the dashboard (docs/dashboard.md, "Run status"): the header's chip and what
the agent has to pick up, a decided approval's "picked up" in the queue and on the timeline,
the list's filter."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests import factories as f
from tests.api.test_run_status import ask_approval, decide
from threads.models import Thread, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]


def signed_in(workspace: Workspace, role: str = "operator") -> Client:
    client = Client()
    client.force_login(f.make_person(workspace, f"{role}-v", role))
    return client


def test_the_card_and_the_header_follow_the_pickup(
    workspace: Workspace, thread: Thread, agent: APIClient
) -> None:
    approval = ask_approval(thread)
    decide(workspace, approval)
    person = signed_in(workspace)
    queue = person.get(f"/approvals/?thread={thread.external_id}&status=any").content.decode()
    assert 'data-picked-up="no"' in queue and 'data-picked-up="yes"' not in queue
    page = person.get(f"/threads/{thread.pk}/").content.decode()
    assert 'data-run-status="waiting_for_agent"' in page
    assert "approval decided" in page and "approve: checked the order" in page
    assert 'data-picked-up="no"' in page  # the request's card on the timeline

    assert agent.get(f"/api/v1/threads/{thread.pk}/approvals/").status_code == 200
    queue = person.get(f"/approvals/?thread={thread.external_id}&status=any").content.decode()
    assert 'data-picked-up="yes"' in queue and 'data-picked-up="no"' not in queue
    page = person.get(f"/threads/{thread.pk}/").content.decode()
    assert 'data-run-status="running"' in page and "agent-pickups" not in page


def test_a_decision_from_before_reads_were_recorded_claims_nothing(
    workspace: Workspace, thread: Thread
) -> None:
    decide(workspace, ask_approval(thread))
    # As a database migrated with decisions already made: no read, nothing owed.
    Thread.objects.filter(pk=thread.pk).update(
        agent_owed_at=None, agent_owed_since=None, agent_read_at=None
    )
    queue = signed_in(workspace).get(f"/approvals/?thread={thread.external_id}&status=any")
    assert "data-picked-up" not in queue.content.decode()


def test_the_list_filters_by_run_status(workspace: Workspace, thread: Thread) -> None:
    decide(workspace, ask_approval(thread))
    f.append(f.make_thread(workspace, external_id="chatty"), f.user("hi"))
    person = signed_in(workspace)
    page = person.get("/threads/?run_status=waiting_for_agent").content.decode()
    assert f">{thread.external_id}</a>" in page and ">chatty</a>" not in page
    assert '<option value="waiting_for_agent" selected>' in page
    page = person.get("/threads/?run_status=running").content.decode()
    assert ">chatty</a>" in page and f">{thread.external_id}</a>" not in page
