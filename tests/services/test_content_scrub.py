"""A redacted event's content leaves every store beside the event (docs/repairs.md, "Redaction
beside the event"): summaries, checkpoints, approvals, side effects, audit, task results.

The event row itself is the redaction's (its own tests); here it still holds the secret, and the
scan skips its table and the SQLite search index that follows it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from tests import factories as f
from tests.support_secret_scan import find_everywhere, sqlite_search_tables
from threads.domain.scrub import Needles, summary_scrub
from threads.domain.verify_citations import cited_seqs
from threads.models import (
    ApprovalRequest,
    AuditEntry,
    Checkpoint,
    SideEffect,
    SummaryPhase,
    SummaryVersion,
    TaskRun,
    Thread,
)
from threads.selectors import rollback_preview
from threads.services import folding
from threads.services.approvals import approval_decide
from threads.services.content_scrub import content_scrub
from threads.services.integrity import checkpoint_is_safe, summary_checksum
from threads.services.rollback import checkpoint_rollback
from threads.services.tasks import task_run_finish

pytestmark = pytest.mark.django_db

SECRET = "sk-live-51HqPINEAPPLE4242secret"
TEXT = f"my card is declined, use key {SECRET} for the refund"
PLACEHOLDER = "[redacted]"
MANUAL = {"kind": "manual", "reason": "test"}


def _fold(thread: Thread) -> SummaryVersion:
    version = folding.fold_run(thread_id=thread.pk, trigger=MANUAL)
    assert version is not None and version.phase == SummaryPhase.COMMITTED, version
    thread.refresh_from_db()
    return version


def _needles() -> list[str]:
    # As the redaction sends them: the whole text, its string leaves of 4+ characters (the
    # role among them), the secret found in it.
    return [TEXT, "user", SECRET]


def _skip() -> list[str]:
    return ["threads_event", *sqlite_search_tables()]


def _rows() -> dict[str, dict[Any, dict[str, Any]]]:
    """Every row of the stores content_scrub answers for, by store and key."""
    stores: dict[str, Any] = {
        "summary_versions": SummaryVersion,
        "checkpoints": Checkpoint,
        "approvals": ApprovalRequest,
        "side_effects": SideEffect,
        "audit_entries": AuditEntry,
        "task_runs": TaskRun,
    }
    return {
        name: {row["pk"]: row for row in model.objects.values("pk", *_fields(model))}
        for name, model in stores.items()
    }


def _fields(model: Any) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields if not field.primary_key]


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """Rows that were there before and differ now (the fold requested after a scrub adds a
    task run and its audit entry: new rows, not changed ones)."""
    return {
        store: sum(
            1
            for pk, row in after[store].items()
            if pk in before[store] and before[store][pk] != row
        )
        for store in after
    }


@pytest.fixture
def admin(workspace: Any) -> Any:
    return f.make_person(workspace, "ada", "admin")


@pytest.fixture
def built(workspace: Any, admin: Any) -> dict[str, Any]:
    """A thread whose secret is in its first user message (seq 1), folded into two versions
    with their checkpoints; an approval whose action and arguments repeat it, decided (audit);
    a side effect; a task run whose result quotes it."""
    thread = f.make_thread(workspace, "scrubbed")
    f.append(
        thread,
        f.user(TEXT),
        f.call("c1", "lookup_order", {"order": 10086}),
        f.result("c1", value={"status": "delivered"}),
        f.assistant("it was delivered"),
    )
    v1 = _fold(thread)
    f.append(
        thread,
        f.user("the user wants a refund"),
        f.call("c2", "refund", {"order": 10086, "key": SECRET}, side_effect_key="refund-10086"),
        f.result("c2", status="timeout", request_id=f"req-{SECRET}"),
        {
            "kind": "approval_request",
            "action": f"rotate {SECRET}",
            "tool_name": "rotate_key",
            "arguments": {"key": SECRET, "nested": [{"why": TEXT}]},
        },
        f.assistant("the refund timed out"),
    )
    v2 = _fold(thread)
    approval = ApprovalRequest.objects.get(thread=thread)
    approval_decide(
        approval=approval, actor=admin, decision="reject", reason=f"never send {SECRET}"
    )
    run = TaskRun.objects.create(
        id="task-scrub-1", workspace=workspace, thread=thread, kind="verify", result={}
    )
    task_run_finish(run.pk, ok=True, result={"note": TEXT})
    return {"thread": thread, "v1": v1, "v2": v2, "admin": admin}


def test_the_secret_is_found_nowhere_beside_the_event(built: dict[str, Any]) -> None:
    thread = built["thread"]
    where = {table for table, _, _ in find_everywhere(SECRET, skip_tables=_skip())}
    # Before: every store of the thread holds it (a scan that finds nothing proves nothing).
    assert {
        "threads_summaryversion",
        "threads_checkpoint",
        "threads_approvalrequest",
        "threads_sideeffect",
        "threads_auditentry",
        "threads_taskrun",
    } <= where

    before = _rows()
    with transaction.atomic():
        counts = content_scrub(thread=thread, seq=1, needles=_needles(), placeholder=PLACEHOLDER)

    assert find_everywhere(SECRET, skip_tables=_skip()) == []
    assert find_everywhere(TEXT, skip_tables=_skip()) == []
    # The counts are the rows each store changed.
    changed = _changed(before, _rows())
    assert {k: counts[k] for k in changed} == changed
    assert changed["summary_versions"] == 2 and changed["approvals"] == 1
    # Other events' content stays, and the role "user" (a leaf of the message's data) is
    # structure, not content: it is replaced nowhere.
    head = SummaryVersion.objects.get(thread=thread, version=built["v2"].version)
    assert "the user wants a refund" in head.rendered and PLACEHOLDER in head.rendered


def test_an_entry_citing_the_redacted_seq_keeps_its_citation(built: dict[str, Any]) -> None:
    thread = built["thread"]
    v1 = built["v1"]
    assert 1 in cited_seqs(v1.content)
    with transaction.atomic():
        content_scrub(thread=thread, seq=1, needles=_needles(), placeholder=PLACEHOLDER)
    for version in SummaryVersion.objects.filter(thread=thread):
        # Every citation still names an event of the log (seq 1 exists, redacted).
        assert cited_seqs(version.content) <= set(range(1, thread.last_seq + 1))
        # The stored checksum and tokens are the recomputed ones.
        assert version.checksum == summary_checksum(version)
    v1.refresh_from_db()
    assert 1 in cited_seqs(v1.content)
    redacted = [
        entry
        for section in v1.content.values()
        if isinstance(section, list)
        for entry in section
        if isinstance(entry, dict) and 1 in (entry.get("source_event_ids") or [])
    ]
    assert redacted and all(e.get("redacted") is True for e in redacted)


def test_rollbacks_still_verify_their_checkpoints(built: dict[str, Any]) -> None:
    thread = built["thread"]
    cp1 = Checkpoint.objects.get(summary_version=built["v1"])
    with transaction.atomic():
        content_scrub(thread=thread, seq=1, needles=_needles(), placeholder=PLACEHOLDER)
    for checkpoint in Checkpoint.objects.filter(thread=thread).select_related("summary_version"):
        assert checkpoint_is_safe(checkpoint) == (True, ""), checkpoint
    cp1.refresh_from_db()
    assert rollback_preview(thread=thread, checkpoint=cp1)["safe"] is True
    version = checkpoint_rollback(
        thread=thread, checkpoint=cp1, actor=built["admin"], reason="after the redaction"
    )
    assert version is not None and version.covered_until == 4
    assert SECRET not in version.rendered and PLACEHOLDER in version.rendered


def test_a_fold_is_requested_after_commit(
    built: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    thread = built["thread"]
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        content_scrub(thread=thread, seq=1, needles=_needles(), placeholder=PLACEHOLDER)
    assert len(callbacks) == 1  # the fold task, sent once the redaction commits
    thread.refresh_from_db()
    run = TaskRun.objects.get(pk=thread.fold_task_id)
    assert run.kind == "fold"


def test_needles_found_nowhere_change_only_the_entries_citing_the_seq(
    built: dict[str, Any],
) -> None:
    thread = built["thread"]
    before = _rows()
    with transaction.atomic():
        counts = content_scrub(
            thread=thread, seq=4, needles=["not in any store"], placeholder=PLACEHOLDER
        )
    changed = _changed(before, _rows())
    assert {k: counts[k] for k in changed} == changed
    # The assistant's reply (seq 4) is cited by both versions' last replies; its checkpoints
    # follow their summaries' checksums. Nothing else holds a needle.
    assert changed == {
        "summary_versions": 2,
        "checkpoints": 2,
        "approvals": 0,
        "side_effects": 0,
        "audit_entries": 0,
        "task_runs": 0,
    }
    assert SECRET in str(SummaryVersion.objects.get(thread=thread, version=1).content)


def test_summary_scrub_replaces_the_longest_needle_once() -> None:
    needles = Needles(["redacted secret text", "secret", "redacted"], PLACEHOLDER)
    content = {
        "requests": [{"text": "a redacted secret text here", "source_event_ids": [2]}],
        "facts": [
            {
                "key": "card",
                "value": {"n": "4242"},
                "authority": "user",
                "confidence": "confirmed",
                "status": "active",
                "source_event_ids": [3, 7],
            }
        ],
    }
    out = summary_scrub(content, seq=7, needles=needles)
    assert out["requests"][0]["text"] == "a [redacted] here"
    fact = out["facts"][0]
    assert fact["source_event_ids"] == [3, 7] and fact["value"] == PLACEHOLDER
    assert (fact["authority"], fact["status"], fact["key"]) == ("user", "active", "[redacted]#3")
    assert summary_scrub(content, seq=99, needles=Needles([], PLACEHOLDER)) is content
