"""Retention (docs/operations.md, "Retention"): threads past a workspace's retention period go
with every row of theirs and leave a signed tombstone; checkpoints beyond the latest K go unless
something needs them; the published heads tell a deletion by retention from a truncation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, models, transaction

from integrations.trace_imports.models import TraceImport
from tests import factories as f
from tests.services.chain_heads_setup import fill, heads_dir
from tests.services.test_checkpoints import fold, two_versions
from threads.database.guard import retention_delete_opened
from threads.domain.tombstones import tombstone_signature
from threads.models import (
    AuditEntry,
    Checkpoint,
    Event,
    SideEffect,
    SideEffectStatus,
    Thread,
    ThreadTombstone,
    Workspace,
)
from threads.selectors.retention import deleted_threads_verdicts, tombstone_check, tombstone_fields
from threads.services import retention
from threads.services.chain_heads import chain_heads_publish
from threads.services.checkpoints import checkpoint_create
from threads.services.integrity import checkpoint_is_safe
from threads.services.redaction import event_redact
from threads.services.retention import ThreadDeleter, retention_apply
from threads.services.rollback import checkpoint_rollback
from threads.services.side_effects import side_effect_resolve

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]

__all__ = ["heads_dir"]

SECRET = "customer 4111-1111-1111-1111 wants a refund"


def _policy(workspace: Workspace, **policy: Any) -> None:
    Workspace.objects.filter(pk=workspace.pk).update(**policy)


def _rows_of(thread_id: Any) -> dict[str, int]:
    """Every row of every model (core and integrations) that names the thread."""
    counts = {}
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, models.ForeignKey) and field.related_model is Thread:
                counts[f"{model._meta.db_table}.{field.name}"] = model._default_manager.filter(
                    **{field.name: thread_id}
                ).count()
    counts["threads_thread"] = Thread.objects.filter(pk=thread_id).count()
    return counts


def _old_thread_with_everything(workspace: Workspace, admin: Any) -> Thread:
    thread = f.make_thread(workspace, external_id="old-order")
    f.append(thread, f.user(SECRET))
    two_versions(thread)  # summaries, checkpoints, a side effect left unknown
    effect = SideEffect.objects.get(thread=thread)
    side_effect_resolve(
        side_effect=effect, status=SideEffectStatus.SUCCEEDED, actor=admin, evidence="ok"
    )
    checkpoint_create(thread=thread, label="by hand", actor=admin)
    # A redacted event too: its record goes with the thread.
    f.append(thread, f.user("my card is 5500 0000 0000 0004"))
    thread.refresh_from_db()
    event_redact(thread=thread, seq=thread.last_seq, actor=admin, reason="a card number")
    thread.refresh_from_db()
    f.age(thread, 40)
    return thread


@pytest.fixture
def admin(workspace: Workspace) -> Any:
    return f.make_person(workspace, "root", "admin")


def test_a_thread_past_retention_goes_with_every_row_and_leaves_a_tombstone(
    workspace: Workspace, admin: Any
) -> None:
    old = _old_thread_with_everything(workspace, admin)
    recent = f.make_thread(workspace, external_id="recent")
    fill(recent, 3)
    _policy(workspace, retention_days=30)
    before_recent = _rows_of(recent.pk)

    [outcome] = retention_apply(workspace_name=workspace.name)

    assert [line["external_id"] for line in outcome.threads] == ["old-order"]
    assert outcome.bytes > 0
    assert set(_rows_of(old.pk).values()) == {0}
    assert _rows_of(recent.pk) == before_recent
    # Nothing of the content is left anywhere: not in the events, not in an audit entry.
    assert not Event.objects.filter(data__icontains="4111").exists()
    for entry in AuditEntry.objects.exclude(action="retention.apply"):
        assert "4111" not in str(entry.before) + str(entry.after)
    # The audit trail still says who did what when; the run has an entry of its own.
    assert AuditEntry.objects.filter(action="side_effect.resolve", thread=None).exists()
    run = AuditEntry.objects.get(action="retention.apply")
    assert (
        run.after is not None
        and run.after["threads_deleted"] == 1
        and run.actor_label == "retention policy"
    )
    tombstone = ThreadTombstone.objects.get(thread_uid=old.pk)
    assert (tombstone.last_seq, tombstone.chain_head) == (old.last_seq, old.chain_head)
    assert tombstone.external_id_sha256 != "old-order"
    assert tombstone_check(tombstone)


@pytest.mark.parametrize("change", ["signature", "last_seq", "reason"])
def test_a_forged_tombstone_does_not_verify(workspace: Workspace, admin: Any, change: str) -> None:
    old = _old_thread_with_everything(workspace, admin)
    _policy(workspace, retention_days=30)
    retention_apply(workspace_name=workspace.name)
    forged = {"signature": "0" * 64, "last_seq": old.last_seq + 5, "reason": "asked to"}[change]
    ThreadTombstone.objects.filter(thread_uid=old.pk).update(**{change: forged})
    assert not tombstone_check(ThreadTombstone.objects.get(thread_uid=old.pk))


def test_a_dry_run_lists_and_deletes_nothing(workspace: Workspace, admin: Any) -> None:
    old = _old_thread_with_everything(workspace, admin)
    _policy(workspace, retention_days=30, keep_checkpoints=1)
    before = _rows_of(old.pk)
    checkpoints = Checkpoint.objects.count()

    [outcome] = retention_apply(workspace_name=workspace.name, dry_run=True)

    assert [line["thread"] for line in outcome.threads] == [str(old.pk)]
    assert outcome.summary()["bytes"] > 0
    assert _rows_of(old.pk) == before
    assert Checkpoint.objects.count() == checkpoints
    assert not ThreadTombstone.objects.exists()
    assert not AuditEntry.objects.filter(action="retention.apply").exists()


def test_a_thread_someone_still_has_to_act_on_is_kept(workspace: Workspace) -> None:
    thread = f.make_thread(workspace, external_id="unknown-refund")
    two_versions(thread)  # its refund's outcome is unknown
    f.age(thread, 40)
    _policy(workspace, retention_days=30)
    [outcome] = retention_apply(workspace_name=workspace.name)
    assert outcome.threads == []
    assert Event.objects.filter(thread=thread).count() == thread.last_seq


def test_a_persons_recent_action_on_an_idle_thread_keeps_it(
    workspace: Workspace, admin: Any
) -> None:
    thread = f.make_thread(workspace, external_id="looked-at")
    fill(thread, 2)
    f.age(thread, 40)
    # Audited today; a checkpoint does not move the thread's `updated_at`.
    checkpoint_create(thread=thread, label="looked at", actor=admin)
    _policy(workspace, retention_days=30)
    [outcome] = retention_apply(workspace_name=workspace.name)
    assert outcome.threads == []
    assert Event.objects.filter(thread=thread).count() == 2


def test_no_policy_keeps_everything(workspace: Workspace, admin: Any) -> None:
    old = _old_thread_with_everything(workspace, admin)
    before = _rows_of(old.pk)
    assert retention_apply() == []
    assert _rows_of(old.pk) == before


def test_the_guard_lets_through_only_the_opened_threads_events(workspace: Workspace) -> None:
    one, two = f.make_thread(workspace, external_id="one"), f.make_thread(workspace, "two")
    fill(one, 2)
    fill(two, 2)
    sql = "DELETE FROM threads_event WHERE thread_id = %s"
    two_id = Thread._meta.pk.get_db_prep_value(two.pk, connection)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with retention_delete_opened(connection, one.pk), connection.cursor() as cursor:
            cursor.execute(sql, [two_id])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with retention_delete_opened(connection, one.pk), connection.cursor() as cursor:
            cursor.execute("UPDATE threads_event SET token_count = 0")
    # Closed again once the retention's statement is done.
    one_id = Thread._meta.pk.get_db_prep_value(one.pk, connection)
    with transaction.atomic():
        with retention_delete_opened(connection, one.pk), connection.cursor() as cursor:
            cursor.execute(sql, [one_id])
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, [two_id])
    assert Event.objects.filter(thread=one).count() == 0
    assert Event.objects.filter(thread=two).count() == 2


def test_checkpoints_beyond_k_go_but_not_the_ones_still_needed(
    workspace: Workspace, admin: Any
) -> None:
    thread = f.make_thread(workspace, external_id="long")
    first, unknown = two_versions(thread)  # `unknown` lists the refund whose outcome is unknown
    for n in range(3):
        f.append(thread, f.user(f"more {n}"), f.assistant(f"ok {n}"))
        fold(thread)
    latest = Checkpoint.objects.filter(thread=thread).order_by("-cursor", "-pk").first()
    assert latest is not None
    total = Checkpoint.objects.filter(thread=thread).count()
    _policy(workspace, keep_checkpoints=1)

    [outcome] = retention_apply(workspace_name=workspace.name)

    left = set(Checkpoint.objects.filter(thread=thread).values_list("pk", flat=True))
    assert left == {latest.pk, unknown.pk} and first.pk not in left
    assert outcome.checkpoints.deleted == total - 2 and outcome.checkpoints.bytes > 0
    # What stays still restores.
    assert checkpoint_is_safe(unknown)[0]
    thread.refresh_from_db()
    restored = checkpoint_rollback(
        thread=thread, checkpoint=unknown, actor=admin, reason="back to the refund"
    )
    assert restored is not None and restored.covered_until == unknown.cursor


def test_published_heads_tell_retention_from_truncation(
    workspace: Workspace, admin: Any, heads_dir: Path
) -> None:
    old = _old_thread_with_everything(workspace, admin)
    gone = f.make_thread(workspace, external_id="cut-off")
    fill(gone, 3)
    chain_heads_publish()
    _policy(workspace, retention_days=30)
    retention_apply(workspace_name=workspace.name)
    # Someone with database access removes a thread without retention: no tombstone.
    with f.log_unsealed():
        AuditEntry.objects.filter(thread=gone).delete()
        Event.objects.filter(thread=gone).delete()
        Thread.objects.filter(pk=gone.pk).delete()

    verdicts = {v.thread: v.verdict for v in deleted_threads_verdicts()}

    assert verdicts[str(old.pk)].ok
    assert "deleted by retention at" in verdicts[str(old.pk)].detail
    assert "tombstone verifies" in verdicts[str(old.pk)].detail
    assert not verdicts[str(gone.pk)].ok and "truncated" in verdicts[str(gone.pk)].detail


def test_a_tombstone_that_does_not_match_the_published_head_is_tampering(
    workspace: Workspace, admin: Any, heads_dir: Path, settings: Any
) -> None:
    settings.CTXADMIN_CHAIN_KEY = ""  # the tampering is re-signed: only the heads can tell
    old = _old_thread_with_everything(workspace, admin)
    chain_heads_publish()
    _policy(workspace, retention_days=30)
    retention_apply(workspace_name=workspace.name)
    tombstone = ThreadTombstone.objects.get(thread_uid=old.pk)
    # Rewrite the tombstone to an earlier, shorter log and sign it again (no key: SHA-256).
    tombstone.last_seq, tombstone.published_hashes = 2, {}
    tombstone.signature = tombstone_signature(tombstone_fields(tombstone), None)
    tombstone.save()
    assert tombstone_check(tombstone)

    [verdict] = [v.verdict for v in deleted_threads_verdicts() if v.thread == str(old.pk)]
    assert not verdict.ok and verdict.first_bad_seq == 3 and "truncated" in verdict.detail


def test_a_pending_approval_keeps_the_checkpoint_it_opened_in(workspace: Workspace) -> None:
    thread = f.make_thread(workspace, external_id="asks")
    f.append(
        thread,
        f.user("refund order 5521 please"),
        {
            "kind": "approval_request",
            "action": "Refund order 5521",
            "tool_name": "refund_payment",
            "arguments": {"order_id": "5521"},
        },
    )
    opened = Checkpoint.objects.get(summary_version=fold(thread))
    later = []
    for n in range(3):
        f.append(thread, f.user(f"still waiting {n}"), f.assistant("a person will decide"))
        later.append(Checkpoint.objects.get(summary_version=fold(thread)))
    f.age(thread, 40)
    _policy(workspace, keep_checkpoints=1, retention_days=30)

    [outcome] = retention_apply(workspace_name=workspace.name)

    assert outcome.threads == []  # a pending approval is a person's to decide
    left = list(Checkpoint.objects.filter(thread=thread).order_by("cursor"))
    assert [c.pk for c in left] == [opened.pk, later[-1].pk]
    assert checkpoint_is_safe(left[0])[0]


def test_a_deleted_thread_leaves_the_imports_report_and_its_upload(workspace: Workspace) -> None:
    old = f.make_thread(workspace, external_id="imported-1")
    fill(old, 2)
    kept = f.make_thread(workspace, external_id="imported-2")
    fill(kept, 2)
    f.age(old, 40)
    line = {"index": 0, "outcome": "created", "events": 2, "appended": 2, "reason": ""}
    both, alone = (
        TraceImport.objects.create(
            workspace=workspace,
            actor_label="admin",
            format="jsonl",
            size=len(SECRET),
            sha256="0" * 64,
            content=SECRET.encode(),
            conversations_total=len(threads),
            conversations_done=len(threads),
            created_count=len(threads),
            report=[
                {**line, "index": n, "external_id": t.external_id, "thread": str(t.pk)}
                for n, t in enumerate(threads)
            ],
        )
        for threads in ([old, kept], [old])
    )
    _policy(workspace, retention_days=30)

    retention_apply(workspace_name=workspace.name)

    both.refresh_from_db()
    alone.refresh_from_db()
    assert [r["external_id"] for r in both.report] == ["", "imported-2"]
    assert both.report[0]["thread"] is None and bytes(both.content) == SECRET.encode()
    assert alone.report[0]["external_id"] == "" and bytes(alone.content) == b""
    assert alone.report[0]["outcome"] == "created"


def test_a_run_stopped_half_way_keeps_its_batches_and_the_next_goes_on(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = [f.make_thread(workspace, external_id=f"old-{n}") for n in range(3)]
    for thread in threads:
        fill(thread, 2)
        f.age(thread, 40)
    _policy(workspace, retention_days=30)
    seen: list[Thread] = []

    def failing(thread: Thread) -> dict[str, int]:
        seen.append(thread)
        if len(seen) == 2:
            raise RuntimeError("the worker's time is up")
        return {}

    stop = ThreadDeleter(name="stops", rows=lambda ids: [], delete=failing)
    monkeypatch.setattr(retention, "thread_deleters", [*retention.thread_deleters, stop])
    with pytest.raises(RuntimeError, match="time is up"):
        retention.retention_apply(workspace_name=workspace.name, batch_size=1)

    assert Thread.objects.filter(workspace=workspace).count() == 2  # the first batch stands
    assert Event.objects.filter(thread=seen[1]).count() == 2  # the second rolled back whole
    assert ThreadTombstone.objects.count() == 1
    entry = AuditEntry.objects.get(action="retention.apply")
    assert entry.after is not None
    assert (entry.after["threads_deleted"], entry.after["interrupted"]) == (1, True)

    monkeypatch.setattr(
        retention, "thread_deleters", [d for d in retention.thread_deleters if d is not stop]
    )
    [outcome] = retention.retention_apply(workspace_name=workspace.name, batch_size=1)
    assert len(outcome.threads) == 2
    assert not Thread.objects.filter(workspace=workspace).exists()
    assert ThreadTombstone.objects.count() == 3
