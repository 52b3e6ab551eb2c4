"""The retry rules, client behaviour alone (httpx.MockTransport stands in for the server):
429 waits Retry-After, 5xx and lost answers back off and retry, every other 4xx fails at once,
and a retried append sends the very same client_event_ids."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import httpx
import pytest
from ctxadmin_client import (
    AsyncClient,
    AuthError,
    Client,
    ConflictError,
    ConnectionFailed,
    CtxadminError,
    NotFoundError,
    RateLimited,
    ServerError,
    UnprocessableError,
    ValidationError,
)
from ctxadmin_client._http import RetryPolicy, parse_retry_after

THREAD = {"id": "7d1c2d36-1d1e-4f57-9c61-3a7a5e1b0001", "external_id": "t-1"}
Handler = Callable[[httpx.Request], httpx.Response]


def error(status: int, code: str, **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} happened", "fields": {"x": "y"}}}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """Answers requests from a list, recording each request; the last answer repeats."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Sleeps:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def make_client(script: Script, sleeps: Sleeps, retries: int = 3) -> Client:
    return Client(
        "http://ctxadmin.test",
        "key",
        retries=retries,
        transport=httpx.MockTransport(script),
        sleep=sleeps,
    )


def test_429_waits_retry_after_then_succeeds() -> None:
    script = Script(
        error(429, "throttled", **{"Retry-After": "7"}),
        error(429, "throttled", **{"Retry-After": "0.5"}),
        httpx.Response(201, json=THREAD),
    )
    sleeps = Sleeps()
    thread = make_client(script, sleeps).thread("t-1")
    assert thread.external_id == "t-1"
    assert sleeps.seconds == [7.0, 0.5]
    assert len(script.requests) == 3


def test_429_until_the_retries_are_spent_raises_rate_limited() -> None:
    script = Script(error(429, "throttled", **{"Retry-After": "2"}))
    sleeps = Sleeps()
    with pytest.raises(RateLimited) as caught:
        make_client(script, sleeps, retries=2).get_thread("t-1")
    assert (caught.value.status, caught.value.code, caught.value.retry_after) == (
        429,
        "throttled",
        2.0,
    )
    assert isinstance(caught.value, CtxadminError)
    assert len(script.requests) == 3
    assert sleeps.seconds == [2.0, 2.0]


def test_retry_after_as_http_date_and_garbage() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    # No usable hint: the backoff decides.
    script = Script(
        error(429, "throttled", **{"Retry-After": "soon"}), httpx.Response(200, json=THREAD)
    )
    sleeps = Sleeps()
    make_client(script, sleeps).get_thread("t-1")
    assert len(sleeps.seconds) == 1 and 0 <= sleeps.seconds[0] <= 0.25


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried_with_backoff(status: int) -> None:
    script = Script(
        error(status, "server_error"),
        error(status, "server_error"),
        httpx.Response(200, json=THREAD),
    )
    sleeps = Sleeps()
    make_client(script, sleeps).get_thread("t-1")
    assert len(script.requests) == 3
    assert len(sleeps.seconds) == 2


def test_5xx_until_the_retries_are_spent_raises_server_error() -> None:
    script = Script(httpx.Response(502, text="<html>Bad Gateway</html>"))
    sleeps = Sleeps()
    with pytest.raises(ServerError) as caught:
        make_client(script, sleeps).get_thread("t-1")
    # Not the contract's error shape: still a CtxadminError, code http_<status>.
    assert (caught.value.status, caught.value.code) == (502, "http_502")
    assert "Bad Gateway" in caught.value.message
    assert len(script.requests) == 4


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (400, "validation_error", ValidationError),
        (401, "authentication_failed", AuthError),
        (403, "permission_denied", AuthError),
        (404, "not_found", NotFoundError),
        (409, "idempotency_conflict", ConflictError),
        (413, "payload_too_large", CtxadminError),
        (422, "no_open_tool_call", UnprocessableError),
    ],
)
def test_other_4xx_are_never_retried(status: int, code: str, kind: type[CtxadminError]) -> None:
    script = Script(error(status, code))
    sleeps = Sleeps()
    with pytest.raises(kind) as caught:
        make_client(script, sleeps).get_thread("t-1")
    assert (caught.value.status, caught.value.code, caught.value.fields) == (
        status,
        code,
        {"x": "y"},
    )
    assert caught.value.message == f"{code} happened"
    assert len(script.requests) == 1
    assert sleeps.seconds == []


def test_a_non_json_4xx_is_a_ctxadmin_error_with_http_code() -> None:
    script = Script(httpx.Response(418, text="I'm a teapot"))
    with pytest.raises(CtxadminError) as caught:
        make_client(script, Sleeps()).get_thread("t-1")
    assert (caught.value.status, caught.value.code, caught.value.fields) == (418, "http_418", {})
    assert type(caught.value) is CtxadminError


