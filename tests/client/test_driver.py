"""One request driver: the sync client, the async client and the LangGraph saver's sync and
async paths (whichever client the saver was given) meet the same answers the same way.

A loopback HTTP server stands in for ctxadmin and answers from a script: the same error answer
is the same typed error on every path, a 503 or a connection reset N times and then an answer
is retried the same number of times and succeeds, a stalled answer times out after the same
attempts, and an error answer reaches the operation that made the call on every path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from ctxadmin_client import AsyncClient, Client, errors
from ctxadmin_client._http import Call, Operation
from ctxadmin_client.langgraph import CtxadminSaver

from tests.client.loopback import Action, Answer, Loopback, Reset, Stall, answer_json, error

KEY = "sekret"
THREAD = {"id": "7d1c2d36-1d1e-4f57-9c61-3a7a5e1b0001", "external_id": "t-1"}
OK = answer_json(200, THREAD)

# Each path is one way into the driver: its public one-request method (`request`), or an
# operation run as that path runs the saver's and the clients' own (`run`).
PATHS = [
    "client",  # Client
    "async_client",  # AsyncClient
    "saver",  # CtxadminSaver(Client), sync methods
    "async_saver",  # CtxadminSaver(AsyncClient), async methods
    "saver_sync_of_async",  # CtxadminSaver(AsyncClient), sync methods
    "saver_async_of_sync",  # CtxadminSaver(Client), async methods
]


def drive(
    path: str,
    url: str,
    operation: Callable[[], Operation[Any]] | None = None,
    *,
    timeout: float = 5.0,
    retries: int = 2,
    waits: list[float] | None = None,
) -> Any:
    """Make the path's client (or saver), do one request on it (or run `operation()`), close
    it; returns what that returned, raises what it raised. Waits between attempts are recorded
    in `waits` instead of slept, where the path's client takes a `sleep`."""
    recorded = waits if waits is not None else []

    def sleep(seconds: float) -> None:
        recorded.append(seconds)

    async def asleep(seconds: float) -> None:
        recorded.append(seconds)

    kw: dict[str, Any] = {"timeout": timeout, "retries": retries}
    if path == "client":
        with Client(url, KEY, sleep=sleep, **kw) as client:
            return client._run(operation()) if operation else client.get_thread("t-1").data
    if path in ("saver", "saver_sync_of_async"):
        given = Client(url, KEY, sleep=sleep, **kw) if path == "saver" else None
        saver = CtxadminSaver(given or AsyncClient(url, KEY, sleep=asleep, **kw))
        try:
            return saver._run(operation()) if operation else saver.delete_thread("t-1")
        finally:
            saver.close()

    async def go() -> Any:
        if path == "async_client":
            async with AsyncClient(url, KEY, sleep=asleep, **kw) as client:
                if operation:
                    return await client._run(operation())
                return (await client.get_thread("t-1")).data
        given = AsyncClient(url, KEY, sleep=asleep, **kw) if path == "async_saver" else None
        saver = CtxadminSaver(given or Client(url, KEY, sleep=sleep, **kw))
        try:
            if operation:
                return await saver._arun(operation())
            return await saver.adelete_thread("t-1")
        finally:
            await saver.aclose()

    return asyncio.run(go())


@pytest.fixture
def loopback() -> Iterator[Callable[..., Loopback]]:
    servers: list[Loopback] = []

    def start(*actions: Action) -> Loopback:
        servers.append(Loopback(*actions))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


ERRORS = [
    (error(400, "validation_error"), errors.ValidationError, "validation_error", 1),
    (error(401, "authentication_failed"), errors.AuthError, "authentication_failed", 1),
    (error(403, "permission_denied"), errors.AuthError, "permission_denied", 1),
    (error(404, "not_found"), errors.NotFoundError, "not_found", 1),
    (error(409, "idempotency_conflict"), errors.ConflictError, "idempotency_conflict", 1),
    (error(422, "no_open_tool_call"), errors.UnprocessableError, "no_open_tool_call", 1),
    (error(429, "throttled", **{"Retry-After": "0"}), errors.RateLimited, "throttled", 3),
    (error(503, "server_error"), errors.ServerError, "server_error", 3),
    (Answer(502, b"<html>Bad Gateway</html>"), errors.ServerError, "http_502", 3),
    (Answer(418, b"I'm a teapot"), errors.CtxadminError, "http_418", 1),
    (Answer(302, b"", {"Location": "/accounts/login/"}), errors.CtxadminError, "http_302", 1),
    (Answer(200, b"<html>hi</html>", {"Content-Type": "text/html"}), errors.CtxadminError, "", 1),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("answer", "kind", "code", "attempts"), ERRORS)
