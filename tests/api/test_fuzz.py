"""Random bodies against the events endpoint: never a 500, never a change to stored events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import factories
from threads.domain import chain
from threads.keys.chain import chain_key
from threads.models import Event
from threads.selectors import event_dicts

pytestmark = pytest.mark.django_db

ALLOWED = {200, 201, 400, 409, 413, 415, 422}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
FIELD_NAMES = [
    "kind",
    "role",
    "content",
    "client_event_id",
    "created_at",
    "metadata",
    "tool_call_id",
    "tool_name",
    "arguments",
    "side_effect",
    "idempotency_key",
    "status",
    "result",
    "verified_facts",
    "type",
    "authority",
    "payload",
    "refers_to",
    "action",
    "expires_at",
    "events",
    "group",
    "request_id",
    "name",
]
FIELD_VALUES = {
    "kind": st.sampled_from(
        [
            "message",
            "tool_call",
            "tool_result",
            "annotation",
            "approval_request",
            "approval_decision",
            "nope",
        ]
    ),
    "role": st.sampled_from(["user", "assistant", "system", "robot"]),
    "status": st.sampled_from(["succeeded", "failed", "timeout", "cancelled", "maybe"]),
    "type": st.sampled_from(["goal", "constraint", "fact", "correction", "x"]),
    "authority": st.sampled_from(["user", "tool", "model", "operator", "x"]),
    "tool_call_id": st.sampled_from(["c1", "c2", "c3"]),
    "client_event_id": st.sampled_from(["e1", "e2", "e3"]) | json_values,
    "created_at": st.sampled_from(
        [
            "2026-01-01T00:00:00Z",
            "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-05:00",
            "not a time",
            "2026-01-01",
        ]
    ),
}
event_like = st.fixed_dictionaries(
    {}, optional={name: FIELD_VALUES.get(name, json_values) for name in FIELD_NAMES}
)
bodies = (
    event_like
    | st.builds(lambda events: {"events": events}, st.lists(event_like, max_size=5))
    | json_values
)
ESCAPES = st.sampled_from(
    [
        '"\\u0000"',
        '"\\ud800"',
        '"\\udfff\\ud800"',
        "1e400",
        "-1e400",
        "NaN",
        "Infinity",
        "[" * 70 + "]" * 70,
        "{",
        "",
        "nul",
        '"\\x"',
    ]
)


def _snapshot(thread: Any) -> list[tuple[int, str, str]]:
    return list(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("seq", "hash", "request_digest")
    )


def _assert_log_intact(thread: Any, before: list[tuple[int, str, str]]) -> None:
    after = _snapshot(thread)
    assert after[: len(before)] == before  # stored events never change
    thread.refresh_from_db()
    assert thread.last_seq == len(after)
    verdict = chain.verify_chain(
        event_dicts(thread, chain_fields=True),
        start_hash=chain.genesis_hash(str(thread.id), chain_key()),
        key=chain_key(),
    )
    assert verdict.ok, verdict


@pytest.fixture
def seeded(thread: Any) -> Any:
    factories.append(
        thread,
        factories.user("hello"),
        factories.call("c1", "search"),
        {**factories.user("keyed"), "client_event_id": "e1"},
    )
    return thread


FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(body=bodies)
def test_random_json_bodies_never_500(agent, seeded, body):
    before = _snapshot(seeded)
    response = agent.post(
        f"/api/v1/threads/{seeded.id}/events/",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code in ALLOWED, (response.status_code, body)
    if response.status_code >= 400:
        assert response.json()["error"]["code"]
        assert _snapshot(seeded) == before  # nothing partial
    _assert_log_intact(seeded, before)


@FUZZ
@given(body=bodies, escape=ESCAPES, cut=st.integers(min_value=0, max_value=400))
def test_random_bytes_never_500(agent, seeded, body, escape, cut):
    # Splice a hostile JSON fragment into a body, or truncate it: parse errors of every kind.
    text = json.dumps({"kind": "message", "role": "user", "content": body})
    text = text[:cut] + escape + text[cut:] if cut % 2 else text[:cut]
    before = _snapshot(seeded)
    response = agent.post(
        f"/api/v1/threads/{seeded.id}/events/",
        data=text.encode("utf-8", "surrogatepass"),
        content_type="application/json",
    )
    assert response.status_code in ALLOWED, (response.status_code, text)
    if response.status_code >= 400:
        assert _snapshot(seeded) == before
    _assert_log_intact(seeded, before)
