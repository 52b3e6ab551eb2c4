"""Validation and normal form of incoming events (docs/api.md,
"Events — `/api/v1/threads/{id}/events/`").

`normalize_event` turns one submitted JSON object into a `NewEvent`, or raises InvalidEvent
naming every bad field. Pure: the service adds seq, binding, hash and token count.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from threads.domain.canonical import canonical_text, format_time, join_canonical, stable_numbers
from threads.domain.errors import InvalidEvent, PayloadTooLarge
from threads.domain.markers import MARKER_KINDS, RETRACTABLE_KINDS

ROLES = ("system", "developer", "user", "assistant")
RESULT_STATUSES = ("succeeded", "failed", "timeout", "cancelled")
ANNOTATION_TYPES = ("goal", "constraint", "fact", "correction", "decision", "question")
AUTHORITIES = ("user", "tool", "model", "operator")
AGENT_KINDS = (*RETRACTABLE_KINDS, *MARKER_KINDS)
SERVER_KINDS = ("approval_decision", "side_effect_resolution")
COMMON_FIELDS = ("client_event_id", "kind", "created_at", "metadata")
MAX_ID_LENGTH = 200
MAX_SEQ = 2**63 - 1  # a seq is a 64-bit column

# kind -> (required, optional) fields of the kind's own data
KIND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "message": (("role", "content"), ("name",)),
    "tool_call": (
        ("tool_call_id", "tool_name", "arguments"),
        ("side_effect", "idempotency_key", "group"),
    ),
    "tool_result": (("tool_call_id", "status"), ("result", "verified_facts", "request_id")),
    "annotation": (("type", "authority", "payload"), ("refers_to",)),
    "approval_request": (("action", "arguments"), ("tool_name", "expires_at")),
    # Markers (threads.domain.markers): whether `retracts` names a retractable event of the
    # thread is checked by the append, under the thread's lock.
    "retraction": (("retracts",), ()),
    "reset": ((), ()),
}

_ALLOWED_FIELDS = {
    kind: frozenset((*COMMON_FIELDS, *required, *optional))
    for kind, (required, optional) in KIND_FIELDS.items()
}


@dataclass
class NewEvent:
    kind: str
    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    client_event_id: str | None = None
    created_at: datetime | None = None
    digest: str = ""  # of the submitted body: what idempotency compares
    # Canonical texts of each data field and of metadata, when the caller encoded them already
    # (normalize_event does): the append path then never encodes the same value twice.
    data_texts: dict[str, str] | None = None
    data_text: str | None = None  # join_canonical(data_texts)
    metadata_text: str | None = None

    def texts(self) -> tuple[dict[str, str], str]:
        """(canonical text of each data field, canonical text of metadata); the dict is the
        caller's to change."""
        data = self.data_texts
        if data is None:
            data = {name: canonical_text(value) for name, value in self.data.items()}
        metadata = self.metadata_text
        if metadata is None:
            metadata = canonical_text(self.metadata)
        return dict(data), metadata


def parse_time(value: Any) -> datetime:
    """An RFC 3339 string as an aware datetime in UTC; ValueError names what is wrong."""
    if not isinstance(value, str):
        raise ValueError("must be an RFC 3339 string")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise ValueError("must be an RFC 3339 time such as 2026-01-31T12:00:00Z") from exc
    if parsed.tzinfo is None:
        raise ValueError("must carry a timezone (Z or +hh:mm)")
    try:
        # Canonical times are UTC; an offset at the edge of the calendar (0001-01-01T00:00+01:00)
        # has no UTC form and must be refused here, not crash the chain's formatting later.
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("is outside the representable range of times") from exc


def _text(
    errors: dict[str, str],
    body: dict[str, Any],
    name: str,
    *,
    limit: int = 0,
    required: bool = True,
) -> None:
    value = body.get(name)
    if value is None:
        if required:
            errors[name] = "this field is required"
        return
    if not isinstance(value, str) or not value.strip():
        errors[name] = "must be a non-empty string"
    elif limit and len(value) > limit:
        errors[name] = f"must be at most {limit} characters"


def _choice(
    errors: dict[str, str], body: dict[str, Any], name: str, choices: tuple[str, ...]
) -> None:
    value = body.get(name)
    if value is None:
        errors[name] = "this field is required"
    elif value not in choices:
        errors[name] = f"must be one of {', '.join(choices)}"


