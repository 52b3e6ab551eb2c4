"""Redaction of an event's content (docs/event-log.md, "Redaction"): what a redacted event keeps,
how it reads, what is looked for elsewhere, and the chain of redaction records.

A redacted event keeps its seq, kind, created_at, client_event_id, hash and content digest; its
data becomes the kind's *placeholder* (the structural fields below, which pair calls with results
and replay the ledger, plus `redacted`: who, when and why) and its metadata `{}`. The record of a
redaction is chained per thread, keyed like the event chain, so that a writer of the database
without the chain key cannot forge one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threads.domain.canonical import canonical_json, canonical_text

# The key a redacted event's data holds: {"by", "at", "reason"}. Agents cannot send it (no kind
# lists it, threads.domain.events.KIND_FIELDS).
REDACTED = "redacted"

# Structure, not content: the fields a redacted event keeps. They pair a call with its result
# (tool_call_id, call_seq, duplicate_of), replay the ledger (tool_name, side_effect,
# idempotency_key, status, decision, approval_seq) and shape the conversation (role, type,
# authority, refers_to, group, expires_at). Everything else of the kind's fields goes.
KEPT_FIELDS = frozenset(
    {
        "role",
        "tool_call_id",
        "tool_name",
        "side_effect",
        "idempotency_key",
        "group",
        "status",
        "call_seq",
        "duplicate_of",
        "type",
        "authority",
        "refers_to",
        "expires_at",
        "decision",
        "approval_seq",
    }
)
# Markers hold no content: nothing to redact.
UNREDACTABLE_KINDS = frozenset({"retraction", "reset"})
# A needle shorter than this would match everywhere (docs/event-log.md, "Redaction").
MIN_NEEDLE = 4
MAX_REASON = 2000
RECORD_GENESIS_PREFIX = "ctxadmin/redactions/v1/"


def _digest(data: bytes, key: bytes | None) -> str:
    if key:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


def placeholder_data(data: Mapping[str, Any], *, by: str, at: str, reason: str) -> dict[str, Any]:
    """The data a redacted event keeps: its structural fields and `redacted`."""
    kept = {name: value for name, value in data.items() if name in KEPT_FIELDS}
    kept[REDACTED] = {"by": by, "at": at, "reason": reason}
    return kept


def remains_digest(data: Mapping[str, Any], metadata: Mapping[str, Any]) -> str:
    """SHA-256 of what a redacted event holds: its record commits to it, so that the kept fields
    cannot be changed afterwards either."""
    return hashlib.sha256(canonical_json({"data": data, "metadata": metadata})).hexdigest()


def needles(
    data: Mapping[str, Any], metadata: Mapping[str, Any], secrets: Sequence[str]
) -> list[str]:
    """What to look for in the stores beside the event: the whole text of its content first, then
    every string of at least MIN_NEEDLE characters (values, and keys below the top level), then
    the secret values the scanner found in it; the kept structural fields are left out (they
    stay in the event, and "user" or a tool's name would match everywhere). Each once."""
    content = {name: value for name, value in data.items() if name not in KEPT_FIELDS}
    found: dict[str, None] = {}
    whole = [
        canonical_text(value) if not isinstance(value, str) else value for value in content.values()
    ]
    if metadata:
        whole.append(canonical_text(dict(metadata)))
    for text in whole:
        if len(text) >= MIN_NEEDLE:
            found.setdefault(text, None)
    for value in (*content.values(), dict(metadata)):
        for text in _strings(value):
            if len(text) >= MIN_NEEDLE:
                found.setdefault(text, None)
    for secret in secrets:
        if len(secret) >= MIN_NEEDLE:
            found.setdefault(secret, None)
    return list(found)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def placeholder_text(event: Mapping[str, Any]) -> str:
    """How a redacted event reads to a model: nothing of the content, only the reason."""
    marker = event.get(REDACTED) or {}
    seq = event.get("seq")
    where = f" at seq {seq}" if seq is not None else ""  # an append's count reads no seq
    return f"[redacted{where}: {marker.get('reason', '')}]"


def readable(event: Mapping[str, Any]) -> dict[str, Any]:
    """A redacted event as the working context gives it: the kind's content fields read as the
    placeholder, so that a client turning events into a model's messages finds every field it
    expects. Any other event as it is."""
    if REDACTED not in event:
        return dict(event)
    text = placeholder_text(event)
    out = dict(event)
    kind = event["kind"]
    if kind == "message":
        out["content"] = text
    elif kind == "tool_call":
        out.setdefault("tool_name", "redacted")
        out["arguments"] = {}
    elif kind == "tool_result":
        out["result"] = text
    elif kind == "annotation":
        out["payload"] = {"text": text}
    elif kind == "approval_request":
        out["action"] = text
        out["arguments"] = {}
    elif kind == "approval_decision":
        out["reason"] = text
    elif kind == "side_effect_resolution":
        out["evidence"] = text
    return out


# --- the record chain ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordFields:
    """What a redaction record's hash covers (besides the previous record's hash)."""

    thread: str
    number: int
    seq: int
    by: str
    at: str  # canonical time text
    reason: str
    event_hash: str
    previous_hash: str  # the chain hash before the event (genesis for seq 1)
    remains_digest: str

    def body(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "number": self.number,
            "seq": self.seq,
            "by": self.by,
            "at": self.at,
            "reason": self.reason,
            "event_hash": self.event_hash,
            "previous_hash": self.previous_hash,
            "remains_digest": self.remains_digest,
        }


def record_genesis(thread_uid: str, key: bytes | None = None) -> str:
    return _digest((RECORD_GENESIS_PREFIX + thread_uid).encode("utf-8"), key)


def record_hash(previous: str, fields: RecordFields, key: bytes | None = None) -> str:
    """H(previous record's hash ‖ canonical(record fields)), H as the event chain's."""
    return _digest(previous.encode("ascii") + canonical_json(fields.body()), key)


@dataclass(frozen=True)
class RecordsVerdict:
    trusted: dict[int, RecordFields]  # seq -> the record, for records whose chain verifies
    first_bad_seq: int | None  # the seq of the first record that does not verify
    head: str  # the last good record hash
    detail: str = ""


def verify_records(
    records: Iterable[tuple[RecordFields, str]], *, thread_uid: str, key: bytes | None = None
) -> RecordsVerdict:
    """Walk a thread's redaction records in number order ((fields, stored record_hash) each).
    Records from the first one that does not verify (a gap, a changed field, a record forged
    without the key) on are not trusted."""
    previous = record_genesis(thread_uid, key)
    trusted: dict[int, RecordFields] = {}
    expected = 1
    for fields, stored in records:
        recomputed = record_hash(previous, fields, key)
        if fields.number != expected or not hmac.compare_digest(recomputed, stored):
            return RecordsVerdict(
                trusted,
                fields.seq,
                previous,
                f"the redaction record of seq {fields.seq} does not verify",
            )
        trusted[fields.seq] = fields
        previous, expected = recomputed, expected + 1
    return RecordsVerdict(trusted, None, previous)


def is_placeholder(event: Mapping[str, Any], data: Mapping[str, Any], record: RecordFields) -> bool:
    """Whether a stored event reads as its record says the redaction left it."""
    marker = data.get(REDACTED)
    if not isinstance(marker, Mapping):
        return False
    if dict(marker) != {"by": record.by, "at": record.at, "reason": record.reason}:
        return False
    return remains_digest(data, event.get("metadata") or {}) == record.remains_digest
