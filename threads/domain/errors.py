"""Domain errors. Services raise them; the API's exception handler maps each to the
contract's error shape `{"error": {"code", "message", "fields"}}` with its status."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, *, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class InvalidEvent(DomainError):
    code = "validation_error"
    status = 400


class PayloadTooLarge(DomainError):
    code = "payload_too_large"
    status = 413


class IdempotencyConflict(DomainError):
    code = "idempotency_conflict"
    status = 409


class NoOpenToolCall(DomainError):
    code = "no_open_tool_call"
    status = 422


class InvalidRetraction(DomainError):
    """A retraction whose `retracts` names no retractable, not yet retracted, earlier event of
    the thread (docs/api.md, "Append — `POST` (agents)")."""

    code = "invalid_retraction"
    status = 422


class BudgetTooSmall(DomainError):
    code = "budget_too_small"
    status = 422


class Conflict(DomainError):
    code = "conflict"
    status = 409


class FormSentAlready(Conflict):
    """A dashboard form whose one-time token has done its work already (sent again by a
    reload, a resubmit or a second click)."""

    code = "form_sent_already"


class NotFound(DomainError):
    code = "not_found"
    status = 404


class PermissionDenied(DomainError):
    code = "permission_denied"
    status = 403


class InvalidTools(DomainError):
    """A thread's tool definitions are malformed; `fields` names each bad `tools[i]`."""

    code = "validation_error"
    status = 400