def test_the_same_error_answer_is_the_same_typed_error(
    loopback: Callable[..., Loopback],
    path: str,
    answer: Answer,
    kind: type[errors.CtxadminError],
    code: str,
    attempts: int,
) -> None:
    server = loopback(answer)
    with pytest.raises(errors.CtxadminError) as caught:
        drive(path, server.url, retries=2)
    assert type(caught.value) is kind
    assert caught.value.status == answer.status
    assert caught.value.code == (code or "invalid_response")
    if code and not code.startswith("http_"):
        assert (caught.value.message, caught.value.fields) == (f"{code} happened", {"x": "y"})
    if kind is errors.RateLimited:
        assert caught.value.retry_after == 0.0  # type: ignore[attr-defined]
    assert len(server.requests) == attempts, "retried only what may succeed again"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("failure", [error(503, "server_error"), Reset()], ids=["503", "reset"])
def test_failing_twice_then_answering_is_retried_the_same_way(
    loopback: Callable[..., Loopback], path: str, failure: Action
) -> None:
    server = loopback(failure, failure, OK)
    waits: list[float] = []
    answered = drive(path, server.url, retries=2, waits=waits)
    assert answered == (THREAD if path in ("client", "async_client") else None)
    assert len(server.requests) == 3
    assert len(set(server.requests)) == 1, "the very same request each time"
    if path != "saver_sync_of_async":  # its sync twin sleeps for real
        assert len(waits) == 2 and all(0 <= w <= 0.5 for w in waits)


@pytest.mark.parametrize("path", PATHS)
def test_resets_until_the_retries_are_spent_are_connection_failed(
    loopback: Callable[..., Loopback], path: str
) -> None:
    server = loopback(Reset())
    with pytest.raises(errors.ConnectionFailed) as caught:
        drive(path, server.url, retries=1)
    assert (caught.value.status, caught.value.code) == (0, "connection_failed")
    assert isinstance(caught.value.__cause__, httpx.TransportError)
    assert len(server.requests) == 2


@pytest.mark.parametrize("path", PATHS)
def test_a_stalled_answer_times_out_after_the_same_attempts(
    loopback: Callable[..., Loopback], path: str
) -> None:
    """`timeout` is per attempt and a timeout is retried, on every path: a saver given only an
    async client keeps its timeout and retries on its sync path too."""
    server = loopback(Stall(3.0, OK))
    started = time.monotonic()
    with pytest.raises(errors.ConnectionFailed) as caught:
        drive(path, server.url, timeout=0.3, retries=1)
    assert isinstance(caught.value.__cause__, httpx.TimeoutException)
    assert len(server.requests) == 2
    assert time.monotonic() - started < 2.0


def missing_then_other() -> Operation[Any]:
    """An operation that answers a 404 with another request."""
    try:
        return (yield Call("GET", "api/v1/threads/missing/"))
    except errors.NotFoundError as exc:
        other = yield Call("GET", "api/v1/threads/t-1/")
        return {"after": exc.code, **other}


@pytest.mark.parametrize("path", PATHS)
def test_an_error_answer_reaches_the_operation_on_every_path(
    loopback: Callable[..., Loopback], path: str
) -> None:
    server = loopback(error(404, "not_found"), OK)
    assert drive(path, server.url, missing_then_other) == {"after": "not_found", **THREAD}
    assert [p for _, p in server.requests] == ["/api/v1/threads/missing/", "/api/v1/threads/t-1/"]


def stopped_midway(closed: list[str]) -> Operation[Any]:
    """An operation that notes when it is closed."""
    try:
        yield Call("GET", "api/v1/threads/t-1/")
        return "answered"
    finally:
        closed.append("closed")


@pytest.mark.parametrize("path", PATHS)
def test_an_operation_is_closed_when_its_request_fails(
    loopback: Callable[..., Loopback], path: str
) -> None:
    """The operation's own clean-up runs when its request ends in an error (the saver's puts
    count the puts under way that way), not whenever the garbage collector gets to it."""
    server = loopback(error(409, "idempotency_conflict"))
    closed: list[str] = []
    with pytest.raises(errors.ConflictError):
        drive(path, server.url, lambda: stopped_midway(closed))
    assert closed == ["closed"]


@pytest.mark.parametrize("orjson_installed", [True, False], ids=["orjson", "json"])
@pytest.mark.parametrize("path", ["client", "async_client"])
def test_an_answer_orjson_refuses_is_read_as_json_reads_it(
    loopback: Callable[..., Loopback],
    path: str,
    orjson_installed: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Answers are parsed by orjson where it is installed; what it refuses (an integer past 64
    bits, a lone surrogate's escape, both valid JSON the server may hand back from an agent's
    own event) is read by the standard library instead, value for value. Without orjson (the
    plain client's one dependency is httpx) the standard library reads them all."""
    if not orjson_installed:
        monkeypatch.setattr("ctxadmin_client._http.orjson", None)
    body = b'{"id": "t", "external_id": "t-1", "n": 123456789012345678901234567890, "s": "\\ud800"}'
    server = loopback(Answer(200, body, {"Content-Type": "application/json"}))
    answered = drive(path, server.url)
    assert answered["n"] == 123456789012345678901234567890
    assert answered["s"] == "\ud800"
