"""Threads per run status in /metrics and on the Operations page (docs/dashboard.md,
"Run status")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests import factories as f
from tests.api.test_run_status import LONG_AGO, ask_approval, decide, quiet
from tests.metrics.test_metrics_endpoint import TOKEN, one, scrape
from threads.models import Thread, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]


def one_of_each(workspace: Workspace) -> None:
    """A thread in each run status: running, idle, waiting for a person, waiting for its
    agent, stalled (two of them)."""
    f.append(f.make_thread(workspace, external_id="running"), f.user("hi"))
    quiet(f.make_thread(workspace, external_id="idle"))
    person = f.make_thread(workspace, external_id="person")
    ask_approval(person)
    waiting = f.make_thread(workspace, external_id="agent")
    decide(workspace, ask_approval(waiting))
    for name in ("stalled-1", "stalled-2"):
        stalled = f.make_thread(workspace, external_id=name)
        decide(workspace, ask_approval(stalled))
        Thread.objects.filter(pk=stalled.pk).update(agent_owed_since=timezone.now() - LONG_AGO)


def test_metrics_count_threads_per_run_status(workspace: Workspace, settings: Any) -> None:
    settings.CTXADMIN_METRICS_TOKEN = TOKEN
    one_of_each(workspace)
    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    counts = {
        status: one(samples, "ctxadmin_threads", run_status=status)
        for status in ("running", "idle", "waiting_for_person", "waiting_for_agent", "stalled")
    }
    assert counts == {
        "running": 1,
        "idle": 1,
        "waiting_for_person": 1,
        "waiting_for_agent": 1,
        "stalled": 2,
    }
    # The workspace's setting moves the line: with three hours, a two-hour wait is no stall.
    Workspace.objects.filter(pk=workspace.pk).update(
        stall_after_seconds=int(timedelta(hours=3).total_seconds())
    )
    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert one(samples, "ctxadmin_threads", run_status="stalled") == 0
    assert one(samples, "ctxadmin_threads", run_status="waiting_for_agent") == 3


def test_the_operations_page_counts_threads_per_run_status(workspace: Workspace) -> None:
    one_of_each(workspace)
    client = Client()
    client.force_login(f.make_person(workspace, "olga", "operator"))
    page = client.get("/operations/").content.decode()
    for status, n in (("stalled", 2), ("waiting_for_agent", 1), ("idle", 1)):
        assert f'?run_status={status}" data-run-status="{status}">' in page, status
        link = page.split(f'data-run-status="{status}">', 1)[1]
        assert f'<strong class="run-status-count">{n}</strong>' in link.split("</li>", 1)[0]
