"""Signed chain heads (docs/repairs.md, "Published chain heads"): the line a publication writes for
a thread, the bytes its Ed25519 signature covers, and what a published head says about the log as it
is now.

Pure: no Django, no files; the keys are `cryptography` objects handed in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from threads.domain.canonical import canonical_json

# Every field of a heads line but the signature, which covers the canonical JSON of these.
SIGNED_FIELDS = ("thread", "workspace", "seq", "chain_head", "algorithm", "published_at", "key_id")


@dataclass(frozen=True)
class PublishedHead:
    thread: str
    workspace: str
    seq: int
    chain_head: str
    algorithm: str
    published_at: str
    key_id: str
    signature: str
    where: str = ""  # file:line it was read from

    def line(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in (*SIGNED_FIELDS, "signature")}


def public_key_id(public_key: Ed25519PublicKey) -> str:
    """A short, stable name for a signing key: the start of SHA-256 of its raw bytes."""
    raw = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def signed_bytes(line: Mapping[str, Any]) -> bytes:
    return canonical_json({name: line[name] for name in SIGNED_FIELDS})


def head_sign(
    private_key: Ed25519PrivateKey,
    *,
    thread: str,
    workspace: str,
    seq: int,
    chain_head: str,
    algorithm: str,
    published_at: str,
) -> PublishedHead:
    body: dict[str, Any] = {
        "thread": thread,
        "workspace": workspace,
        "seq": seq,
        "chain_head": chain_head,
        "algorithm": algorithm,
        "published_at": published_at,
        "key_id": public_key_id(private_key.public_key()),
    }
    signature = private_key.sign(signed_bytes(body)).hex()
    return PublishedHead(**body, signature=signature)


def head_parse(
    value: Any, public_keys: Mapping[str, Ed25519PublicKey], *, where: str = ""
) -> tuple[PublishedHead | None, str]:
    """A heads line as a PublishedHead when its signature verifies with the key it names;
    otherwise (None, the reason)."""
    if not isinstance(value, dict) or any(name not in value for name in SIGNED_FIELDS):
        return None, "not a heads line"
    if not isinstance(value.get("seq"), int) or not isinstance(value.get("thread"), str):
        return None, "not a heads line"
    public_key = public_keys.get(str(value["key_id"]))
    if public_key is None:
        return None, f"signed with an unknown key {value['key_id']!r}"
    try:
        public_key.verify(bytes.fromhex(str(value.get("signature", ""))), signed_bytes(value))
    except (InvalidSignature, ValueError):
        return None, "the signature does not verify"
    fields = {name: value[name] for name in (*SIGNED_FIELDS, "signature")}
    return PublishedHead(**fields, where=where), ""


@dataclass(frozen=True)
class HeadVerdict:
    ok: bool
    verified_until: int  # the last seq a published head vouches for (0 when none)
    first_bad_seq: int | None
    detail: str = ""


def heads_check(
    heads: list[PublishedHead], *, last_seq: int, stored_hashes: Mapping[int, str]
) -> HeadVerdict:
    """Whether the log (its last_seq and the stored chain hashes at the published seqs, already
    verified by a chain walk) still contains every published head.

    A rewrite is named at the first published seq whose hash differs (the log changed after
    the last head that still matches, at or before that seq); a truncation at last_seq + 1,
    the first published seq the log no longer holds.
    """
    vouched = 0
    for head in sorted(heads, key=lambda h: h.seq):
        if head.seq > last_seq:
            # Everything the log still holds verified; what it lost is from last_seq + 1.
            return HeadVerdict(
                False,
                last_seq,
                last_seq + 1,
                f"the log ends at seq {last_seq} but seq {head.seq} was published "
                f"({head.published_at}): truncated",
            )
        if stored_hashes.get(head.seq) != head.chain_head:
            return HeadVerdict(
                False,
                vouched,
                head.seq,
                f"the chain hash at seq {head.seq} differs from the head published "
                f"{head.published_at}: rewritten after seq {vouched}",
            )
        vouched = head.seq
    return HeadVerdict(True, vouched, None)
