"""Signed tombstones of threads deleted by retention (docs/event-log.md, "Tombstones"), and
what one says against the heads published for its thread.

A tombstone keeps what proves the deleted thread's log without any of its content: its
workspace's key, the SHA-256 of its external id (not the id), its uid, its last seq and chain
head, the chain hashes at the seqs a published head named, who deleted it, why and when. Its
signature is an HMAC-SHA256 with the thread's chain key over the canonical JSON of those fields
(plain SHA-256 when the thread has none), so a writer of the database without the key cannot
make a thread vanish behind a tombstone of their own.

Pure: no Django, no database, no files.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threads.domain.canonical import canonical_json
from threads.domain.heads import PublishedHead

# Every field the signature covers, in the order a tombstone reads.
SIGNED_FIELDS = (
    "workspace",
    "thread",
    "external_id_sha256",
    "last_seq",
    "chain_head",
    "chain_key_id",
    "published_hashes",
    "deleted_by",
    "reason",
    "deleted_at",
)


def external_id_digest(external_id: str) -> str:
    """What a tombstone keeps of the external id: enough to answer "was X deleted?" for
    someone who knows X, nothing for someone who does not."""
    return hashlib.sha256(external_id.encode("utf-8")).hexdigest()


def tombstone_signature(fields: Mapping[str, Any], key: bytes | None) -> str:
    """HMAC-SHA256 with the chain key (SHA-256 without one) over the signed fields."""
    data = canonical_json({"ctxadmin/tombstone/v1": {name: fields[name] for name in SIGNED_FIELDS}})
    if key:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def tombstone_verifies(fields: Mapping[str, Any], signature: str, key: bytes | None) -> bool:
    return hmac.compare_digest(tombstone_signature(fields, key), signature)


@dataclass(frozen=True)
class GapVerdict:
    """What a thread named by published heads but missing from the database amounts to."""

    ok: bool
    first_bad_seq: int | None
    detail: str


def gap_check(
    heads: list[PublishedHead],
    *,
    tombstone: Mapping[str, Any] | None,
    signature_ok: bool,
) -> GapVerdict:
    """A deleted thread's published heads held against its tombstone (None: there is none).

    Explained only when the tombstone's signature verifies and every published head is in it:
    its seq at or below the tombstone's last seq, and its chain hash the one the tombstone
    recorded at that seq (the last seq's hash is the tombstone's chain head). Anything else is
    a log that lost published events: truncated at the first published seq it cannot vouch for.
    """
    ordered = sorted(heads, key=lambda h: h.seq)
    first = ordered[0].seq if ordered else 1
    if tombstone is None:
        return GapVerdict(
            False,
            1,
            f"missing from the database, with no tombstone, but seq {ordered[-1].seq} was "
            f"published ({ordered[-1].published_at}): truncated",
        )
    if not signature_ok:
        return GapVerdict(
            False, first, "missing from the database; its tombstone does not verify: tampered"
        )
    recorded = {int(seq): value for seq, value in (tombstone["published_hashes"] or {}).items()}
    recorded[int(tombstone["last_seq"])] = tombstone["chain_head"]
    for head in ordered:
        if head.seq > int(tombstone["last_seq"]):
            return GapVerdict(
                False,
                int(tombstone["last_seq"]) + 1,
                f"its tombstone ends at seq {tombstone['last_seq']} but seq {head.seq} was "
                f"published ({head.published_at}): truncated",
            )
        if recorded.get(head.seq) != head.chain_head:
            return GapVerdict(
                False,
                head.seq,
                f"its tombstone's chain hash at seq {head.seq} differs from the head published "
                f"{head.published_at}: tampered",
            )
    return GapVerdict(
        True,
        None,
        f"deleted by retention at {tombstone['deleted_at']} ({tombstone['deleted_by']}), "
        "tombstone verifies",
    )
