"""Checkpoints, rollback and fork (docs/design.md §6)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import factories as f
from threads.domain import chain
from threads.domain.errors import Conflict, InvalidEvent, NotFound, PermissionDenied
from threads.keys.chain import chain_key
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    Event,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    Thread,
)
from threads.selectors import rollback_preview
from threads.services import folding
from threads.services.approvals import approval_decide
from threads.services.checkpoints import checkpoint_create
from threads.services.fork import thread_fork
from threads.services.integrity import (
    checkpoint_checksum,
    checkpoint_is_safe,
    integrity_check,
    summary_checksum,
)
from threads.services.rollback import checkpoint_rollback
from threads.services.side_effects import side_effect_resolve

pytestmark = pytest.mark.django_db

MANUAL = {"kind": "manual", "reason": "test"}


# --- builders shared with the API tests -----------------------------------------------------


def fold(thread: Thread) -> SummaryVersion:
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.phase == SummaryPhase.COMMITTED, version
    thread.refresh_from_db()
    return version


def two_versions(thread: Thread) -> tuple[Checkpoint, Checkpoint]:
    """v1 covers 1..4 (a lookup); v2 covers 5..8 (a refund that timed out: unknown).

    Returns the checkpoints the two commits wrote.
    """
    f.append(
        thread,
        f.user("where is order 10086?"),
        f.call("c1", "lookup_order", {"order": 10086}),
        f.result("c1", value={"status": "delivered"}),
        f.assistant("it was delivered"),
    )
    v1 = fold(thread)
    f.append(
        thread,
        f.user("refund it please"),
        f.call("c2", "refund", {"order": 10086, "amount": 25}, side_effect_key="refund-10086"),
        f.result("c2", status="timeout"),
        f.assistant("the refund timed out"),
    )
    v2 = fold(thread)
    return (
        Checkpoint.objects.get(summary_version=v1),
        Checkpoint.objects.get(summary_version=v2),
    )


def parent_snapshot(thread: Thread) -> dict[str, list[tuple[Any, ...]]]:
    """Every row a fork must leave byte-identical."""
    return {
        "thread": list(Thread.objects.filter(pk=thread.pk).values_list()),
        "events": list(Event.objects.filter(thread=thread).order_by("seq").values_list()),
        "versions": list(
            SummaryVersion.objects.filter(thread=thread).order_by("version").values_list()
        ),
        "checkpoints": list(Checkpoint.objects.filter(thread=thread).order_by("pk").values_list()),
        "side_effects": list(SideEffect.objects.filter(thread=thread).order_by("pk").values_list()),
        "approvals": list(
            ApprovalRequest.objects.filter(thread=thread).order_by("pk").values_list()
        ),
    }


@pytest.fixture
def admin(workspace: Any) -> Any:
    return f.make_person(workspace, "ada", "admin")


@pytest.fixture
def reviewer(workspace: Any) -> Any:
    return f.make_person(workspace, "rex", "reviewer")


@pytest.fixture
def operator(workspace: Any) -> Any:
    return f.make_person(workspace, "otto", "operator")


# --- on-demand checkpoints ------------------------------------------------------------------


def test_checkpoint_create_stands_on_the_head(thread: Thread, operator: Any) -> None:
    _, cp2 = two_versions(thread)
    f.append(thread, f.user("and now?"))  # after the head: not part of the checkpoint
    checkpoint = checkpoint_create(thread=thread, label="before repair", actor=operator)
    assert checkpoint.summary_version_id == cp2.summary_version_id
    assert checkpoint.cursor == 8 == thread.covered_until
    assert checkpoint.chain_hash == Event.objects.get(thread=thread, seq=8).hash
    assert cp2.summary_version is not None
    assert checkpoint.summary_checksum == cp2.summary_version.checksum
    assert checkpoint.checksum == checkpoint_checksum(checkpoint)
    assert checkpoint.label == "before repair" and checkpoint.created_by == operator
    # The refund timed out at seq 7: open (unknown) at the cursor.
    assert [(p["kind"], p["call_seq"], p["status"]) for p in checkpoint.pending] == [
        ("side_effect", 6, "unknown")
    ]
    assert checkpoint_is_safe(checkpoint) == (True, "")
    entry = AuditEntry.objects.get(action="checkpoint.create")
    assert entry.actor == operator
    assert entry.after is not None and entry.after["id"] == checkpoint.pk


def test_checkpoint_without_a_summary_stands_on_genesis(thread: Thread, operator: Any) -> None:
    f.append(thread, f.user("hello"))
    checkpoint = checkpoint_create(thread=thread, label="", actor=operator)
    assert checkpoint.summary_version is None and checkpoint.cursor == 0
    assert checkpoint.chain_hash == chain.genesis_hash(str(thread.pk), chain_key())
    assert checkpoint_is_safe(checkpoint) == (True, "")


def test_checkpoint_create_needs_a_member(thread: Thread, workspace: Any) -> None:
    stranger = f.make_person(f.make_workspace("initech")[0], "mallory", "admin")
    with pytest.raises(PermissionDenied):
        checkpoint_create(thread=thread, label="x", actor=stranger)
    assert not Checkpoint.objects.filter(thread=thread).exists()


# --- rollback -------------------------------------------------------------------------------


def test_rollback_writes_a_new_head_and_keeps_the_events(thread: Thread, admin: Any) -> None:
    cp1, cp2 = two_versions(thread)
    events_before = list(Event.objects.filter(thread=thread).values_list("seq", "hash"))
    thread.refresh_from_db()
    assert (thread.head_version, thread.last_version) == (2, 2)

    version = checkpoint_rollback(thread=thread, checkpoint=cp1, actor=admin, reason="bad v2")
    assert version is not None  # a checkpoint with a summary always moves the head

    thread.refresh_from_db()
    assert version.version == 3 and version.phase == SummaryPhase.COMMITTED
    assert (thread.head_version, thread.last_version, thread.covered_until) == (3, 3, 4)
    source = cp1.summary_version
    assert source is not None
    assert version.content == source.content and version.rendered == source.rendered
    assert (version.covered_from, version.covered_until) == (1, 4)
    assert version.chain_hash == cp1.chain_hash
    assert version.checksum == summary_checksum(version) == source.checksum
    assert version.restored_from == cp1 and version.base_version == 2
    assert version.trigger["kind"] == "rollback" and version.trigger["reason"] == "bad v2"
    assert version.verification["ok"] is True
    # The version it replaces is kept, marked rolled_back; v1 stays committed.
    phases = dict(SummaryVersion.objects.filter(thread=thread).values_list("version", "phase"))
    assert phases == {1: "committed", 2: "rolled_back", 3: "committed"}
    # Events are untouched.
    assert list(Event.objects.filter(thread=thread).values_list("seq", "hash")) == events_before
    # A checkpoint stands on the new head.
    new_cp = Checkpoint.objects.get(summary_version=version)
    assert new_cp.cursor == 4 and checkpoint_is_safe(new_cp) == (True, "")
    entry = AuditEntry.objects.get(action="thread.rollback")
    assert entry.before == {"head_version": 2, "covered_until": 8}
    assert entry.after is not None
    assert entry.after == {
        **entry.after,
        "head_version": 3,
        "versions_rolled_back": [2],
        "reason": "bad v2",
    }
    assert entry.actor == admin


def test_versions_only_increase_after_a_rollback(thread: Thread, admin: Any) -> None:
    cp1, _ = two_versions(thread)
    checkpoint_rollback(thread=thread, checkpoint=cp1, actor=admin, reason="bad v2")
    # The events after the cursor are delta again: the next fold covers them in a new number.
    refolded = fold(thread)
    assert refolded.version == 4 and refolded.base_version == 3
    assert (refolded.covered_from, refolded.covered_until) == (5, 8)
    numbers = list(
        SummaryVersion.objects.filter(thread=thread)
        .order_by("pk")
        .values_list("version", flat=True)
    )
    assert numbers == sorted(numbers) == [1, 2, 3, 4]


def test_preview_lists_what_happened_after_the_cursor(thread: Thread, admin: Any) -> None:
    cp1, _ = two_versions(thread)
    f.append(thread, {"kind": "approval_request", "action": "refund again", "arguments": {}})
    preview = rollback_preview(thread=thread, checkpoint=cp1)
    assert preview["safe"] is True and preview["new_version"] == 3
    assert [(s["call_seq"], s["status"]) for s in preview["side_effects"]] == [(6, "unknown")]
    assert [a["approval_seq"] for a in preview["approvals"]] == [9]
    assert [v["version"] for v in preview["versions_replaced"]] == [2]
    assert preview["events_after_cursor"] == 5


def test_tampered_event_makes_later_checkpoints_unsafe(thread: Thread, admin: Any) -> None:
    cp1, cp2 = two_versions(thread)
    f.tamper(Event.objects.get(thread=thread, seq=6), arguments={"order": 10086, "amount": 2500})

    verdict = integrity_check(thread=thread, full=True)
    assert verdict.first_bad_seq == 6

    with pytest.raises(Conflict) as refused:
        checkpoint_rollback(thread=thread, checkpoint=cp2, actor=admin, reason="restore")
    assert refused.value.code == "checkpoint_unsafe"
    thread.refresh_from_db()
    assert thread.head_version == 2  # nothing written

    version = checkpoint_rollback(thread=thread, checkpoint=cp1, actor=admin, reason="restore")
    assert version is not None  # a checkpoint with a summary always moves the head
    assert version.covered_until == 4


def test_rollback_rechecks_the_chain_not_the_stored_flag(thread: Thread, admin: Any) -> None:
    _, cp2 = two_versions(thread)
    assert integrity_check(thread=thread, full=True).ok  # the sweep vouched for seq 1..8
    f.tamper(Event.objects.get(thread=thread, seq=2), arguments={"order": 1})
    cp2.refresh_from_db()
    assert cp2.safe  # no sweep since: the stored flag still says safe
    with pytest.raises(Conflict) as refused:
        checkpoint_rollback(thread=thread, checkpoint=cp2, actor=admin, reason="restore")
    assert refused.value.code == "checkpoint_unsafe"
    assert "seq 2" in refused.value.message


def test_rollback_refuses_a_checkpoint_whose_checksum_changed(thread: Thread, admin: Any) -> None:
    cp1, _ = two_versions(thread)
    Checkpoint.objects.filter(pk=cp1.pk).update(cursor=3)
    with pytest.raises(Conflict) as refused:
        checkpoint_rollback(thread=thread, checkpoint=cp1, actor=admin, reason="restore")
    assert refused.value.code == "checkpoint_unsafe"


def test_rollback_is_for_admins_with_a_reason(thread: Thread, reviewer: Any, admin: Any) -> None:
    cp1, _ = two_versions(thread)
    with pytest.raises(PermissionDenied):
        checkpoint_rollback(thread=thread, checkpoint=cp1, actor=reviewer, reason="x")
    with pytest.raises(InvalidEvent) as invalid:
        checkpoint_rollback(thread=thread, checkpoint=cp1, actor=admin, reason="   ")
    assert "reason" in invalid.value.fields
    thread.refresh_from_db()
    assert thread.head_version == 2
    assert not AuditEntry.objects.filter(action="thread.rollback").exists()


def test_rollback_to_another_threads_checkpoint_is_not_found(
    thread: Thread, workspace: Any, admin: Any
) -> None:
    cp1, _ = two_versions(thread)
    other = f.make_thread(workspace, external_id="other")
    with pytest.raises(NotFound):
        checkpoint_rollback(thread=other, checkpoint=cp1, actor=admin, reason="x")


def test_rollback_to_a_checkpoint_without_summary_is_refused(thread: Thread, admin: Any) -> None:
    f.append(thread, f.user("hello"))
    empty = checkpoint_create(thread=thread, label="", actor=admin)
    with pytest.raises(Conflict) as refused:
        checkpoint_rollback(thread=thread, checkpoint=empty, actor=admin, reason="x")
    assert refused.value.code == "checkpoint_has_no_summary"


# --- fork -----------------------------------------------------------------------------------


def test_fork_copies_the_prefix_under_its_own_chain(
    thread: Thread, workspace: Any, reviewer: Any, admin: Any
) -> None:
    cp1, cp2 = two_versions(thread)
    effect = SideEffect.objects.get(thread=thread)
    side_effect_resolve(side_effect=effect, actor=admin, status="succeeded", evidence="ledger #9")
    f.append(thread, {"kind": "approval_request", "action": "refund again", "arguments": {}})
    approval = ApprovalRequest.objects.get(thread=thread)
    approval_decide(approval=approval, actor=admin, decision="reject", reason="no")
    fold(thread)  # v3 covers 9..11 (resolution, request, decision)
    at_head = Checkpoint.objects.filter(thread=thread).order_by("-cursor", "-pk").first()
    assert at_head is not None and at_head.cursor == 11
    before = parent_snapshot(thread)

    forked = thread_fork(
        thread=thread, checkpoint=at_head, external_id="order-10086-b", actor=reviewer
    )

    assert parent_snapshot(thread) == before  # never writes to the parent
    assert forked.workspace_id == workspace.pk
    assert forked.parent_thread_id == thread.pk and forked.parent_checkpoint_id == at_head.pk
    assert forked.last_seq == 11 and (forked.head_version, forked.covered_until) == (1, 11)
    parent_events = list(Event.objects.filter(thread=thread).order_by("seq"))
    fork_events = list(Event.objects.filter(thread=forked).order_by("seq"))
    assert [(e.seq, e.kind, e.data, e.created_at) for e in fork_events] == [
        (e.seq, e.kind, e.data, e.created_at) for e in parent_events
    ]
    # Its own genesis: every hash differs, and its chain verifies on its own.
    assert all(a.hash != b.hash for a, b in zip(fork_events, parent_events, strict=True))
    verdict = integrity_check(thread=forked, full=True)
    assert verdict.ok and verdict.verified_until == 11
    version = SummaryVersion.objects.get(thread=forked)
    assert version.version == 1 and version.phase == SummaryPhase.COMMITTED
    assert at_head.summary_version is not None
    assert version.content == at_head.summary_version.content
    assert version.chain_hash == forked.chain_head == fork_events[-1].hash
    assert version.checksum == summary_checksum(version)
    fork_cp = Checkpoint.objects.get(thread=forked)
    assert checkpoint_is_safe(fork_cp) == (True, "")
    # Outcomes recorded by people travel with the log.
    assert SideEffect.objects.get(thread=forked).status == "succeeded"
    copied = ApprovalRequest.objects.get(thread=forked)
    assert copied.status == "rejected"
    assert copied.decision_event is not None and copied.decision_event.seq == 11
    fork_audit = AuditEntry.objects.get(action="thread.fork").after
    assert fork_audit is not None and fork_audit["checkpoint"] == at_head.pk


def test_fork_at_an_earlier_checkpoint_takes_only_its_prefix(thread: Thread, reviewer: Any) -> None:
    cp1, _ = two_versions(thread)
    forked = thread_fork(thread=thread, checkpoint=cp1, external_id="b", actor=reviewer)
    assert forked.last_seq == 4 and forked.covered_until == 4
    assert not SideEffect.objects.filter(thread=forked).exists()
    f.append(forked, f.user("a different path"))  # the fork lives on by itself
    assert integrity_check(thread=forked, full=True).ok


def test_fork_refusals(thread: Thread, workspace: Any, operator: Any, reviewer: Any) -> None:
    cp1, cp2 = two_versions(thread)
    with pytest.raises(PermissionDenied):
        thread_fork(thread=thread, checkpoint=cp1, external_id="b", actor=operator)
    f.make_thread(workspace, external_id="taken")
    with pytest.raises(Conflict) as taken:
        thread_fork(thread=thread, checkpoint=cp1, external_id="taken", actor=reviewer)
    assert taken.value.code == "external_id_taken"
    f.tamper(Event.objects.get(thread=thread, seq=7), status="succeeded")
    with pytest.raises(Conflict) as unsafe:
        thread_fork(thread=thread, checkpoint=cp2, external_id="c", actor=reviewer)
    assert unsafe.value.code == "checkpoint_unsafe"
    assert Thread.objects.filter(workspace=workspace).count() == 2
