"""The hash chain on the pure domain: deterministic, and every kind of tampering (modify, delete,
swap, insert a row) is named by verify_chain at the first bad seq; with a chain key, a chain
recomputed with plain SHA-256 is refused."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from threads.domain import chain
from threads.domain.events import stored_form

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = b"chain-key-for-tests"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
bodies = st.fixed_dictionaries(
    {
        "content": st.text(max_size=40),
        "metadata": st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        "client_event_id": st.none() | st.text(min_size=1, max_size=10),
        "role": st.sampled_from(["user", "assistant", "system"]),
    }
)


def build(
    bodies: list[dict[str, Any]], thread_uid: str = "t", key: bytes | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Stored-form events with their chain hashes, and the genesis hash."""
    genesis = head = chain.genesis_hash(thread_uid, key)
    events = []
    for seq, body in enumerate(bodies, start=1):
        event = stored_form(
            seq=seq,
            kind="message",
            created_at=T0 + timedelta(seconds=seq),
            client_event_id=body["client_event_id"],
            metadata=body["metadata"],
            data={"role": body["role"], "content": body["content"]},
        )
        head = chain.link_hash(head, chain.event_canonical(event), key)
        events.append({**event, "hash": head, "token_count": 1})
    return events, genesis


def rechain(events: list[dict[str, Any]], genesis: str, key: bytes | None) -> None:
    """What a writer of the database does to make its edit consistent: recompute every hash."""
    head = genesis
    for event in events:
        head = chain.link_hash(head, chain.event_canonical(event), key)
        event["hash"] = head


logs = st.lists(bodies, min_size=1, max_size=12)


@given(logs)
def test_the_chain_is_deterministic_and_verifies(items):
    first, genesis = build(items)
    again, _ = build(items)
    assert [e["hash"] for e in first] == [e["hash"] for e in again]
    # Key order in the stored dict does not matter: the canonical form sorts keys.
    shuffled = []
    for event in first:
        keys = list(event)
        random.Random(event["seq"]).shuffle(keys)
        shuffled.append({k: event[k] for k in keys})
    assert [chain.event_canonical(e) for e in shuffled] == [chain.event_canonical(e) for e in first]
    verdict = chain.verify_chain(shuffled, start_hash=genesis)
    assert verdict.ok and verdict.first_bad_seq is None
    assert verdict.verified_until == len(first)
    assert verdict.head == first[-1]["hash"]


@given(logs, st.data())
def test_a_modified_row_is_named(items, data):
    events, genesis = build(items)
    index = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    field = data.draw(st.sampled_from(["content", "metadata", "role", "created_at", "kind"]))
    # Wrapping the old value guarantees a different one.
    events[index] = {**events[index], field: ["tampered", events[index][field]]}
    verdict = chain.verify_chain(events, start_hash=genesis)
    assert not verdict.ok
    assert verdict.first_bad_seq == index + 1
    assert verdict.verified_until == index


@given(st.lists(bodies, min_size=2, max_size=12), st.data())
def test_a_deleted_row_is_named(items, data):
    events, genesis = build(items)
    head = events[-1]["hash"]
    index = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    del events[index]
    verdict = chain.verify_chain(events, start_hash=genesis)
    if index < len(events):
        assert not verdict.ok
        assert verdict.first_bad_seq == index + 1
    else:
        # Cutting the tail leaves a valid prefix; it shows against the thread's stored head.
        assert verdict.ok and verdict.head != head


@given(st.lists(bodies, min_size=2, max_size=12), st.data(), st.booleans())
def test_swapped_rows_are_named(items, data, keep_seq_order):
    events, genesis = build(items)
    i = data.draw(st.integers(min_value=0, max_value=len(events) - 2))
    j = data.draw(st.integers(min_value=i + 1, max_value=len(events) - 1))
    events[i], events[j] = events[j], events[i]
    if keep_seq_order:
        # The contents moved but the seq numbers were put back in order.
        events[i]["seq"], events[j]["seq"] = events[j]["seq"], events[i]["seq"]
    verdict = chain.verify_chain(events, start_hash=genesis)
    assert not verdict.ok
    assert verdict.first_bad_seq == i + 1


@given(logs, bodies, st.data(), st.booleans())
def test_an_inserted_row_is_named(items, extra, data, forge_its_hash):
    events, genesis = build(items)
    index = data.draw(st.integers(min_value=0, max_value=len(events)))
    forged = stored_form(
        seq=index + 1,
        kind="message",
        created_at=T0,
        client_event_id=None,
        metadata=extra["metadata"],
        data={"role": "user", "content": "inserted"},
    )
    previous = events[index - 1]["hash"] if index else genesis
    if forge_its_hash:
        # Computed the way the chain would have: this row passes, the next one cannot.
        forged["hash"] = chain.link_hash(previous, chain.event_canonical(forged))
    else:
        forged["hash"] = "0" * 64
    for later in events[index:]:
        later["seq"] += 1
    events.insert(index, forged)
    verdict = chain.verify_chain(events, start_hash=genesis)
    if forge_its_hash and index == len(events) - 1:
        # Appending at the tail without the key is not tampering in a plain chain.
        assert verdict.ok
        return
    assert not verdict.ok
    assert verdict.first_bad_seq == (index + 2 if forge_its_hash else index + 1)


@settings(max_examples=50)
@given(logs, st.data())
def test_a_keyed_chain_refuses_a_recomputed_plain_chain(items, data):
    events, genesis = build(items, key=KEY)
    assert chain.verify_chain(events, start_hash=genesis, key=KEY).ok
    # A writer without the key edits a row and recomputes every hash with plain SHA-256.
    index = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    events[index] = {**events[index], "content": "rewritten"}
    rechain(events, chain.genesis_hash("t"), None)
    assert chain.verify_chain(events, start_hash=chain.genesis_hash("t")).ok  # consistent...
    verdict = chain.verify_chain(events, start_hash=genesis, key=KEY)  # ...but not keyed
    assert not verdict.ok
    assert verdict.first_bad_seq == 1
    # Even recomputed from the real (keyed) genesis, plain links fail at the first row.
    rechain(events, genesis, None)
    assert chain.verify_chain(events, start_hash=genesis, key=KEY).first_bad_seq == 1
