"""The hash chain over a thread's events (docs/event-log.md, "Event log").

h_0 = H("ctxadmin/v1/" + thread_uid); h_i = H(h_{i-1} ‖ canonical(e_i)), where H is SHA-256, or
HMAC-SHA256 with the chain key when one is configured, so that a writer of the database without
the key cannot forge a consistent chain.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threads.domain.canonical import canonical_json

# Fields the server derives; they are not part of what the chain covers. `secrets` too: the
# flags found in an event's text at ingest (docs/event-log.md, "Secrets at ingest").
DERIVED_FIELDS = frozenset({"hash", "token_count", "secrets"})


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


def verify_chain(
    events: Iterable[Mapping[str, Any]],
    *,
    start_hash: str,
    start_seq: int = 0,
    key: bytes | None = None,
) -> ChainVerdict:
    """Walk events in seq order from `start_seq` (whose hash is `start_hash`).

    Names the first seq that breaks: a gap or reordering (seq is not previous + 1), or a stored
    hash that does not match the recomputed one (a modified, inserted, deleted or swapped row).
    """
    previous, expected_seq = start_hash, start_seq + 1
    for event in events:
        seq = event["seq"]
        if seq != expected_seq:
            return ChainVerdict(
                False,
                expected_seq - 1,
                min(seq, expected_seq),
                previous,
                f"seq {expected_seq} expected, found {seq}",
            )
        recomputed = link_hash(previous, event_canonical(event), key)
        if not hmac.compare_digest(recomputed, event["hash"]):
            return ChainVerdict(False, seq - 1, seq, previous, f"hash mismatch at seq {seq}")
        previous, expected_seq = recomputed, seq + 1
    return ChainVerdict(True, expected_seq - 1, None, previous)