def test_a_redirect_or_a_page_that_is_not_json_is_an_error() -> None:
    # A base URL pointing at the dashboard: a redirect to the login page, never followed.
    script = Script(httpx.Response(302, headers={"Location": "/accounts/login/"}))
    with pytest.raises(CtxadminError) as redirected:
        make_client(script, Sleeps()).get_thread("t-1")
    assert (redirected.value.status, redirected.value.code) == (302, "http_302")
    script = Script(
        httpx.Response(200, text="<html>hello</html>", headers={"Content-Type": "text/html"})
    )
    with pytest.raises(CtxadminError) as html:
        make_client(script, Sleeps()).get_thread("t-1")
    assert (html.value.status, html.value.code) == (200, "invalid_response")
    assert "text/html" in html.value.message


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("refused"),
        httpx.ReadError("reset"),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ReadTimeout("slow"),
    ],
)
def test_lost_answers_are_retried(exc: Exception) -> None:
    script = Script(exc, httpx.Response(200, json=THREAD))
    sleeps = Sleeps()
    make_client(script, sleeps).get_thread("t-1")
    assert len(script.requests) == 2 and len(sleeps.seconds) == 1


def test_no_answer_after_every_attempt_raises_connection_failed() -> None:
    script = Script(httpx.ConnectError("refused"))
    with pytest.raises(ConnectionFailed) as caught:
        make_client(script, Sleeps(), retries=2).get_thread("t-1")
    assert (caught.value.status, caught.value.code) == (0, "connection_failed")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(script.requests) == 3


def test_retries_zero_means_one_attempt() -> None:
    script = Script(error(503, "server_error"))
    with pytest.raises(ServerError):
        make_client(script, Sleeps(), retries=0).get_thread("t-1")
    assert len(script.requests) == 1


def test_a_retried_append_resends_the_same_client_event_ids() -> None:
    answer = [{"seq": 1, "replayed": True}, {"seq": 2, "replayed": True}]
    script = Script(
        httpx.Response(201, json=THREAD),
        httpx.ReadError("answer lost"),
        error(503, "server_error"),
        httpx.Response(200, json=answer),
    )
    client = make_client(script, Sleeps())
    thread = client.thread("t-1")
    mine = {"kind": "message", "role": "user", "content": "b", "client_event_id": "mine"}
    first = {"kind": "message", "role": "user", "content": "a"}
    assert thread.append(first, mine) == answer
    bodies = [json.loads(r.content) for r in script.requests[1:]]
    assert len(bodies) == 3 and bodies[0] == bodies[1] == bodies[2]
    ids = [e["client_event_id"] for e in bodies[0]["events"]]
    assert ids[1] == "mine" and len(ids[0]) == 32
    assert first["client_event_id"] == ids[0], "set on the caller's dict, for its own retries"


def test_more_than_1000_events_go_in_chunks_of_at_most_1000() -> None:
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events/"):
            events = json.loads(request.content)["events"]
            start = sum(seen)
            seen.append(len(events))
            return httpx.Response(201, json=[{"seq": start + i + 1} for i in range(len(events))])
        return httpx.Response(201, json=THREAD)

    client = Client("http://ctxadmin.test", "key", transport=httpx.MockTransport(handler))
    thread = client.thread("t-1")
    answers = thread.append(
        *({"kind": "message", "role": "user", "content": str(i)} for i in range(2500))
    )
    assert seen == [1000, 1000, 500]
    assert [a["seq"] for a in answers] == list(range(1, 2501))
    assert thread.append() == []


def test_backoff_is_capped_and_jittered() -> None:
    policy = RetryPolicy(retries=10, rng=random.Random(1))
    delays = [policy.backoff(attempt) for attempt in range(12)]
    assert all(0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) == len(delays)
    assert max(policy.backoff(30) for _ in range(200)) <= 8.0


def test_requests_carry_the_key_and_the_api_prefix_is_optional() -> None:
    script = Script(httpx.Response(200, json=THREAD))
    for base in ("http://ctxadmin.test", "http://ctxadmin.test/", "http://ctxadmin.test/api/v1/"):
        Client(base, "sekret", transport=httpx.MockTransport(script)).get_thread("a b/c")
    assert {str(r.url) for r in script.requests} == {
        "http://ctxadmin.test/api/v1/threads/a%20b%2Fc/"
    }
    assert {r.headers["Authorization"] for r in script.requests} == {"Bearer sekret"}


@pytest.mark.asyncio
async def test_async_client_follows_the_same_rules() -> None:
    script = Script(
        error(429, "throttled", **{"Retry-After": "3"}),
        httpx.ReadError("answer lost"),
        httpx.Response(201, json=THREAD),
        error(409, "idempotency_conflict"),
    )
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    async with AsyncClient(
        "http://ctxadmin.test", "key", transport=httpx.MockTransport(script), sleep=sleep
    ) as client:
        thread = await client.thread("t-1")
        assert len(script.requests) == 3 and waited[0] == 3.0 and len(waited) == 2
        with pytest.raises(ConflictError):
            await thread.append({"kind": "message", "role": "user", "content": "x"})
        assert len(script.requests) == 4
