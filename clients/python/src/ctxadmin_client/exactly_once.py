"""Exactly once: the side-effect ledger decides whether a side-effecting call runs
(docs/clients.md, "Exactly once: side effects and the ledger").

Shared by the plain client (`Thread.run_once`, `AsyncThread.run_once`) and the Agents SDK
session (`CtxadminSession.exactly_once`). Before a side-effecting tool runs, the ledger is
asked for its idempotency key:

- no record: the call is stored first (so that a run dying inside the tool leaves it
  `running` in the queue, never forgotten), then the tool runs and its result is stored;
- a recorded outcome (`succeeded`, `failed`, `cancelled`, by a result or a person's
  resolution): the tool does not run; the recorded result (or the resolution with its
  evidence) is the call's result;
- `running` or `unknown`: the tool does not run; `SideEffectPending` is raised, and the agent
  is held at that call until a person resolves it.

A tool's exception is a `timeout` result (outcome unknown) when `is_outcome_unknown` says so,
a `failed` one otherwise: `failed` means the tool knows nothing happened.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxadmin_client.errors import OutcomeUnknown, SideEffectPending, is_outcome_unknown

__all__ = [
    "PENDING_STATUSES",
    "Outcome",
    "OutcomeUnknown",
    "idempotency_key_for",
    "is_outcome_unknown",
    "recorded_outcome",
]

# A record with one of these statuses has no known outcome: the call is held.
PENDING_STATUSES = ("running", "unknown")
KEY_ARGUMENT = "idempotency_key"


@dataclass(frozen=True)
class Outcome:
    """What a side-effecting call came to.

    `status` is `succeeded`, `failed` or `cancelled`; `result` the tool's return value, or the
    recorded result (or resolution) when the call did not run; `executed` whether the tool
    ran this time; `idempotency_key` the ledger's key."""

    status: str
    result: Any
    executed: bool
    idempotency_key: str


def idempotency_key_for(call_id: str, arguments: Any) -> str:
    """The key a call is recorded under: the arguments' own `idempotency_key` when they carry
    a non-empty one (the agent names the effect: a retry with another call id is still the
    same effect), else the call id."""
    if isinstance(arguments, Mapping):
        key = arguments.get(KEY_ARGUMENT)
        if isinstance(key, str) and key.strip():
            return key
    return call_id


def call_event(
    call_id: str, tool_name: str, arguments: Mapping[str, Any], key: str
) -> dict[str, Any]:
    """The side-effecting `tool_call` event of a call (docs/api.md,
    "Events — `/api/v1/threads/{id}/events/`")."""
    return {
        "kind": "tool_call",
        "tool_call_id": call_id,
        "tool_name": tool_name,
        "arguments": dict(arguments),
        "side_effect": True,
        "idempotency_key": key,
    }


def result_event(call_id: str, key: str, status: str, result: Any) -> dict[str, Any]:
    """The `tool_result` event a guard appends for a call."""
    return {
        "kind": "tool_result",
        "tool_call_id": call_id,
        "status": status,
        "result": result,
        "client_event_id": once_id(call_id, key, "result"),
    }


def once_id(call_id: str, key: str, part: str) -> str:
    """A client_event_id for a guard's own event: the same call and key give the same id, so
    a retried write replays instead of storing twice."""
    digest = hashlib.sha256(f"{call_id}\x00{key}".encode()).hexdigest()[:32]
    return f"once-{digest}-{part}"


def result_status(exc: BaseException) -> str:
    """A tool's exception as a tool_result status: `timeout` when the outcome is unknown."""
    return "timeout" if is_outcome_unknown(exc) else "failed"


def error_result(exc: BaseException) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)}


def held(record: Mapping[str, Any], call_id: str, tool_name: str) -> SideEffectPending:
    return SideEffectPending(
        call_id=call_id,
        tool_name=str(record.get("tool_name") or tool_name),
        idempotency_key=str(record.get("idempotency_key")),
        status=str(record.get("status")),
        side_effect=dict(record),
    )


def recorded_outcome(
    record: Mapping[str, Any], result_event: Mapping[str, Any] | None
) -> tuple[str, Any]:
    """(status, result) of a record whose outcome is known: the last resolution, with its
    evidence, when a person (or a status check) settled it; else its result's content."""
    resolutions = record.get("resolutions") or []
    if resolutions:
        last = resolutions[-1]
        return str(last.get("status")), {
            "resolution": last.get("status"),
            "evidence": last.get("evidence", ""),
            "resolved_by": last.get("actor", ""),
            "note": "No result came back from the tool; this is the recorded outcome. Do not "
            "run the call again.",
        }
    result = result_event.get("result") if result_event is not None else None
    return str(record.get("status")), result


def output_text(result: Any) -> str:
    """A result as the text a model reads."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
