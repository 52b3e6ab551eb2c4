"""Chain keys by id and their rotation (docs/event-log.md, "Hash chain and canonical JSON"): a
thread keeps the key its chain started with; new threads take the current one; a key that is gone
fails verify, clearly."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction

from tests import factories as f
from threads.domain import chain
from threads.keys.chain import ChainKeyUnknown, chain_key, current_chain_key_id
from threads.models import Checkpoint, Event, SummaryVersion, Thread
from threads.selectors.integrity import (
    checkpoint_body,
    checkpoint_is_safe,
    stored_events,
    summary_checksum,
)
from threads.services.checkpoints import checkpoint_record
from threads.services.fork import thread_fork
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db


def _checkpoint(thread: Thread, cursor: int) -> Checkpoint:
    with transaction.atomic():
        return checkpoint_record(
            thread=thread,
            version=None,
            summary_checksum="",
            cursor=cursor,
            chain_hash=Event.objects.get(thread=thread, seq=cursor).hash,
            label="",
        )


def test_keys_by_id_the_first_is_current(settings: Any) -> None:
    settings.CTXADMIN_CHAIN_KEYS = "k2:two, k1:one"
    settings.CTXADMIN_CHAIN_KEY = "zero"
    assert current_chain_key_id() == "k2"
    assert (chain_key("k1"), chain_key("k0"), chain_key("")) == (b"one", b"zero", b"zero")
    settings.CTXADMIN_CHAIN_KEYS = ""
    assert current_chain_key_id() == "k0"
    settings.CTXADMIN_CHAIN_KEY = ""
    assert current_chain_key_id() == "" and chain_key("") is None
    with pytest.raises(ChainKeyUnknown):
        chain_key("k1")


def test_a_thread_made_before_key_ids_verifies_byte_for_byte(workspace: Any) -> None:
    thread = f.make_thread(workspace, "legacy")
    Thread.objects.filter(pk=thread.pk).update(chain_key_id="")
    thread.refresh_from_db()
    assert thread.chain_head == hashlib.sha256(f"ctxadmin/v1/{thread.pk}".encode()).hexdigest()
    f.append(thread, f.user("hello"))
    assert integrity_check(thread=thread, full=True).ok


def test_the_single_key_is_k0_and_the_legacy_id_means_it(settings: Any, workspace: Any) -> None:
    settings.CTXADMIN_CHAIN_KEY = "old"
    legacy = f.make_thread(workspace, "legacy")
    assert legacy.chain_key_id == "k0"
    Thread.objects.filter(pk=legacy.pk).update(chain_key_id="")
    f.append(legacy, f.user("hello"), f.assistant("hi"))
    # Moving the single key into the list under k0 keeps the legacy thread verifying.
    settings.CTXADMIN_CHAIN_KEY = ""
    settings.CTXADMIN_CHAIN_KEYS = "k2:new,k0:old"
    legacy.refresh_from_db()
    assert integrity_check(thread=legacy, full=True).ok


def test_rotation_keeps_old_chains_and_starts_new_ones_with_the_new_key(
    settings: Any, workspace: Any, tmp_path: Path
) -> None:
    settings.CTXADMIN_CHAIN_KEYS = "k1:one"
    old = f.make_thread(workspace, "old")
    f.append(old, f.user("before the rotation"))
    checkpoint = _checkpoint(old, 1)
    assert old.chain_key_id == "k1"
    assert checkpoint.checksum == chain.checksum(checkpoint_body(checkpoint), b"one")
    version = SummaryVersion(
        thread=old, content={"schema_version": 1}, covered_from=1, covered_until=1, chain_hash="h"
    )
    body = {
        "schema_version": 1,
        "thread": str(old.pk),
        "covered_from": 1,
        "covered_until": 1,
        "chain_hash": "h",
        "summary": {"schema_version": 1},
    }
    assert summary_checksum(version) == chain.checksum(body, b"one")

    settings.CTXADMIN_CHAIN_KEYS = "k2:two,k1:one"
    new = f.make_thread(workspace, "new")
    assert new.chain_key_id == "k2"
    assert new.chain_head == chain.genesis_hash(str(new.pk), b"two")
    # The old thread keeps chaining with k1, mid-chain nothing changes key.
    f.append(old, f.user("after the rotation"))
    f.append(new, f.user("hello"))
    old.refresh_from_db()
    new.refresh_from_db()
    assert integrity_check(thread=old, full=True).ok
    assert integrity_check(thread=new, full=True).ok
    walked = chain.verify_chain(
        stored_events(thread_id=old.pk),
        start_hash=chain.genesis_hash(str(old.pk), b"one"),
        key=b"one",
    )
    assert walked.ok and walked.verified_until == 2 and walked.head == old.chain_head
    assert checkpoint_is_safe(checkpoint) == (True, "")
    # An export of the old thread names its key id; verify_export finds that key.
    path = tmp_path / "old.jsonl"
    call_command("export_thread", str(old.pk), str(path), stdout=io.StringIO())
    out = io.StringIO()
    call_command("verify_export", str(path), stdout=out)
    assert out.getvalue().startswith("OK 2 events")
    # A fork re-chains under its own genesis, so with the current key.
    reviewer = f.make_person(workspace, "rita", "reviewer")
    fork = thread_fork(thread=old, checkpoint=checkpoint, external_id="old-fork", actor=reviewer)
    assert fork.chain_key_id == "k2" and integrity_check(thread=fork, full=True).ok


def test_a_thread_whose_key_was_removed_fails_verify_with_a_reason(
    settings: Any, workspace: Any
) -> None:
    settings.CTXADMIN_CHAIN_KEYS = "k1:one"
    old = f.make_thread(workspace, "old")
    f.append(old, f.user("hello"))
    checkpoint = _checkpoint(old, 1)
    settings.CTXADMIN_CHAIN_KEYS = "k2:two"
    old.refresh_from_db()
    verdict = integrity_check(thread=old, full=True)
    assert not verdict.ok and verdict.first_bad_seq == 1
    assert "'k1'" in verdict.detail and "not configured" in verdict.detail
    safe, reason = checkpoint_is_safe(checkpoint)
    assert not safe and "'k1'" in reason
    with pytest.raises(ChainKeyUnknown):
        f.append(old, f.user("more"))
    # The checkpoints were left alone: listing the key again makes the thread verify.
    checkpoint.refresh_from_db()
    assert checkpoint.safe
    settings.CTXADMIN_CHAIN_KEYS = "k2:two,k1:one"
    assert integrity_check(thread=old, full=True).ok
