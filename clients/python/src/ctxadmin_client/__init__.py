"""ctxadmin's Python client: an agent's events in, its working context out.

    from ctxadmin_client import Client
    client = Client("https://ctxadmin.example.com", api_key)
    thread = client.thread("order-10086")
    thread.append({"kind": "message", "role": "user", "content": "Refund order 10086"})
    context = thread.context()

Importing this package imports httpx and nothing of the server (no Django).
"""

from __future__ import annotations

__version__ = "0.1.0"

from ctxadmin_client.async_client import AsyncClient, AsyncThread  # noqa: E402
from ctxadmin_client.client import Client, Thread  # noqa: E402
from ctxadmin_client.errors import (  # noqa: E402
    ApprovalTimeout,
    AuthError,
    ChainBrokenError,
    ConflictError,
    ConnectionFailed,
    CtxadminError,
    MirrorConflict,
    NotFoundError,
    OutcomeUnknown,
    RateLimited,
    ServerError,
    SideEffectPending,
    SideEffectRecorded,
    UnprocessableError,
    ValidationError,
    is_outcome_unknown,
)
from ctxadmin_client.exactly_once import Outcome  # noqa: E402

__all__ = [
    "ApprovalTimeout",
    "AsyncClient",
    "AsyncThread",
    "AuthError",
    "ChainBrokenError",
    "Client",
    "ConflictError",
    "ConnectionFailed",
    "CtxadminError",
    "MirrorConflict",
    "NotFoundError",
    "Outcome",
    "OutcomeUnknown",
    "RateLimited",
    "ServerError",
    "SideEffectPending",
    "SideEffectRecorded",
    "Thread",
    "UnprocessableError",
    "ValidationError",
    "__version__",
    "is_outcome_unknown",
]
