"""Typed errors: every error answer of the server becomes a `CtxadminError`.

The server answers errors as `{"error": {"code", "message", "fields"}}` with a fitting status
(docs/api.md, "Error shape"). `error_from_response` parses that shape; a body that is not that shape
(a proxy's HTML page, an empty 502) still becomes a `CtxadminError`, with the code `http_<status>`.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import httpx

__all__ = [
    "ApprovalTimeout",
    "AuthError",
    "ChainBrokenError",
    "ConflictError",
    "ConnectionFailed",
    "CtxadminError",
    "MirrorConflict",
    "NotFoundError",
    "OutcomeUnknown",
    "RateLimited",
    "ServerError",
    "SideEffectPending",
    "SideEffectRecorded",
    "UnprocessableError",
    "ValidationError",
    "chain_check",
    "error_from_response",
    "is_outcome_unknown",
]


class CtxadminError(Exception):
    """An error answer of the server.

    Attributes:
        code: the machine-readable code (`validation_error`, `not_found`, `idempotency_conflict`,
            `no_open_tool_call`, `budget_too_small`, ...; `http_<status>` when the body was not
            the contract's error shape).
        status: the HTTP status.
        message: the server's human-readable message.
        fields: per-field details (`{}` when there are none).
    """

    def __init__(
        self, code: str, status: int, message: str, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.code = code
        self.status = status
        self.message = message
        self.fields: dict[str, Any] = fields or {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status}, "
            f"message={self.message!r}, fields={self.fields!r})"
        )


class ValidationError(CtxadminError):
    """400: the request was malformed (`validation_error`, `invalid_json`, ...)."""


class AuthError(CtxadminError):
    """401 or 403: a missing, unknown or revoked API key, or an action agents may not take."""


class NotFoundError(CtxadminError):
    """404: no such thread, approval, task... in this workspace."""


class ConflictError(CtxadminError):
    """409: e.g. a `client_event_id` reused with another body (`idempotency_conflict`)."""


class UnprocessableError(CtxadminError):
    """422: e.g. a tool result with no open call, or a budget too small for the pinned content."""


class RateLimited(CtxadminError):
    """429, raised once the retries are spent. `retry_after` is the server's hint in seconds."""

    def __init__(
        self,
        code: str,
        status: int,
        message: str,
        fields: dict[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(code, status, message, fields)
        self.retry_after = retry_after


class ServerError(CtxadminError):
    """5xx, raised once the retries are spent."""


class ConnectionFailed(CtxadminError):
    """No answer at all, after every retry: the connection failed, was dropped or timed out.

    `status` is 0 and `code` is `connection_failed`; the httpx exception is the `__cause__`.
    """


class ChainBrokenError(CtxadminError):
    """A resume refused: the history read (a LangGraph checkpoint, a session's working
    context) reaches past the first bad seq of a broken hash chain, so an agent would act on
    events changed after they were written (docs/clients.md, "Tampered history").

    Raised by the client, not answered by the server (which still serves the read, flagged, for
    people to repair from): `code` is `chain_broken`, `status` 200. `first_bad_seq` is where the
    chain breaks (None when the check named no seq), `integrity` the read's whole verdict
    (`chain_ok`, `first_bad_seq`, `verified_until`, `verified_at`, `reaches_break`). Pass
    `allow_broken_chain=True` to the saver or the session to resume anyway."""

    def __init__(self, integrity: dict[str, Any], what: str) -> None:
        first_bad_seq = integrity.get("first_bad_seq")
        where = "at an unnamed seq" if first_bad_seq is None else f"at seq {first_bad_seq}"
        super().__init__(
            "chain_broken",
            200,
            f"{what} reaches past a break in the thread's hash chain ({where}, verified until "
            f"{integrity.get('verified_until')}): the history was changed after it was written",
            {"integrity": integrity},
        )
        self.first_bad_seq: int | None = first_bad_seq
        self.integrity = integrity


def chain_check(integrity: Any, what: str) -> None:
    """Raise `ChainBrokenError` when a read's `integrity` says it reaches past the chain's
    break (from a server that does not say how far a read reaches: when the chain is broken at
    all)."""
    if not isinstance(integrity, dict):
        return
    if integrity.get("reaches_break", integrity.get("chain_ok") is False):
        raise ChainBrokenError(dict(integrity), what)


class ApprovalTimeout(TimeoutError):
    """`wait_for_decision` ran out of time while the approval was still pending.

    `approval` is the approval record as last read (status `pending`). `expired` is True when
    the wait ended early because the request's `expires_at` has passed (nobody can decide it
    any more). Not a `CtxadminError`: the server answered every poll; nobody decided in time.
    """

    def __init__(self, approval: dict[str, Any], timeout: float, *, expired: bool = False) -> None:
        if expired:
            text = f"approval {approval.get('id')} expired at {approval.get('expires_at')}"
        else:
            text = f"approval {approval.get('id')} is still pending after {timeout:g} seconds"
        super().__init__(text)
        self.approval = approval
        self.timeout = timeout
        self.expired = expired


class _LedgerStop(Exception):
    """What the ledger errors share: the side-effecting call they stop at."""

    def __init__(
        self,
        message: str,
        *,
        call_id: str,
        tool_name: str,
        idempotency_key: str,
        status: str,
        side_effect: dict[str, Any] | None,
    ) -> None:
        super().__init__(message)
        self.call_id = call_id
        self.tool_name = tool_name
        self.idempotency_key = idempotency_key
        self.status = status
        self.side_effect = side_effect


class SideEffectPending(_LedgerStop):
    """A side-effecting call the agent is about to run (or resume into) whose outcome the
    ledger does not know yet: its side effect is `running` (no result: the run that made it
    died, or is still in it) or `unknown` (a timeout). Running it again could do it twice, so
    the agent is held at that call until a person resolves it (docs/clients.md,
    "Exactly once: side effects and the ledger"); the resolution then becomes the call's result.

    Not a `CtxadminError`: the server answered; the ledger says "wait".

    Attributes:
        call_id: the tool call id the agent was at.
        tool_name: the tool's name.
        idempotency_key: the side effect's key (the ledger's record).
        status: the record's status, `running` or `unknown`.
        side_effect: the ledger's record as the server answered it (`id`, `call_seq`, ...),
            or None when it was not read.
    """

    def __init__(
        self,
        *,
        call_id: str,
        tool_name: str,
        idempotency_key: str,
        status: str,
        side_effect: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            f"{tool_name} call {call_id!r} (idempotency key {idempotency_key!r}) is {status}: "
            "its outcome is not known, so it is not run again; resolve it in ctxadmin's "
            "side-effect queue",
            call_id=call_id,
            tool_name=tool_name,
            idempotency_key=idempotency_key,
            status=status,
            side_effect=side_effect,
        )


class OutcomeUnknown(Exception):
    """Raised by a side-effecting tool that cannot tell whether its effect happened (the
    payment API's answer never came, the connection dropped after the request went out).

    The client stores the call's result as a `timeout` (its side effect `unknown`, never
    `failed`), and the call is not run again until a person resolves it. The usual timeout
    and connection-lost exceptions count the same way (`is_outcome_unknown`); raise a plain
    exception only when the tool knows nothing happened (that result is `failed`).
    """


# Exceptions that say "the request may have gone out; no answer came back", by module and
# class name, so that neither requests nor httpx needs to be imported to recognise its own.
_UNKNOWN_NAMES = frozenset(
    {
        ("httpx", "ReadTimeout"),
        ("httpx", "WriteTimeout"),
        ("httpx", "RemoteProtocolError"),
        ("httpx", "ReadError"),
        ("requests.exceptions", "ReadTimeout"),
        ("requests.exceptions", "ChunkedEncodingError"),
        ("urllib3.exceptions", "ReadTimeoutError"),
        ("urllib3.exceptions", "ProtocolError"),
    }
)


def is_outcome_unknown(exc: BaseException) -> bool:
    """Whether a side-effecting tool's exception leaves its outcome unknown: `OutcomeUnknown`,
    `TimeoutError` (so `socket.timeout` and `asyncio.TimeoutError`), `ConnectionResetError`,
    `ConnectionAbortedError`, `BrokenPipeError`, `http.client.RemoteDisconnected` and
    `IncompleteRead`, httpx's `ReadTimeout`, `WriteTimeout`, `RemoteProtocolError` and
    `ReadError`, and requests' `ReadTimeout` and `ChunkedEncodingError` (or a subclass of
    any). A connect timeout, which fails before the request leaves, is not one of them."""
    if isinstance(
        exc,
        OutcomeUnknown
        | TimeoutError
        | ConnectionResetError
        | ConnectionAbortedError
        | BrokenPipeError
        | http.client.RemoteDisconnected
        | http.client.IncompleteRead,
    ):
        return True
    return any(
        (klass.__module__, klass.__name__) in _UNKNOWN_NAMES
        or (klass.__module__.split(".")[0], klass.__name__) in _UNKNOWN_NAMES
        for klass in type(exc).__mro__
    )


class SideEffectRecorded(_LedgerStop):  # noqa: N818 (a statement about the ledger)
    """The LangGraph saver would resume into a side-effecting call whose outcome the ledger
    holds (`status` succeeded, failed or cancelled), but cannot hand that outcome to the graph
    as the tool node's result (no finished task of the tool node to derive the task from, or
    the same AI message also asks for calls that have not run: a ToolNode runs them all).
    Nothing was run; the caller decides (docs/clients.md, "Exactly once with LangGraph").

    Attributes: as `SideEffectPending`'s, and `reason`.
    """

    def __init__(
        self,
        *,
        call_id: str,
        tool_name: str,
        idempotency_key: str,
        status: str,
        reason: str,
        side_effect: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            f"{tool_name} call {call_id!r} (idempotency key {idempotency_key!r}) is {status}: "
            f"it is not run again, and {reason}",
            call_id=call_id,
            tool_name=tool_name,
            idempotency_key=idempotency_key,
            status=status,
            side_effect=side_effect,
        )
        self.reason = reason


class MirrorConflict(CtxadminError):
    """The server refused to mirror the agent's messages into the thread's log and named why
    (`code` `messages_not_mirrored`, `fields` the conflict). The saver raises it rather than
    storing the messages where the log cannot see them: the log never silently parts from the
    agent."""


_BY_STATUS: dict[int, type[CtxadminError]] = {
    400: ValidationError,
    401: AuthError,
    403: AuthError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableError,
}


def error_class(status: int) -> type[CtxadminError]:
    """The most specific `CtxadminError` subclass for an HTTP status."""
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, CtxadminError)


def error_from_response(
    response: httpx.Response, retry_after: float | None = None
) -> CtxadminError:
    """The typed error for an error answer (status >= 400)."""
    status = response.status_code
    code, message, fields = f"http_{status}", response.reason_phrase or "error", {}
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
        raw_fields = error.get("fields")
        fields = raw_fields if isinstance(raw_fields, dict) else {}
    elif response.content:
        text = response.text.strip()
        message = text[:300] if text else message
    if status == 429:
        return RateLimited(code, status, message, fields, retry_after=retry_after)
    return error_class(status)(code, status, message, fields)
