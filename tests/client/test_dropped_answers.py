"""Answers lost after the server committed: nothing is duplicated, nothing is lost.

The client talks to the live server through `DroppingProxy`, which loses a seeded 5% of the
answers after the server has written the events. The client retries; because every event
carries a `client_event_id` (filled in by the client and reused by its retries), each retry is
answered with the original events (200, `replayed`) rather than appending them again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from ctxadmin_client import AsyncClient, Client

from tests.client.conftest import Server, no_sleep
from tests.client.proxy import DroppingProxy
from threads.models import Event

SEED = 20261201
DROP_RATE = 0.05


@pytest.fixture
def proxy(server: Server) -> Iterator[DroppingProxy]:
    upstream = urlsplit(server.url)
    assert upstream.hostname and upstream.port
    proxy = DroppingProxy(upstream.hostname, upstream.port, drop_rate=DROP_RATE, seed=SEED)
    yield proxy
    proxy.close()


def agent_turns(n: int, tag: str) -> list[dict[str, Any]]:
    """n events: user messages, and tool calls each followed by its result (a result retried
    after a dropped answer must replay, not fail for want of an open call)."""
    events: list[dict[str, Any]] = []
    while len(events) < n:
        i = len(events)
        if i % 4 == 1 and len(events) + 2 <= n:
            call_id = f"{tag}-c{i}"
            events.append(
                {
                    "kind": "tool_call",
                    "tool_call_id": call_id,
                    "tool_name": "lookup",
                    "arguments": {"i": i},
                }
            )
            events.append(
                {"kind": "tool_result", "tool_call_id": call_id, "status": "succeeded", "result": i}
            )
        else:
            events.append({"kind": "message", "role": "user", "content": f"{tag} message {i}"})
    return events


def assert_exactly_once(server: Server, external_id: str, sent: list[dict[str, Any]]) -> None:
    rows = list(
        Event.objects.filter(thread__workspace=server.workspace, thread__external_id=external_id)
        .order_by("seq")
        .values_list("seq", "client_event_id")
    )
    ids = [cid for _, cid in rows]
    assert [seq for seq, _ in rows] == list(range(1, len(sent) + 1)), "seq is exactly 1..n"
    duplicated = [cid for cid, count in Counter(ids).items() if count > 1]
    lost = {e["client_event_id"] for e in sent} - set(ids)
    assert (duplicated, lost) == ([], set())
    assert ids == [e["client_event_id"] for e in sent], "stored in the order appended"


def test_sync_client_through_dropped_answers(
    server: Server, proxy: DroppingProxy, no_fold_triggers: None
) -> None:
    singles = agent_turns(200, "single")
    batches = agent_turns(200, "batch")
    with Client(proxy.url, server.api_key, retries=6, sleep=no_sleep) as client:
        thread = client.thread("lossy-network")
        answers = [a for event in singles for a in thread.append(event)]
        for start in range(0, len(batches), 20):
            answers += thread.append(*batches[start : start + 20])
        read_back = list(thread.events(page_size=100))

    sent = singles + batches
    assert [a["seq"] for a in answers] == list(range(1, 401))
    assert [e["client_event_id"] for e in read_back] == [e["client_event_id"] for e in sent]
    assert_exactly_once(server, "lossy-network", sent)
    # The drops happened, after the server had committed: their retries were replays.
    print(f"dropped answers: {proxy.dropped} of {proxy.dropped + proxy.forwarded}")
    assert proxy.dropped >= 5
    assert sum(1 for a in answers if a["replayed"]) >= 1
    assert any(path.endswith("/events/") for path in proxy.dropped_paths)


@pytest.mark.asyncio
async def test_async_client_through_dropped_answers(
    server: Server, proxy: DroppingProxy, no_fold_triggers: None
) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    singles = agent_turns(100, "single")
    batches = agent_turns(100, "batch")
    async with AsyncClient(proxy.url, server.api_key, retries=6, sleep=no_wait) as client:
        thread = await client.thread("lossy-network-async")
        for event in singles:
            await thread.append(event)
        for start in range(0, len(batches), 10):
            await thread.append(*batches[start : start + 10])
        read_back = [e async for e in thread.events(page_size=50)]

    sent = singles + batches
    assert [e["client_event_id"] for e in read_back] == [e["client_event_id"] for e in sent]
    assert [e["seq"] for e in read_back] == list(range(1, 201))
    print(f"dropped answers (async): {proxy.dropped} of {proxy.dropped + proxy.forwarded}")
    assert proxy.dropped >= 1
