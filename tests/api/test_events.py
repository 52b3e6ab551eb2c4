"""POST/GET /api/v1/threads/{id}/events/: idempotency, all-or-nothing batches, binding, paging."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import factories
from tests.api.conftest import log_state, post_json
from threads.domain import chain
from threads.keys.chain import chain_key
from threads.models import ApprovalRequest, Event, SideEffect, SideEffectStatus

pytestmark = pytest.mark.django_db


def msg(text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "content": text, **extra}


def test_single_event_answers_its_stored_form(agent, thread, events_url):
    body = msg(
        "refund order 10086",
        client_event_id="m-1",
        metadata={"ui": "web"},
        created_at="2026-01-31T12:00:00+02:00",
    )
    response = post_json(agent, events_url, body)
    assert response.status_code == 201, response.content
    answer = response.json()
    assert answer["seq"] == 1
    assert answer["replayed"] is False
    assert answer["created_at"] == "2026-01-31T10:00:00.000000Z"
    assert answer["metadata"] == {"ui": "web"}
    assert answer["content"] == "refund order 10086"
    assert answer["token_count"] > 0
    stored = Event.objects.get(thread=thread, seq=1)
    assert answer["hash"] == stored.hash
    # Chain v2: the hash is the chain link over the answered event's seq, kind, time, id and
    # the salted digest of exactly the answered content (its data and metadata).
    thread.refresh_from_db()
    genesis = chain.genesis_hash(str(thread.id), chain_key())
    answered = {k: v for k, v in answer.items() if k != "replayed"}
    assert stored.content_salt is not None
    digest = chain.event_digest({**answered, "content_salt": stored.content_salt})
    assert digest == stored.content_digest
    expected = chain.link_hash(
        genesis, chain.event_v2_canonical({**answered, "content_digest": digest}), chain_key()
    )
    assert answer["hash"] == expected == thread.chain_head


def test_same_client_event_id_and_body_is_a_replay(agent, thread, events_url):
    body = msg("hello", client_event_id="m-1")
    first = post_json(agent, events_url, body)
    before = log_state(thread)
    again = post_json(agent, events_url, body)
    assert again.status_code == 200
    assert again.json() == {**first.json(), "replayed": True}
    assert log_state(thread) == before


def test_same_client_event_id_other_body_is_409(agent, thread, events_url):
    post_json(agent, events_url, msg("hello", client_event_id="m-1"))
    before = log_state(thread)
    response = post_json(agent, events_url, msg("goodbye", client_event_id="m-1"))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"
    assert log_state(thread) == before


def test_batch_answers_a_list_in_order(agent, thread, events_url):
    batch = {"events": [msg("a"), factories.call("c1", "search"), factories.result("c1")]}
    response = post_json(agent, events_url, batch)
    assert response.status_code == 201
    answer = response.json()
    assert [e["seq"] for e in answer] == [1, 2, 3]
    assert answer[2]["call_seq"] == 2
    assert [e["replayed"] for e in answer] == [False, False, False]
    assert log_state(thread)[:2] == (3, 3)


def test_batch_replays(agent, thread, events_url):
    batch = {"events": [msg("a", client_event_id="1"), msg("b", client_event_id="2")]}
    first = post_json(agent, events_url, batch).json()
    before = log_state(thread)

    whole = post_json(agent, events_url, batch)
    assert whole.status_code == 200
    assert [e["seq"] for e in whole.json()] == [e["seq"] for e in first]
    assert all(e["replayed"] for e in whole.json())
    assert log_state(thread) == before

    mixed = post_json(
        agent,
        events_url,
        {
            "events": [
                msg("b", client_event_id="2"),
                msg("c", client_event_id="3"),
            ]
        },
    )
    assert mixed.status_code == 201
    assert [(e["seq"], e["replayed"]) for e in mixed.json()] == [(2, True), (3, False)]


def test_replay_inside_the_same_batch(agent, thread, events_url):
    same = msg("once", client_event_id="dup")
    response = post_json(agent, events_url, {"events": [same, msg("other"), same]})
    assert response.status_code == 201
    answer = response.json()
    assert [(e["seq"], e["replayed"]) for e in answer] == [(1, False), (2, False), (1, True)]
    assert answer[2]["hash"] == answer[0]["hash"]
    assert log_state(thread)[:2] == (2, 2)


def test_conflict_inside_the_same_batch_writes_nothing(agent, thread, events_url):
    post_json(agent, events_url, msg("before"))
    before = log_state(thread)
    response = post_json(
        agent,
        events_url,
        {
            "events": [
                msg("one", client_event_id="dup"),
                msg("two", client_event_id="dup"),
            ]
        },
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert "earlier in this batch" in error["message"] and "seq" not in error["message"]
    assert list(error["fields"]) == ["events[1]"]
    assert log_state(thread) == before


@pytest.mark.parametrize(
    ("event", "status", "code"),
    [
        (
            {"kind": "tool_result", "tool_call_id": "zz", "status": "succeeded"},
            422,
            "no_open_tool_call",
        ),
        ({"kind": "retraction", "retracts": 999}, 422, "invalid_retraction"),
        (msg("x", refers_to=[99]), 400, "validation_error"),
    ],
)
def test_a_refused_event_of_a_batch_of_one_is_named_by_its_index(
    agent, thread, events_url, event, status, code
):
    post_json(agent, events_url, msg("before"))
    before = log_state(thread)
    response = post_json(agent, events_url, {"events": [event]})
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert list(error["fields"]) == ["events[0]"] or error["message"].startswith("events[0]")
    assert log_state(thread) == before
    single = post_json(agent, events_url, event).json()["error"]  # not a batch: "event"
    assert "events[0]" not in json.dumps(single)


@pytest.mark.parametrize(
    "bad, status, code",
    [
        ({"kind": "message", "role": "robot", "content": "x"}, 400, "validation_error"),
        (factories.result("never-called"), 422, "no_open_tool_call"),
        (
            {
                "kind": "tool_call",
                "tool_call_id": "c",
                "tool_name": "pay",
                "arguments": {},
                "side_effect": True,
            },
            400,
            "validation_error",
        ),
    ],
)
def test_a_bad_700th_event_writes_nothing(agent, thread, events_url, bad, status, code):
    post_json(agent, events_url, msg("before"))
    before = log_state(thread)
    events = [msg(f"m{i}", client_event_id=f"id-{i}") for i in range(1000)]
    events[699] = bad
    response = post_json(agent, events_url, {"events": events})
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert "events[699]" in error["fields"]
    assert log_state(thread) == before
    assert not Event.objects.filter(thread=thread, client_event_id="id-0").exists()


def test_tool_result_binds_to_the_latest_open_call(agent, thread, events_url):
    # A closed call's id may be reused; the result binds to the newer, open call.
    post_json(
        agent,
        events_url,
        {
            "events": [
                factories.call("c1", "search"),
                factories.result("c1"),
                factories.call("c1", "search"),
            ]
        },
    )
    answer = post_json(agent, events_url, factories.result("c1")).json()
    assert answer["call_seq"] == 3
    # Two open calls with one id: the latest first, then the older one; then none is open,
    # and a further result is a second result of the latest answered call: stored, flagged.
    post_json(
        agent,
        events_url,
        {
            "events": [
                factories.call("c2", "a"),
                factories.call("c2", "b"),
            ]
        },
    )
    assert post_json(agent, events_url, factories.result("c2")).json()["call_seq"] == 6
    assert post_json(agent, events_url, factories.result("c2")).json()["call_seq"] == 5
    second = post_json(agent, events_url, factories.result("c2"))
    assert second.status_code == 201
    assert (second.json()["call_seq"], second.json()["duplicate_of"]) == (6, 7)
    # A result for an id no call ever had is still refused.
    before = log_state(thread)
    refused = post_json(agent, events_url, factories.result("c3"))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "no_open_tool_call"
    assert log_state(thread) == before


def test_side_effects_and_approvals_are_recorded(agent, thread, events_url):
    post_json(
        agent,
        events_url,
        {
            "events": [
                factories.call("c1", "refund", {"order": 1}, side_effect_key="refund-1"),
                factories.call("c2", "refund", {"order": 2}, side_effect_key="refund-2"),
                factories.result("c1", "timeout"),
                {
                    "kind": "approval_request",
                    "action": "refund again",
                    "arguments": {"order": 1},
                    "expires_at": "2026-02-01T00:00:00Z",
                },
            ]
        },
    )
    effects = {e.idempotency_key: e for e in SideEffect.objects.filter(thread=thread)}
    assert effects["refund-1"].status == SideEffectStatus.UNKNOWN
    assert effects["refund-1"].result_seq == 3
    assert effects["refund-1"].call_event.seq == 1
    assert effects["refund-2"].status == SideEffectStatus.RUNNING
    approval = ApprovalRequest.objects.get(thread=thread)
    assert approval.request_event.seq == 4
    assert approval.expires_at is not None
    post_json(agent, events_url, factories.result("c2", "succeeded", request_id="r-9"))
    effects["refund-2"].refresh_from_db()
    assert effects["refund-2"].status == SideEffectStatus.SUCCEEDED
    assert effects["refund-2"].request_id == "r-9"


def _mixed_batch(size: int, prefix: str) -> list[dict[str, Any]]:
    """Every kind of row the append path writes: events with client ids, side-effect calls,
    their results, approvals."""
    events: list[dict[str, Any]] = []
    for i in range(size // 4):
        events += [
            msg(f"{prefix}{i}", client_event_id=f"{prefix}-m{i}"),
            factories.call(f"{prefix}c{i}", "refund", {"i": i}, side_effect_key=f"{prefix}k{i}"),
            factories.result(f"{prefix}c{i}", "succeeded"),
            {"kind": "approval_request", "action": "retry", "arguments": {"i": i}},
        ]
    return events


def test_batch_ingest_does_a_constant_number_of_queries(agent, thread, events_url):
    post_json(agent, events_url, msg("warm-up"))  # the key's first use records last_used_at
    counts = {}
    for size, prefix in ((4, "small"), (1000, "large")):
        body = {"events": _mixed_batch(size, prefix)}
        with CaptureQueriesContext(connection) as queries:
            response = post_json(agent, events_url, body)
        assert response.status_code == 201
        counts[size] = len(queries)
    assert counts[1000] == counts[4]
    succeeded = SideEffect.objects.filter(thread=thread, status=SideEffectStatus.SUCCEEDED)
    assert succeeded.count() == 1 + 250


def test_batch_of_1000_stays_under_a_fixed_query_budget(
    agent, thread, events_url, django_assert_max_num_queries
):
    # auth (2: the key, its first last_used_at), the thread, begin, the lock, replays, open
    # calls, then per table one statement (+ its ids on SQLite), the side-effect updates, the
    # thread's head, commit.
    with django_assert_max_num_queries(17):
        response = post_json(agent, events_url, {"events": _mixed_batch(1000, "x")})
    assert response.status_code == 201
    assert log_state(thread)[:2] == (1000, 1000)


def test_paging_in_seq_order(agent, thread, events_url):
    post_json(agent, events_url, {"events": [msg(f"m{i}") for i in range(250)]})
    seen: list[int] = []
    after: int | None = 0
    pages = 0
    while after is not None:
        page = agent.get(events_url, {"after": after}).json()
        assert len(page["events"]) <= 100
        seen += [e["seq"] for e in page["events"]]
        after = page["next_after"]
        pages += 1
    assert seen == list(range(1, 251))
    assert pages == 3
    small = agent.get(events_url, {"after": 10, "limit": 5}).json()
    assert [e["seq"] for e in small["events"]] == [11, 12, 13, 14, 15]
    assert small["next_after"] == 15
    assert small["last_seq"] == 250
    last = agent.get(events_url, {"after": 245, "limit": 5}).json()
    assert [e["seq"] for e in last["events"]] == [246, 247, 248, 249, 250]
    assert last["next_after"] is None


@pytest.mark.parametrize(
    "query",
    [
        {"limit": 1001},
        {"limit": 0},
        {"after": -1},
        {"after": "x"},
        {"after": 2**64},
    ],
)
def test_paging_rejects_bad_parameters(agent, events_url, query):
    response = agent.get(events_url, query)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"


def test_paged_events_are_the_posted_answers(agent, events_url):
    posted = post_json(
        agent,
        events_url,
        {
            "events": [
                msg("a", client_event_id="a"),
                factories.call("c", "t", {"x": [1, 2]}),
                factories.result(
                    "c", "failed", {"why": "no"}, verified_facts=[{"key": "k", "value": 1}]
                ),
                factories.annotation("fact", "user", {"key": "k", "value": 2}),
            ]
        },
    ).json()
    listed = agent.get(events_url).json()["events"]
    assert listed == [{k: v for k, v in e.items() if k != "replayed"} for e in posted]


def test_people_read_events_but_never_post_them(operator_client, thread, events_url):
    factories.append(thread, msg("from the agent"))
    assert operator_client.get(events_url).json()["events"][0]["content"] == "from the agent"
    before = log_state(thread)
    token = "a" * 32  # an unmasked CSRF secret, the same in cookie and header
    operator_client.cookies["csrftoken"] = token
    response = operator_client.post(
        events_url,
        data='{"kind": "message", "role": "user", "content": "x"}',
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert "agents" in response.json()["error"]["message"]
    assert log_state(thread) == before
