"""Redaction of an event (docs/event-log.md, "Redaction"): the content leaves the event row and the
search index, the chain still verifies end to end and says "redacted at seq N", and every other
change of a row (content, salt, a v1 row, a forged record) is still named by seq. The database
refuses every UPDATE but the redacting one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from tests import factories as f
from tests.services.chain_heads_setup import heads_dir
from threads.database.guard import redaction_opened
from threads.domain.errors import InvalidEvent, NotFound, PermissionDenied
from threads.domain.redaction import RecordFields, record_genesis, record_hash, remains_digest
from threads.models import AuditEntry, Checkpoint, Event, Redaction, Thread
from threads.selectors.search import events_search
from threads.services.chain_heads import chain_heads_publish
from threads.services.folding import fold_run
from threads.services.fork import thread_fork
from threads.services.integrity import integrity_check
from threads.services.redaction import AlreadyRedacted, NothingToRedact, event_redact

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["heads_dir"]

# detect-secrets' AWS plugin flags it; it is the documented example key.
SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def admin(workspace: Any) -> Any:
    return f.make_person(workspace, "ada", "admin")


def _thread(workspace: Any, name: str = "leaky") -> Thread:
    thread = f.make_thread(workspace, name)
    f.append(
        thread,
        f.user("please deploy"),
        f.call("c1", "read_env", {"file": ".env"}),
        f.result("c1", value=f"AWS_ACCESS_KEY_ID={SECRET} region=eu-west-1"),
        f.assistant("deployed"),
    )
    return thread


def _verify(thread: Thread) -> Any:
    thread.refresh_from_db()
    return integrity_check(thread=thread, full=True)


def _rows_holding(text: str) -> int:
    return sum(text in str(values) for values in Event.objects.values_list("data", "metadata"))


def test_a_redacted_event_loses_its_content_and_the_chain_still_verifies(
    workspace: Any, admin: Any, heads_dir: Path
) -> None:
    thread = _thread(workspace)
    assert len(chain_heads_publish().published) == 1  # a head published before the redaction
    assert events_search(workspace_ids=[workspace.pk], q=SECRET)
    before = Event.objects.get(thread=thread, seq=3)
    assert before.secrets
    event_redact(thread=thread, seq=3, actor=admin, reason="leaked AWS key")

    after = Event.objects.get(thread=thread, seq=3)
    assert _rows_holding(SECRET) == 0
    assert not events_search(workspace_ids=[workspace.pk], q=SECRET)
    assert after.hash == before.hash and after.content_digest == before.content_digest
    assert after.content_salt is None and after.secrets is None and after.metadata == {}
    # Structure stays: the result still pairs with its call.
    assert after.data["tool_call_id"] == "c1" and after.data["call_seq"] == 2
    assert after.data["redacted"] == {
        "by": "ada",
        "at": after.data["redacted"]["at"],
        "reason": "leaked AWS key",
    }
    assert after.token_count < before.token_count
    thread.refresh_from_db()
    assert thread.events_with_secrets == 0
    assert thread.token_total == sum(
        Event.objects.filter(thread=thread).values_list("token_count", flat=True)
    )
    verdict = _verify(thread)
    assert verdict.ok, verdict.detail
    assert verdict.redactions == ("redacted at seq 3",)
    entry = AuditEntry.objects.get(action="event_redacted")
    assert entry.after is not None and entry.after["seq"] == 3
    assert SECRET not in str(entry.after)


def test_redaction_refusals(workspace: Any, admin: Any) -> None:
    thread = _thread(workspace)
    f.append(thread, {"kind": "retraction", "retracts": 4})
    with pytest.raises(InvalidEvent):
        event_redact(thread=thread, seq=3, actor=admin, reason="  ")
    with pytest.raises(PermissionDenied):
        event_redact(
            thread=thread, seq=3, actor=f.make_person(workspace, "rita", "reviewer"), reason="x"
        )
    with pytest.raises(NotFound):
        event_redact(thread=thread, seq=99, actor=admin, reason="x")
    with pytest.raises(NothingToRedact):
        event_redact(thread=thread, seq=5, actor=admin, reason="x")
    event_redact(thread=thread, seq=3, actor=admin, reason="leaked")
    with pytest.raises(AlreadyRedacted):
        event_redact(thread=thread, seq=3, actor=admin, reason="again")
    assert Redaction.objects.filter(thread=thread).count() == 1


def test_a_changed_v2_row_is_named_by_seq(workspace: Any) -> None:
    thread = _thread(workspace)
    f.tamper(Event.objects.get(thread=thread, seq=4), content="not deployed")
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == 4
    assert "content does not match its digest" in verdict.detail


def test_a_salt_removed_without_a_record_is_named_by_seq(workspace: Any) -> None:
    thread = _thread(workspace)
    with f.log_unsealed():
        Event.objects.filter(thread=thread, seq=2).update(content_salt=None)
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == 2
    assert "without a redaction record" in verdict.detail


def test_a_redaction_imitated_without_a_record_is_named_by_seq(workspace: Any, admin: Any) -> None:
    """Someone with database access makes seq 1 look redacted, as the service would."""
    thread = _thread(workspace)
    redacted = {"role": "user", "redacted": {"by": "ada", "at": "x", "reason": "r"}}
    with f.log_unsealed():
        Event.objects.filter(thread=thread, seq=1).update(
            data=redacted, metadata={}, content_salt=None
        )
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == 1


def test_a_v1_thread_goes_on_with_v2_events_and_a_rewritten_v1_row_is_named(
    workspace: Any,
) -> None:
    thread = _thread(workspace)
    f.as_chain_v1(thread)
    thread.refresh_from_db()
    f.append(thread, f.user("and now?"))
    newest = Event.objects.get(thread=thread, seq=5)
    assert newest.content_digest is not None  # appended after: v2
    assert _verify(thread).ok
    f.tamper(Event.objects.get(thread=thread, seq=4), content="not deployed")
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == 4 and "hash mismatch" in verdict.detail


def test_a_v1_event_is_redacted_on_its_records_word(workspace: Any, admin: Any) -> None:
    thread = _thread(workspace)
    f.as_chain_v1(thread)
    f.append(thread, f.user("and now?"))
    event_redact(thread=thread, seq=3, actor=admin, reason="leaked AWS key")
    assert _rows_holding(SECRET) == 0
    verdict = _verify(thread)
    assert verdict.ok, verdict.detail
    assert verdict.redactions == ("redacted at seq 3 (written before salted digests)",)


def test_a_record_forged_without_the_chain_key_is_refused(workspace: Any, settings: Any) -> None:
    settings.CTXADMIN_CHAIN_KEY = "the-chain-key"
    thread = _thread(workspace, "keyed")
    assert thread.chain_key_id == "k0" and _verify(thread).ok
    # Everything the service writes, but the record hashed without the key.
    row = Event.objects.get(thread=thread, seq=3)
    at = "2026-01-01T00:00:00.000000Z"
    data = {"tool_call_id": "c1", "status": "succeeded", "call_seq": 2}
    data["redacted"] = {"by": "mallory", "at": at, "reason": "forged"}
    fields = RecordFields(
        thread=str(thread.pk),
        number=1,
        seq=3,
        by="mallory",
        at=at,
        reason="forged",
        event_hash=row.hash,
        previous_hash=Event.objects.get(thread=thread, seq=2).hash,
        remains_digest=remains_digest(data, {}),
    )
    with f.log_unsealed():
        Event.objects.filter(pk=row.pk).update(data=data, metadata={}, content_salt=None)
        Redaction.objects.create(
            thread=thread,
            number=1,
            seq=3,
            by_label="mallory",
            at=row.created_at,
            reason="forged",
            event_hash=row.hash,
            previous_hash=fields.previous_hash,
            remains_digest=fields.remains_digest,
            record_hash=record_hash(record_genesis(str(thread.pk)), fields),
        )
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == 3
    assert "redacted at seq 3" not in verdict.redactions


def test_the_database_refuses_every_other_update_and_every_delete(workspace: Any) -> None:
    thread = _thread(workspace)
    row = Event.objects.get(thread=thread, seq=3)
    placeholder = {"tool_call_id": "c1", "redacted": {"by": "x", "at": "y", "reason": "z"}}

    def refused(change: Any) -> None:
        with pytest.raises(DatabaseError), transaction.atomic():
            change()

    rows = Event.objects.filter(pk=row.pk)
    refused(lambda: rows.update(data={"content": "changed"}))
    refused(lambda: rows.delete())
    # The redacting update itself, but not opened by the service.
    refused(lambda: rows.update(data=placeholder, metadata={}, content_salt=None, secrets=None))

    def opened(seq: int, **changes: Any) -> Any:
        def change() -> None:
            with redaction_opened(connection, thread.pk, seq):
                values = {"data": placeholder, "metadata": {}, "content_salt": None}
                rows.update(**{**values, "secrets": None, **changes})

        return change

    refused(opened(2))  # opened for another event
    refused(opened(3, hash="0" * 64))  # the hash must stay
    refused(opened(3, content_salt="00" * 16))  # the salt must go
    assert Event.objects.get(pk=row.pk).data == row.data
    with transaction.atomic():
        opened(3)()  # exactly the redacting update passes
    assert Event.objects.get(pk=row.pk).data == placeholder
    refused(opened(3))  # and only once


def test_published_heads_keep_verifying_after_redactions(
    workspace: Any, admin: Any, heads_dir: Path
) -> None:
    thread = _thread(workspace)
    chain_heads_publish()
    f.append(thread, f.user(f"another {SECRET}"))
    chain_heads_publish()
    for seq in (5, 3, 1):
        event_redact(thread=thread, seq=seq, actor=admin, reason=f"seq {seq}")
    verdict = _verify(thread)
    assert verdict.ok, verdict.detail
    assert verdict.redactions == tuple(f"redacted at seq {n}" for n in (1, 3, 5))


def test_a_fork_copies_redacted_events_as_they_read_and_verifies(
    workspace: Any, admin: Any
) -> None:
    thread = _thread(workspace)
    f.append(
        thread,
        {"kind": "approval_request", "action": f"use {SECRET}", "arguments": {"key": SECRET}},
    )
    for seq in (3, 5):
        event_redact(thread=thread, seq=seq, actor=admin, reason="leaked")
    version = fold_run(thread_id=thread.pk, trigger={"kind": "manual", "reason": "test"})
    assert version is not None and version.covered_until == 5
    checkpoint = Checkpoint.objects.get(thread=thread, summary_version=version)
    fork = thread_fork(thread=thread, checkpoint=checkpoint, external_id="forked", actor=admin)
    assert _rows_holding(SECRET) == 0
    copied = Event.objects.get(thread=fork, seq=3)
    assert copied.data["redacted"]["reason"] == "leaked" and copied.content_salt is not None
    assert _verify(fork).ok
