"""`workspace_settings NAME --stall-after SECONDS` (docs/api.md, "Commands"): when a thread that
waits for its agent reads as stalled."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.api.test_run_status import ask_approval, decide, status_of
from threads.models import AuditEntry, Thread, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]


def test_the_stall_setting_decides_when_a_wait_is_a_stall(
    workspace: Workspace, thread: Thread, agent: APIClient
) -> None:
    decide(workspace, ask_approval(thread))
    Thread.objects.filter(pk=thread.pk).update(
        agent_owed_since=timezone.now() - timedelta(minutes=10)
    )
    assert status_of(agent, thread)["run_status"] == "waiting_for_agent"  # 15 minutes
    out = StringIO()
    call_command("workspace_settings", workspace.name, "--stall-after", "300", stdout=out)
    assert out.getvalue().splitlines() == [
        "stall_after_seconds 300",
        "redact_secrets_at_ingest off",
    ]
    assert status_of(agent, thread)["run_status"] == "stalled"
    entry = AuditEntry.objects.get(action="workspace.settings")
    assert entry.before == {"stall_after_seconds": 900}
    assert entry.after == {"stall_after_seconds": 300}


def test_a_stall_setting_below_a_second_is_refused(workspace: Workspace) -> None:
    with pytest.raises(CommandError, match="at least 1"):
        call_command("workspace_settings", workspace.name, "--stall-after", "0")
    with pytest.raises(CommandError, match="no workspace"):
        call_command("workspace_settings", "nowhere")
    assert Workspace.objects.get(pk=workspace.pk).stall_after_seconds == 900
