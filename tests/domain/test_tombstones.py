"""Tombstones against published heads (docs/event-log.md, "Tombstones"): pure, no database."""

from __future__ import annotations

from typing import Any

from threads.domain.heads import PublishedHead
from threads.domain.tombstones import gap_check, tombstone_signature, tombstone_verifies

TOMBSTONE: dict[str, Any] = {
    "workspace": 1,
    "thread": "7d3c1a52-64f5-4b8e-9f52-0e5d7f2b8a11",
    "external_id_sha256": "e" * 64,
    "last_seq": 9,
    "chain_head": "c9" * 32,
    "chain_key_id": "k1",
    "published_hashes": {"4": "c4" * 32},
    "deleted_by": "retention policy",
    "reason": "inactive for more than 30 days",
    "deleted_at": "2026-12-04T10:00:00.000000Z",
}


def _head(seq: int, chain_head: str) -> PublishedHead:
    return PublishedHead(
        TOMBSTONE["thread"], "acme", seq, chain_head, "hmac-sha256", "2026-12-01", "k", "s"
    )


def test_a_tombstone_signature_covers_every_field_and_the_key() -> None:
    signature = tombstone_signature(TOMBSTONE, b"key")
    assert tombstone_verifies(TOMBSTONE, signature, b"key")
    assert not tombstone_verifies(TOMBSTONE, signature, b"another key")
    assert not tombstone_verifies(TOMBSTONE, signature, None)
    for name, value in TOMBSTONE.items():
        changed = {**TOMBSTONE, name: value + 1 if isinstance(value, int) else {"x": 1}}
        assert not tombstone_verifies(changed, signature, b"key"), name


def test_the_gap_is_explained_only_by_a_tombstone_holding_every_published_head() -> None:
    heads = [_head(4, "c4" * 32), _head(9, "c9" * 32)]
    explained = gap_check(heads, tombstone=TOMBSTONE, signature_ok=True)
    assert explained.ok and "deleted by retention at 2026-12-04T10:00" in explained.detail
    assert not gap_check(heads, tombstone=TOMBSTONE, signature_ok=False).ok
    missing = gap_check(heads, tombstone=None, signature_ok=False)
    assert (missing.ok, missing.first_bad_seq) == (False, 1) and "truncated" in missing.detail
    longer = gap_check([*heads, _head(12, "cc" * 32)], tombstone=TOMBSTONE, signature_ok=True)
    assert (longer.ok, longer.first_bad_seq) == (False, 10) and "truncated" in longer.detail
    other = gap_check([_head(4, "00" * 32)], tombstone=TOMBSTONE, signature_ok=True)
    assert (other.ok, other.first_bad_seq) == (False, 4) and "tampered" in other.detail
