"""The hash chain over a thread's events (docs/event-log.md, "Hash chain and canonical JSON").

h_0 = H("ctxadmin/v1/" + thread_uid), where H is SHA-256, or HMAC-SHA256 with the chain key when
one is configured, so that a writer of the database without the key cannot forge a consistent
chain. Chain v2 (every event appended since salted digests): the event has a random 16-byte salt
and content_digest = SHA-256(salt ‖ canonical({"data", "metadata"})), and h_i = H(h_{i-1} ‖
canonical({"v": 2, seq, kind, created_at, client_event_id, content_digest})), so removing the
content and the salt (a redaction) leaves every hash valid. Chain v1 (events stored before, no
digest): h_i = H(h_{i-1} ‖ canonical(e_i)), the event's stored form itself.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threads.domain.canonical import canonical_json, canonical_text, join_canonical
from threads.domain.redaction import REDACTED, RecordFields, is_placeholder

# Fields the server derives; they are not part of what the chain covers. `secrets` too: the
# flags found in an event's text at ingest (docs/event-log.md, "Secrets at ingest"). The salt
# and the digest of chain v2 are chained through the v2 form, never as members of the event.
SALT = "content_salt"
DIGEST = "content_digest"
DERIVED_FIELDS = frozenset({"hash", "token_count", "secrets", SALT, DIGEST})
# The members of an event's stored form that are not its kind's own fields (its data).
COMMON_MEMBERS = frozenset({"seq", "kind", "created_at", "client_event_id", "metadata"})
SALT_BYTES = 16


def _digest(data: bytes, key: bytes | None) -> str:
    if key:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def genesis_hash(thread_uid: str, key: bytes | None = None) -> str:
    return _digest(("ctxadmin/v1/" + thread_uid).encode("utf-8"), key)


def event_canonical(event: Mapping[str, Any]) -> bytes:
    """Canonical bytes of an event as stored, without server-derived fields and absent fields."""
    body = {k: v for k, v in event.items() if k not in DERIVED_FIELDS and v is not None}
    return canonical_json(body)


def link_hash(previous: str, canonical_event: bytes, key: bytes | None = None) -> str:
    return _digest(previous.encode("ascii") + canonical_event, key)


def new_salt() -> str:
    """A fresh random salt, as hex."""
    return os.urandom(SALT_BYTES).hex()


def content_digest(salt: str, metadata_text: str, data_text: str) -> str:
    """SHA-256(salt ‖ canonical({"data", "metadata"})) from the two canonical texts (the
    append has them), hex. Plain SHA-256: the salt, not a key, keeps a short content from being
    guessed from its digest once the salt is gone."""
    body = join_canonical({"data": data_text, "metadata": metadata_text})
    return hashlib.sha256(bytes.fromhex(salt) + body.encode("utf-8")).hexdigest()


def v2_canonical(
    *, seq: int, kind: str, created_at: str, client_event_id: str | None, digest: str
) -> bytes:
    """The chained form of a v2 event: what the link commits to instead of the content."""
    members = {
        "v": "2",
        "seq": str(seq),
        "kind": canonical_text(kind),
        "created_at": canonical_text(created_at),
        DIGEST: canonical_text(digest),
    }
    if client_event_id is not None:
        members["client_event_id"] = canonical_text(client_event_id)
    return join_canonical(members).encode("utf-8")


def event_content(event: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, metadata) of an event in its stored form (the kind's fields at the top level)."""
    data = {
        k: v
        for k, v in event.items()
        if k not in COMMON_MEMBERS and k not in DERIVED_FIELDS and v is not None
    }
    return data, event.get("metadata") or {}


def event_digest(event: Mapping[str, Any]) -> str:
    """The content digest recomputed from a v2 event's salt and content."""
    data, metadata = event_content(event)
    return content_digest(event[SALT], canonical_text(metadata), canonical_text(data))


def event_v2_canonical(event: Mapping[str, Any]) -> bytes:
    return v2_canonical(
        seq=event["seq"],
        kind=event["kind"],
        created_at=event["created_at"],
        client_event_id=event.get("client_event_id"),
        digest=event[DIGEST],
    )


def checksum(value: Any, key: bytes | None = None) -> str:
    """SHA-256 (or HMAC-SHA256 with the key) of a value's canonical JSON."""
    return _digest(canonical_json(value), key)


@dataclass(frozen=True)
class ChainVerdict:
    ok: bool
    verified_until: int  # last seq whose hash verified (0 when none)
    first_bad_seq: int | None
    head: str  # the last good hash
    detail: str = ""
    # What was redacted in the walked range, one note each: "redacted at seq N", or "redacted at
    # seq N (written before salted digests)" for a v1 event taken on its record's word.
    redactions: tuple[str, ...] = ()


def verify_chain(
    events: Iterable[Mapping[str, Any]],
    *,
    start_hash: str,
    start_seq: int = 0,
    key: bytes | None = None,
    redactions: Mapping[int, RecordFields] | None = None,
) -> ChainVerdict:
    """Walk events in seq order from `start_seq` (whose hash is `start_hash`).

    Names the first seq that breaks: a gap or reordering (seq is not previous + 1), a stored hash
    that does not match the recomputed one (a modified, inserted, deleted or swapped row), a v2
    event whose content does not match its digest, or one with no salt that no trusted
    redaction record (`redactions`: seq -> record, from a record chain that verified) explains.
    A v1 event rewritten as a redaction says is taken on its record's word, when the record
    holds its hash and the previous one.
    """
    previous, expected_seq = start_hash, start_seq + 1
    notes: list[str] = []
    for event in events:
        seq = event["seq"]
        if seq != expected_seq:
            return ChainVerdict(
                False,
                expected_seq - 1,
                min(seq, expected_seq),
                previous,
                f"seq {expected_seq} expected, found {seq}",
                tuple(notes),
            )
        record = redactions.get(seq) if redactions else None
        problem = ""
        if event.get(DIGEST) is not None:
            if event.get(SALT) is not None:
                if not hmac.compare_digest(event_digest(event), event[DIGEST]):
                    problem = f"content does not match its digest at seq {seq}"
            elif record is None or not _redacted_as_recorded(event, record):
                problem = f"content removed without a redaction record at seq {seq}"
            else:
                notes.append(f"redacted at seq {seq}")
            recomputed = link_hash(previous, event_v2_canonical(event), key)
        elif record is not None and _redacted_as_recorded(event, record):
            if not hmac.compare_digest(record.previous_hash, previous):
                problem = f"the redaction record of seq {seq} names another previous hash"
            recomputed = record.event_hash
            notes.append(f"redacted at seq {seq} (written before salted digests)")
        else:
            recomputed = link_hash(previous, event_canonical(event), key)
        if not problem and not hmac.compare_digest(recomputed, event["hash"]):
            problem = f"hash mismatch at seq {seq}"
        if problem:
            return ChainVerdict(False, seq - 1, seq, previous, problem, tuple(notes))
        previous, expected_seq = recomputed, seq + 1
    return ChainVerdict(True, expected_seq - 1, None, previous, "", tuple(notes))


def _redacted_as_recorded(event: Mapping[str, Any], record: RecordFields) -> bool:
    data, _ = event_content(event)
    return (
        REDACTED in data
        and hmac.compare_digest(record.event_hash, event["hash"])
        and is_placeholder(event, data, record)
    )