def _object(errors: dict[str, str], body: dict[str, Any], name: str, required: bool = True) -> None:
    value = body.get(name)
    if value is None:
        if required:
            errors[name] = "this field is required"
    elif not isinstance(value, dict):
        errors[name] = "must be a JSON object"


def _validate_kind(kind: str, body: dict[str, Any], errors: dict[str, str]) -> None:
    if kind == "message":
        _choice(errors, body, "role", ROLES)
        content = body.get("content")
        if content is None:
            errors["content"] = "this field is required"
        elif isinstance(content, list):
            if not all(isinstance(p, str | dict) for p in content):
                errors["content"] = "parts must be strings or objects"
        elif not isinstance(content, str):
            errors["content"] = "must be a string or a list of parts"
        if "name" in body:
            _text(errors, body, "name", limit=MAX_ID_LENGTH)
    elif kind == "tool_call":
        _text(errors, body, "tool_call_id", limit=MAX_ID_LENGTH)
        _text(errors, body, "tool_name", limit=MAX_ID_LENGTH)
        _object(errors, body, "arguments")
        side_effect = body.get("side_effect", False)
        if not isinstance(side_effect, bool):
            errors["side_effect"] = "must be true or false"
        _text(errors, body, "idempotency_key", limit=MAX_ID_LENGTH, required=side_effect is True)
        if "group" in body:
            _text(errors, body, "group", limit=MAX_ID_LENGTH)
    elif kind == "tool_result":
        _text(errors, body, "tool_call_id", limit=MAX_ID_LENGTH)
        _choice(errors, body, "status", RESULT_STATUSES)
        if "request_id" in body:
            _text(errors, body, "request_id", limit=MAX_ID_LENGTH)
        facts = body.get("verified_facts")
        if facts is not None and not (
            isinstance(facts, list)
            and all(
                isinstance(f, dict)
                and isinstance(f.get("key"), str)
                and f["key"]
                and "value" in f
                and set(f) <= {"key", "value"}
                for f in facts
            )
        ):
            errors["verified_facts"] = 'must be a list of {"key": string, "value": any}'
    elif kind == "annotation":
        _choice(errors, body, "type", ANNOTATION_TYPES)
        _choice(errors, body, "authority", AUTHORITIES)
        _object(errors, body, "payload")
        payload = body.get("payload")
        if isinstance(payload, dict) and body.get("type") in ANNOTATION_TYPES:
            if body["type"] in ("fact", "correction"):
                if not isinstance(payload.get("key"), str) or not payload.get("key"):
                    errors["payload"] = 'a fact or correction needs {"key": string, "value": any}'
                elif "value" not in payload:
                    errors["payload"] = 'a fact or correction needs a "value"'
            elif not isinstance(payload.get("text"), str) or not payload["text"].strip():
                errors["payload"] = f'a {body["type"]} needs {{"text": string}}'
        refers = body.get("refers_to")
        if refers is not None and not (
            isinstance(refers, list)
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in refers)
        ):
            errors["refers_to"] = "must be a list of positive seq numbers"
    elif kind == "approval_request":
        _text(errors, body, "action", limit=300)
        _object(errors, body, "arguments")
        if "tool_name" in body:
            _text(errors, body, "tool_name", limit=MAX_ID_LENGTH)
        if "expires_at" in body:
            try:
                parse_time(body["expires_at"])
            except ValueError as exc:
                errors["expires_at"] = str(exc)
    elif kind == "retraction":
        target = body.get("retracts")
        if target is None:
            errors["retracts"] = "this field is required"
        elif not isinstance(target, int) or isinstance(target, bool) or not 1 <= target <= MAX_SEQ:
            errors["retracts"] = "must be a positive seq number"


