"""Numbers that PostgreSQL's jsonb gives back in another form (1e16 as an integer, -0.0 as
0.0) are stored in that form from the start, so that an event's chain verifies on the database
that holds it (threads.domain.canonical.stable_numbers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from threads.domain import chain
from threads.domain.canonical import stable_numbers
from threads.keys.chain import chain_key
from threads.selectors.events import event_dicts

# Each beside what it is stored as: the same JSON number.
NUMBERS = [
    (-0.0, 0.0),
    (1e16, 10**16),
    (1e22, 10**22),
    (1.5e300, int(1.5e300)),
    (-1e308, int(-1e308)),
    (1e-7, 1e-7),
    (5e-324, 5e-324),
    (0.1, 0.1),
    (2.0, 2.0),
    (2**64, 2**64),
]


@pytest.mark.parametrize(("sent", "stored"), NUMBERS, ids=[repr(n) for n, _ in NUMBERS])
def test_stable_numbers(sent: Any, stored: Any) -> None:
    got = stable_numbers({"a": [sent, {"b": sent}], "s": "text"})
    assert json.dumps(got) == json.dumps({"a": [stored, {"b": stored}], "s": "text"})


def test_nothing_to_change_is_not_copied() -> None:
    value = {"a": [1, 0.5, "x", {"b": None}]}
    assert stable_numbers(value) is value


@pytest.mark.django_db
@pytest.mark.parametrize(("sent", "stored"), NUMBERS, ids=[repr(n) for n, _ in NUMBERS])
def test_the_chain_verifies_with_any_number(
    agent: Any, thread: Any, sent: Any, stored: Any
) -> None:
    body = {
        "kind": "tool_call",
        "tool_call_id": "c1",
        "tool_name": "measure",
        "arguments": {"value": sent, "values": [sent]},
        "metadata": {"score": sent},
    }
    answer = agent.post(
        f"/api/v1/threads/{thread.id}/events/",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    verdict = chain.verify_chain(
        event_dicts(thread, chain_fields=True),
        start_hash=chain.genesis_hash(str(thread.id), chain_key()),
        key=chain_key(),
    )
    assert verdict.ok, verdict
    # What was answered at the append and what is read back are the stored form.
    read = agent.get(f"/api/v1/threads/{thread.id}/events/").json()["events"][-1]
    for event in (answer.json(), read):
        assert json.dumps(event["arguments"]) == json.dumps({"value": stored, "values": [stored]})
        assert json.dumps(event["metadata"]) == json.dumps({"score": stored})
