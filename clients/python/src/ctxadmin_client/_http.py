"""The one request driver of the client: `Client`, `AsyncClient` and the LangGraph saver's sync
and async paths all run their operations through it.

A sans-I/O core (`attempts`, `plan`, `Exchange`: building each request, reading each answer,
deciding on retries and waits, raising the typed error of `errors.py`) and two thin transports
that only do its steps: `SyncHttp` over `httpx.Client`, `AsyncHttp` over `httpx.AsyncClient`.
An operation is a generator of `Call`s and `Sleep`s (`_api` holds the client's); an error
answer is raised inside it at the call's `yield`, so that it may answer with another request.

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
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx

from ctxadmin_client import __version__
from ctxadmin_client.errors import ConnectionFailed, CtxadminError, error_from_response

try:  # the `langgraph` extra brings it (LangGraph's own dependencies do too); optional
    import orjson
except ImportError:  # pragma: no cover - the plain client: the standard library's json
    orjson = None  # type: ignore[assignment]

T = TypeVar("T")

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
    headers: dict[str, str] | None = None


class NotModifiedType:
    """What a conditional GET answers when the server says 304: what the caller holds stands."""


NOT_MODIFIED = NotModifiedType()


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
    if response.status_code == 304:
        return NOT_MODIFIED
    if not response.is_success:
        raise error_from_response(response, parse_retry_after(response.headers.get("Retry-After")))
    if not response.content:
        return None
    try:
        return _json_loads(response.content)
    except ValueError:
        raise CtxadminError(
            "invalid_response",
            response.status_code,
            f"expected JSON from {response.request.method} {response.request.url.path}, got "
            f"{response.headers.get('Content-Type', 'no content type')}",
        ) from None


def _json_loads(body: bytes) -> Any:
    """A JSON answer, parsed by orjson where it is installed: a LangGraph restore carries half a
    megabyte of messages, which orjson reads in under half the standard library's time. What
    orjson refuses (an integer beyond 64 bits, a lone surrogate's escape) goes to `json`,
    which reads it or raises ValueError as before."""
    if orjson is not None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def _request_kwargs(call: Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if call.params:
        kwargs["params"] = {k: v for k, v in call.params.items() if v is not None}
    if call.json is not None:
        kwargs["json"] = call.json
    if call.headers:
        kwargs["headers"] = call.headers
    return kwargs


@dataclass(frozen=True)
class Sleep:
    """Wait this many seconds before the next step."""

    seconds: float


@dataclass(frozen=True)
class Send:
    """One HTTP attempt at a call: what a transport sends, relative to the base URL."""

    method: str
    url: str
    kwargs: dict[str, Any]


Step = Call | Sleep  # what an operation yields
Operation = Generator[Step, Any, T]
Outcome = httpx.Response | Exception  # what a transport answers a `Send` with


def one(call: Call) -> Operation[Any]:
    """The operation of a single call."""
    return (yield call)


def attempts(call: Call, policy: RetryPolicy) -> Generator[Send | Sleep, Outcome, Any]:
    """A call with its retries: yields each attempt, answered with the response or with the
    transport error that lost it (one of RETRYABLE_EXCEPTIONS), and each wait between them.
    Returns the decoded answer; raises the typed error of an error answer, or
    `ConnectionFailed` when every attempt went unanswered."""
    send = Send(call.method, call.path.lstrip("/"), _request_kwargs(call))
    attempt = 0
    while True:
        outcome = yield send
        if isinstance(outcome, httpx.Response):
            if attempt >= policy.retries or not policy.retryable_status(outcome.status_code):
                return _decode(outcome)
            delay = policy.delay(attempt, outcome)
        elif attempt >= policy.retries:
            raise _connection_failed(call, outcome, attempt) from outcome
        else:
            delay = policy.delay(attempt, None)
        yield Sleep(delay)
        attempt += 1


def plan(operation: Operation[T], policy: RetryPolicy) -> Generator[Send | Sleep, Outcome, T]:
    """An operation's steps as a transport does them: each call expanded into its attempts.
    An error answer is raised inside the operation, at the call's `yield`, so that it may
    answer with another request; the operation is closed however the plan ends."""
    try:
        answer: Any = None
        error: CtxadminError | None = None
        while True:
            try:
                step = operation.send(answer) if error is None else operation.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            answer, error = None, None
            if isinstance(step, Sleep):
                yield step
                continue
            try:
                answer = yield from attempts(step, policy)
            except CtxadminError as exc:
                error = exc
    finally:
        operation.close()


class Exchange:
    """Running one operation, without I/O: iterate for the steps to do, `answer` each `Send`
    with its outcome; `result` is the operation's value once the iteration ends. A transport
    uses it as a context manager, so that an operation it abandons (an exception of its own,
    a cancelled task) is closed at once."""

    def __init__(self, operation: Operation[Any], policy: RetryPolicy) -> None:
        self._steps = plan(operation, policy)
        self._outcome: Any = None  # what the next step is sent
        self.result: Any = None

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> Send | Sleep:
        try:
            step = self._steps.send(self._outcome)
        except StopIteration as done:
            self.result = done.value
            raise StopIteration from None
        self._outcome = None
        return step

    def answer(self, outcome: Outcome) -> None:
        self._outcome = outcome

    def __enter__(self) -> Exchange:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._steps.close()


@dataclass(frozen=True)
class Endpoint:
    """Where and how a transport talks: the server, the key, seconds per attempt, retries."""

    base_url: str
    api_key: str
    timeout: float
    retries: int

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "base_url": _base_url(self.base_url),
            "headers": _headers(self.api_key),
            "timeout": self.timeout,
        }


# Many small requests go over one kept-alive connection (the documented gunicorn runs threaded
# workers with keep-alive). httpx writes a request's headers and body apart: with Nagle's
# algorithm on, the body then waits for the server's delayed ACK, 40 ms on Linux.
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


_SSL_CONTEXT: ssl.SSLContext | None = None
_SSL_LOCK = threading.Lock()


def ssl_context() -> ssl.SSLContext:
    """The process's one verifying TLS context: loading the CA bundle takes ~17 ms, which httpx
    would spend again for every client (every new saver's first restore)."""
    global _SSL_CONTEXT
    with _SSL_LOCK:
        if _SSL_CONTEXT is None:
            _SSL_CONTEXT = httpx.create_ssl_context()
        return _SSL_CONTEXT


def nodelay_transport() -> httpx.HTTPTransport:
    """An httpx transport whose connections send at once (TCP_NODELAY), verifying TLS with the
    process's shared context."""
    return httpx.HTTPTransport(socket_options=NODELAY, verify=ssl_context())


class SyncHttp:
    """Blocking transport over `httpx.Client`: does an `Exchange`'s steps."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.policy = policy or RetryPolicy(retries=endpoint.retries)
        self.sleep = sleep or time.sleep
        self.client = httpx.Client(
            **endpoint.client_kwargs(),
            transport=transport or nodelay_transport(),
        )

    def run(self, operation: Operation[T]) -> T:
        with Exchange(operation, self.policy) as exchange:
            for step in exchange:
                if isinstance(step, Sleep):
                    self.sleep(step.seconds)
                    continue
                try:
                    exchange.answer(self.client.request(step.method, step.url, **step.kwargs))
                except RETRYABLE_EXCEPTIONS as exc:
                    exchange.answer(exc)
            return exchange.result  # type: ignore[no-any-return]

    def request(self, call: Call) -> Any:
        return self.run(one(call))

    def close(self) -> None:
        self.client.close()


class AsyncHttp:
    """Non-blocking transport over `httpx.AsyncClient`: does an `Exchange`'s steps."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.policy = policy or RetryPolicy(retries=endpoint.retries)
        self.sleep = sleep or asyncio.sleep
        self.client = httpx.AsyncClient(
            **endpoint.client_kwargs(),
            transport=transport
            or httpx.AsyncHTTPTransport(socket_options=NODELAY, verify=ssl_context()),
        )

    async def run(self, operation: Operation[T]) -> T:
        with Exchange(operation, self.policy) as exchange:
            for step in exchange:
                if isinstance(step, Sleep):
                    await self.sleep(step.seconds)
                    continue
                try:
                    exchange.answer(await self.client.request(step.method, step.url, **step.kwargs))
                except RETRYABLE_EXCEPTIONS as exc:
                    exchange.answer(exc)
            return exchange.result  # type: ignore[no-any-return]

    async def request(self, call: Call) -> Any:
        return await self.run(one(call))

    async def aclose(self) -> None:
        await self.client.aclose()
