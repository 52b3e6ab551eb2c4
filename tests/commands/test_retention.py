"""`apply_retention [--workspace NAME] [--dry-run]`, the retention settings of
`workspace_settings`, the beat task, and what `verify_chains` says of deleted threads
(docs/operations.md, "Retention")."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from tests import factories as f
from tests.services.chain_heads_setup import fill, heads_dir
from threads.models import AuditEntry, Event, Thread, ThreadTombstone, Workspace
from threads.services.chain_heads import chain_heads_publish
from threads.tasks import apply_retention_task

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

__all__ = ["heads_dir"]


def _old(workspace: Workspace, external_id: str, days: int = 40) -> Thread:
    thread = f.make_thread(workspace, external_id=external_id)
    fill(thread, 3)
    f.age(thread, days)
    return thread


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_the_settings_then_a_dry_run_then_the_run(workspace: Workspace) -> None:
    old = _old(workspace, "old-1")
    _old(workspace, "recent", days=3)
    shown = _run("workspace_settings", workspace.name, "--retention-days", "30")
    assert "retention_days 30" in shown and "keep_checkpoints none" in shown
    assert AuditEntry.objects.get(action="workspace.settings").after == {"retention_days": 30}

    dry = _run("apply_retention", "--workspace", workspace.name, "--dry-run")
    assert f"THREAD acme/old-1 ({old.pk})" in dry and "recent" not in dry
    assert "acme: would delete 1 thread(s) and 0 checkpoint(s)" in dry
    assert Event.objects.filter(thread=old).count() == 3

    done = _run("apply_retention")
    assert "acme: deleted 1 thread(s)" in done
    assert not Thread.objects.filter(pk=old.pk).exists()
    assert Thread.objects.filter(external_id="recent").exists()
    assert ThreadTombstone.objects.filter(thread_uid=old.pk).exists()


def test_the_settings_and_the_command_refuse_what_makes_no_sense(workspace: Workspace) -> None:
    with pytest.raises(CommandError, match="at least 1"):
        call_command("workspace_settings", workspace.name, "--keep-checkpoints", "0")
    with pytest.raises(CommandError, match="no workspace"):
        call_command("apply_retention", "--workspace", "nowhere")
    assert "none" in _run("workspace_settings", workspace.name, "--retention-days", "none")
    assert Workspace.objects.get(pk=workspace.pk).retention_days is None


def test_the_beat_task_applies_the_policy(workspace: Workspace) -> None:
    old = _old(workspace, "old-2")
    Workspace.objects.filter(pk=workspace.pk).update(retention_days=30)
    assert "ctxadmin.apply_retention" in {
        entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()
    }
    [summary] = apply_retention_task.apply().get()
    assert summary["threads_deleted"] == 1 and summary["bytes"] > 0
    assert not Thread.objects.filter(pk=old.pk).exists()


def test_verify_chains_explains_a_retention_and_still_fails_a_truncation(
    workspace: Workspace, heads_dir: Path, settings: Any
) -> None:
    old = _old(workspace, "old-3")
    cut = _old(workspace, "cut", days=1)
    chain_heads_publish()
    Workspace.objects.filter(pk=workspace.pk).update(retention_days=30)
    call_command("apply_retention", stdout=StringIO())

    out = _run("verify_chains")
    assert f"DELETED acme/({old.pk}) deleted by retention at" in out
    assert "tombstone verifies" in out
    assert _run("verify_chains", "--thread", str(old.pk)).startswith(f"DELETED acme/({old.pk})")

    with f.log_unsealed():
        AuditEntry.objects.filter(thread=cut).delete()
        Event.objects.filter(thread=cut).delete()
        Thread.objects.filter(pk=cut.pk).delete()
    printed = StringIO()
    with pytest.raises(CommandError, match="1 chain"):
        call_command("verify_chains", stdout=printed)
    assert f"BROKEN acme/({cut.pk}) first bad seq 1" in printed.getvalue()
    assert "truncated" in printed.getvalue()
    with pytest.raises(CommandError, match="1 chain"):
        call_command("verify_chains", "--thread", str(cut.pk), stdout=StringIO())
