"""Six tamperings by someone with full database access, each found by one full verify naming
the first bad seq (docs/repairs.md, "Published chain heads"). Two of them verify cleanly from inside
the database alone, and are caught only by the heads published outside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import factories as f
from tests.services.chain_heads_setup import fill, heads_dir, rehash_from, truncate
from threads.models import Event, Thread
from threads.services.chain_heads import chain_heads_publish
from threads.services.integrity import integrity_check

pytestmark = pytest.mark.django_db

__all__ = ["heads_dir"]


@pytest.fixture
def logged(heads_dir: Path, workspace: Any) -> Thread:
    """A thread of 20 events whose head was published at seq 4, 8, 12, 16 and 20."""
    thread = f.make_thread(workspace, "tampered")
    for _ in range(5):
        fill(thread, 4)
        assert len(chain_heads_publish().published) == 1
    thread.refresh_from_db()
    assert thread.last_seq == 20 and integrity_check(thread=thread, full=True).ok
    return thread


def _verify(thread: Thread) -> Any:
    thread.refresh_from_db()
    return integrity_check(thread=thread, full=True)


def test_a_flipped_byte_is_named(logged: Thread) -> None:
    event = Event.objects.get(thread=logged, seq=7)
    content = event.data["content"]
    f.tamper(event, content=content[:-1] + chr(ord(content[-1]) ^ 1))  # one bit of one byte
    verdict = _verify(logged)
    # Chain v2: the changed content no longer matches the digest its link commits to.
    assert not verdict.ok and verdict.first_bad_seq == 7
    assert "content does not match its digest" in verdict.detail


def test_a_deleted_row_in_the_middle_is_named(logged: Thread) -> None:
    with f.log_unsealed():
        Event.objects.filter(thread=logged, seq=9).delete()
    verdict = _verify(logged)
    assert not verdict.ok and verdict.first_bad_seq == 9 and "seq 9 expected" in verdict.detail


def test_an_inserted_row_is_named(logged: Thread) -> None:
    # Make room at seq 11 (from the top, so (thread, seq) stays unique), then insert a row there
    # carrying a copy of its neighbour's hash.
    with f.log_unsealed():
        for seq in range(20, 10, -1):
            Event.objects.filter(thread=logged, seq=seq).update(seq=seq + 1)
        copy = Event.objects.get(thread=logged, seq=12)
        copy.pk, copy.seq, copy.data = None, 11, {**copy.data, "content": "inserted"}
        copy.save(force_insert=True)
        Thread.objects.filter(pk=logged.pk).update(last_seq=21)
    verdict = _verify(logged)
    assert not verdict.ok and verdict.first_bad_seq == 11


def test_swapped_rows_are_named_at_the_first(logged: Thread) -> None:
    a = Event.objects.get(thread=logged, seq=4)
    b = Event.objects.get(thread=logged, seq=13)
    with f.log_unsealed():
        Event.objects.filter(pk=a.pk).update(data=b.data, hash=b.hash)
        Event.objects.filter(pk=b.pk).update(data=a.data, hash=a.hash)
    verdict = _verify(logged)
    assert not verdict.ok and verdict.first_bad_seq == 4


def test_a_truncated_tail_with_the_thread_row_set_back_is_caught_by_the_published_head(
    logged: Thread, settings: Any, tmp_path: Path
) -> None:
    truncate(logged, keep=17)
    # From inside the database alone the log is whole: every hash and the head agree.
    settings.CTXADMIN_HEADS_DIR = tmp_path / "no-heads"
    assert _verify(logged).ok
    settings.CTXADMIN_HEADS_DIR = tmp_path / "chain-heads"
    verdict = _verify(logged)
    # The first seq the log no longer holds; everything it still holds verifies.
    assert not verdict.ok and verdict.first_bad_seq == 18 and verdict.verified_until == 17
    assert "truncated" in verdict.detail and "seq 20 was published" in verdict.detail


@pytest.mark.parametrize("start", [1, 6])
def test_a_recomputed_plain_chain_fails_under_the_chain_key(
    settings: Any, workspace: Any, start: int
) -> None:
    settings.CTXADMIN_CHAIN_KEY = "s3cret"
    thread = f.make_thread(workspace, "keyed")
    fill(thread, 12)
    rehash_from(thread, start, content="forged")
    verdict = _verify(thread)
    assert not verdict.ok and verdict.first_bad_seq == start


def test_a_recomputed_chain_without_a_key_is_caught_by_the_published_heads(
    logged: Thread, settings: Any, tmp_path: Path
) -> None:
    rehash_from(logged, 10, content="forged")
    settings.CTXADMIN_HEADS_DIR = tmp_path / "no-heads"
    assert _verify(logged).ok  # plain SHA-256: anyone can recompute it
    settings.CTXADMIN_HEADS_DIR = tmp_path / "chain-heads"
    verdict = _verify(logged)
    # The head published at 8 still matches, the one at 12 does not: named at 12, vouched to 8.
    assert not verdict.ok and verdict.first_bad_seq == 12 and verdict.verified_until == 8
    assert "rewritten after seq 8" in verdict.detail


def test_an_incremental_check_sees_the_truncation_too(logged: Thread) -> None:
    truncate(logged, keep=17)
    logged.refresh_from_db()
    verdict = integrity_check(thread=logged)
    assert not verdict.ok and verdict.first_bad_seq == 18