def normalize_event(body: Any, *, max_bytes: int) -> NewEvent:
    """Validate one event object as an agent submits it."""
    if not isinstance(body, dict):
        raise InvalidEvent("an event must be a JSON object")
    kind = body.get("kind")
    if not isinstance(kind, str):
        # Checked first: an unhashable kind (a list, an object) cannot even be looked up below.
        raise InvalidEvent(
            "kind is required", fields={"kind": f"must be one of {', '.join(AGENT_KINDS)}"}
        )
    if kind in SERVER_KINDS:
        raise InvalidEvent(
            f"{kind} events are written by ctxadmin itself, never accepted from agents",
            fields={"kind": "not accepted from agents"},
        )
    if kind not in KIND_FIELDS:
        raise InvalidEvent(
            "unknown event kind",
            fields={"kind": f"must be one of {', '.join(AGENT_KINDS)}"},
        )
    required, optional = KIND_FIELDS[kind]
    errors: dict[str, str] = {}
    for name in sorted(body.keys() - _ALLOWED_FIELDS[kind]):
        errors[name] = f"unknown field for a {kind} event"
    _text(errors, body, "client_event_id", limit=MAX_ID_LENGTH, required=False)
    _object(errors, body, "metadata", required=False)
    created_at = None
    if body.get("created_at") is not None:
        try:
            created_at = parse_time(body["created_at"])
        except ValueError as exc:
            errors["created_at"] = str(exc)
    _validate_kind(kind, body, errors)
    if errors:
        raise InvalidEvent(f"invalid {kind} event", fields=errors)
    data = {
        k: stable_numbers(body[k]) for k in required + optional if k in body and body[k] is not None
    }
    if kind == "tool_call":
        data["side_effect"] = bool(body.get("side_effect", False))
    metadata: dict[str, Any] = stable_numbers(body.get("metadata") or {})
    try:
        # Each field is encoded once; the pieces make the canonical form of the normalized
        # body ({kind, data, metadata, client_event_id, created_at}), which serves the size
        # limit and the idempotency digest, and later the stored and chained forms.
        data_texts = {name: canonical_text(value) for name, value in data.items()}
        data_text = join_canonical(data_texts)
        metadata_text = canonical_text(metadata)
        canonical = join_canonical(
            {
                "kind": canonical_text(kind),
                "data": data_text,
                "metadata": metadata_text,
                "client_event_id": canonical_text(body.get("client_event_id")),
                "created_at": canonical_text(format_time(created_at) if created_at else None),
            }
        ).encode("utf-8")
    except (TypeError, ValueError) as exc:
        # Lone surrogates (UnicodeEncodeError is a ValueError), NaN/Infinity or non-JSON values
        # have no canonical form, so they could never be chained or exported.
        raise InvalidEvent(f"the event is not storable JSON: {exc}") from exc
    if len(canonical) > max_bytes:
        raise PayloadTooLarge(
            f"event is {len(canonical)} bytes; the limit is {max_bytes} (CTXADMIN_MAX_EVENT_BYTES)",
            fields={"limit": max_bytes, "size": len(canonical)},
        )
    return NewEvent(
        kind=kind,
        data=data,
        metadata=metadata,
        client_event_id=body.get("client_event_id"),
        created_at=created_at,
        digest=hashlib.sha256(canonical).hexdigest(),
        data_texts=data_texts,
        data_text=data_text,
        metadata_text=metadata_text,
    )


def stored_form(
    *,
    seq: int,
    kind: str,
    created_at: datetime | str,
    client_event_id: str | None,
    metadata: dict[str, Any],
    data: dict[str, Any],
) -> dict[str, Any]:
    """The event exactly as the chain and exports see it (docs/api.md,
    "Canonical forms and checksums"). `created_at` is a time, or its canonical text (format_time)
    when the caller has it."""
    event: dict[str, Any] = {
        "seq": seq,
        "kind": kind,
        "created_at": created_at if isinstance(created_at, str) else format_time(created_at),
        "metadata": metadata,
    }
    if client_event_id is not None:
        event["client_event_id"] = client_event_id
    event.update(data)
    return event


def stored_members(
    *,
    seq: int,
    kind: str,
    created_at: str,
    client_event_id: str | None,
    metadata_text: str,
    data_texts: dict[str, str],
) -> dict[str, str]:
    """stored_form with every member already canonical text (created_at formatted):
    join_canonical of it is the chained form, without encoding any value again."""
    members = {
        "seq": str(seq),
        "kind": canonical_text(kind),
        "created_at": canonical_text(created_at),
        "metadata": metadata_text,
    }
    if client_event_id is not None:
        members["client_event_id"] = canonical_text(client_event_id)
    members.update(data_texts)
    return members
