"""The transport shared by `Client` and `AsyncClient`: one request with retries and typed errors.

Retried (up to `retries` extra attempts, exponential backoff with full jitter, capped):
- transport failures where the answer may simply have been lost: connect errors, read and write
  errors, timeouts, a connection the server closed mid-answer (`httpx.NetworkError`,
  `httpx.TimeoutException`, `httpx.RemoteProtocolError`, `httpx.ProxyError`);
- 429, waiting the `Retry-After` seconds the server asks for (instead of the backoff);
- 5xx.

Never retried: every other 4xx (the same request would fail the same way). Retrying a POST is
safe only because every POST this client sends is idempotent: appends carry `client_event_id`s,
threads are created by `external_id`.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ctxadmin_client import __version__
from ctxadmin_client.errors import ConnectionFailed, CtxadminError, error_from_response

RETRYABLE_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.NetworkError,  # connect, read, write, close errors
    httpx.TimeoutException,
    httpx.RemoteProtocolError,  # the server closed the connection without (a whole) answer
    httpx.ProxyError,
)


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class RetryPolicy:
    """When to retry and how long to wait before attempt `attempt + 1`."""

    retries: int = 3
    backoff_base: float = 0.25
    backoff_cap: float = 8.0
    retry_after_cap: float = 120.0
    rng: random.Random = field(default_factory=random.Random)

    def retryable_status(self, status: int) -> bool:
        return status == 429 or status >= 500

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)]; attempt counts from 0."""
        return self.rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2**attempt))

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.status_code == 429:
            hint = parse_retry_after(response.headers.get("Retry-After"))
            if hint is not None:
                return min(hint, self.retry_after_cap)
        return self.backoff(attempt)


@dataclass(frozen=True)
class Call:
    """One API request, described without doing it."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None


def _headers(api_key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {api_key}",
        "Accept": "application/json",
        "User-Agent": f"ctxadmin-client/{__version__}",
    }


def _base_url(base_url: str) -> str:
    """The server's root; a base URL given with the API prefix works too."""
    root = base_url.rstrip("/")
    if root.endswith("/api/v1"):
        root = root[: -len("/api/v1")]
    return root + "/"


def _connection_failed(call: Call, exc: Exception, attempt: int) -> ConnectionFailed:
    return ConnectionFailed(
        "connection_failed",
        0,
        f"{call.method} {call.path}: no answer after {attempt + 1} attempts "
        f"({type(exc).__name__}: {exc})",
    )


def _decode(response: httpx.Response) -> Any:
    """The JSON of a 2xx answer (None for an empty body); raises the typed error otherwise.

    A redirect is an error too (`http_302`...): the API never redirects, so one means the base
    URL points somewhere else (a login page, a proxy)."""
    if not response.is_success:
        raise error_from_response(response, parse_retry_after(response.headers.get("Retry-After")))
    if not response.content:
        return None
    try:
        return json.loads(response.content)
    except ValueError:
        raise CtxadminError(
            "invalid_response",
            response.status_code,
            f"expected JSON from {response.request.method} {response.request.url.path}, got "
            f"{response.headers.get('Content-Type', 'no content type')}",
        ) from None


def _request_kwargs(call: Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if call.params:
        kwargs["params"] = {k: v for k, v in call.params.items() if v is not None}
    if call.json is not None:
        kwargs["json"] = call.json
    return kwargs


# Many small requests go over one kept-alive connection (the documented gunicorn runs threaded
# workers with keep-alive). httpx writes a request's headers and body apart: with Nagle's
# algorithm on, the body then waits for the server's delayed ACK, 40 ms on Linux.
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


class SyncHttp:
    """Blocking transport over `httpx.Client`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        retries: int,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.policy = policy or RetryPolicy(retries=retries)
        self.sleep = sleep or time.sleep
        self.client = httpx.Client(
            base_url=_base_url(base_url),
            headers=_headers(api_key),
            timeout=timeout,
            transport=transport or httpx.HTTPTransport(socket_options=NODELAY),
        )

    def request(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self.client.request(
                    call.method, call.path.lstrip("/"), **_request_kwargs(call)
                )
            except RETRYABLE_EXCEPTIONS as exc:
                if attempt >= self.policy.retries:
                    raise _connection_failed(call, exc, attempt) from exc
                self.sleep(self.policy.delay(attempt, None))
                attempt += 1
                continue
            if self.policy.retryable_status(response.status_code) and (
                attempt < self.policy.retries
            ):
                self.sleep(self.policy.delay(attempt, response))
                attempt += 1
                continue
            return _decode(response)

    def close(self) -> None:
        self.client.close()


class AsyncHttp:
    """Non-blocking transport over `httpx.AsyncClient`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        retries: int,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.policy = policy or RetryPolicy(retries=retries)
        self.sleep = sleep or asyncio.sleep
        self.client = httpx.AsyncClient(
            base_url=_base_url(base_url),
            headers=_headers(api_key),
            timeout=timeout,
            transport=transport or httpx.AsyncHTTPTransport(socket_options=NODELAY),
        )

    async def request(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self.client.request(
                    call.method, call.path.lstrip("/"), **_request_kwargs(call)
                )
            except RETRYABLE_EXCEPTIONS as exc:
                if attempt >= self.policy.retries:
                    raise _connection_failed(call, exc, attempt) from exc
                await self.sleep(self.policy.delay(attempt, None))
                attempt += 1
                continue
            if self.policy.retryable_status(response.status_code) and (
                attempt < self.policy.retries
            ):
                await self.sleep(self.policy.delay(attempt, response))
                attempt += 1
                continue
            return _decode(response)

    async def aclose(self) -> None:
        await self.client.aclose()
