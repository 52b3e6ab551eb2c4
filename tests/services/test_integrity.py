"""The integrity sweep: chain recomputation, first bad seq, unsafe checkpoints."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from tests import factories as f
from threads.models import Checkpoint, Event, Thread
from threads.selectors import last_safe_checkpoint
from threads.services.checkpoints import checkpoint_record
from threads.services.integrity import (
    checkpoint_checksum,
    checkpoint_is_safe,
    integrity_check,
)

pytestmark = pytest.mark.django_db


def _fill(thread: Thread, turns: int = 5) -> None:
    bodies = []
    for n in range(turns):
        bodies += [
            f.user(f"question {n}"),
            f.call(f"c{n}", "lookup", {"n": n}),
            f.result(f"c{n}", value={"answer": n}),
            f.assistant(f"answer {n}"),
        ]
    f.append(thread, *bodies)


def _checkpoint_at(thread: Thread, cursor: int) -> Checkpoint:
    with transaction.atomic():
        chain_hash = Event.objects.get(thread=thread, seq=cursor).hash
        return checkpoint_record(
            thread=thread,
            version=None,
            summary_checksum="",
            cursor=cursor,
            chain_hash=chain_hash,
            label=f"at {cursor}",
        )


def _tamper(thread: Thread, seq: int, **changes: Any) -> None:
    with f.log_unsealed():
        Event.objects.filter(thread=thread, seq=seq).update(**changes)


def test_clean_chain_verifies_and_is_recorded(thread: Thread) -> None:
    _fill(thread)
    verdict = integrity_check(thread=thread, full=True)
    thread.refresh_from_db()
    assert verdict.ok and verdict.first_bad_seq is None
    assert thread.chain_ok and thread.verified_until == thread.last_seq == 20
    assert thread.verified_hash == thread.chain_head and thread.verified_at is not None


def test_incremental_check_starts_where_the_last_one_ended(thread: Thread) -> None:
    _fill(thread, turns=2)
    integrity_check(thread=thread)
    f.append(thread, f.user("one more"), f.assistant("sure"))
    seen: list[tuple[int, int]] = []
    verdict = integrity_check(
        thread=thread, progress=lambda done, total: seen.append((done, total))
    )
    assert verdict.ok and verdict.verified_until == 10
    assert seen[-1] == (2, 2)  # only the two new events were read


def test_flipped_row_names_the_seq_and_marks_later_checkpoints_unsafe(thread: Thread) -> None:
    _fill(thread)
    before, at, after = (_checkpoint_at(thread, s) for s in (4, 11, 16))
    row = Event.objects.get(thread=thread, seq=11)
    _tamper(thread, 11, data={**row.data, "result": {"answer": 999}})

    verdict = integrity_check(thread=thread, full=True)

    assert not verdict.ok and verdict.first_bad_seq == 11 and verdict.verified_until == 10
    thread.refresh_from_db()
    assert not thread.chain_ok and thread.first_bad_seq == 11
    for checkpoint in (before, at, after):
        checkpoint.refresh_from_db()
    assert before.safe and not at.safe and not after.safe
    assert "seq 11" in at.unsafe_reason
    assert checkpoint_is_safe(before) == (True, "")
    assert checkpoint_is_safe(after)[0] is False
    assert last_safe_checkpoint(thread=thread) == before


def test_incremental_check_misses_old_tampering_that_full_catches(thread: Thread) -> None:
    _fill(thread)
    assert integrity_check(thread=thread).ok
    _tamper(thread, 3, metadata={"forged": True})
    assert integrity_check(thread=thread).ok  # nothing new since verified_until
    assert integrity_check(thread=thread, full=True).first_bad_seq == 3


def test_deleted_last_event_is_a_break(thread: Thread) -> None:
    _fill(thread, turns=2)
    with f.log_unsealed():
        Event.objects.filter(thread=thread, seq=8).delete()
    verdict = integrity_check(thread=thread, full=True)
    assert verdict.first_bad_seq == 8 and "missing" in verdict.detail


def test_swapped_rows_break_at_the_first(thread: Thread) -> None:
    _fill(thread, turns=2)
    a = Event.objects.get(thread=thread, seq=2)
    b = Event.objects.get(thread=thread, seq=6)
    _tamper(thread, 2, data=b.data, hash=b.hash)
    _tamper(thread, 6, data=a.data, hash=a.hash)
    assert integrity_check(thread=thread, full=True).first_bad_seq == 2


def test_checkpoint_with_altered_fields_is_unsafe(thread: Thread) -> None:
    _fill(thread, turns=2)
    checkpoint = _checkpoint_at(thread, 4)
    assert checkpoint.checksum == checkpoint_checksum(checkpoint)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(cursor=5)
    checkpoint.refresh_from_db()
    assert checkpoint_is_safe(checkpoint) == (False, "the checkpoint's checksum does not recompute")


def test_checkpoint_is_safe_verifies_the_chain_when_no_sweep_ran(thread: Thread) -> None:
    _fill(thread, turns=2)
    checkpoint = _checkpoint_at(thread, 6)
    _tamper(thread, 2, token_count=1)  # a column the chain does not cover: still safe
    assert checkpoint_is_safe(checkpoint) == (True, "")
    _tamper(thread, 2, kind="message", data={"role": "user", "content": "forged"})
    safe, reason = checkpoint_is_safe(checkpoint)
    assert not safe and "seq 2" in reason


def test_incremental_check_can_start_from_a_safe_checkpoint(thread: Thread) -> None:
    _fill(thread)
    _checkpoint_at(thread, 12)
    seen: list[tuple[int, int]] = []
    verdict = integrity_check(thread=thread, progress=lambda d, t: seen.append((d, t)))
    assert verdict.ok and seen[-1] == (8, 8)
