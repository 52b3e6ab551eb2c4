"""CtxadminSession item by item: every item type comes back exactly as it came, through the
mapping alone and through a live server; limits, empty pops, foreign events, the budget error,
and add_items' retries that never duplicate."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

import httpx
import pytest
from agents.items import TResponseInputItem
from agents.memory import Session, is_openai_responses_compaction_aware_session
from ctxadmin_client import AsyncClient, Client, UnprocessableError
from ctxadmin_client.agents import CtxadminSession, event_to_item, item_to_event

from tests.client.conftest import Server

CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "lookup",
    "arguments": '{"order":10086,"fields":["total","état"]}',
    "status": "completed",
}
ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Refunds need a reason."}]},
    {"role": "user", "content": "Refund order 10086, please."},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Here is the receipt."},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K", "detail": "low"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look the order up first."}],
        "encrypted_content": "gAAAAABpZ2VuY3J5cHRlZA==",
    },
    CALL,
    {"type": "function_call_output", "call_id": "call_1", "output": '{"total": 180}'},
    # Arguments that are not compact JSON, not JSON, or not an object.
    {"type": "function_call", "call_id": "call_2", "name": "lookup", "arguments": '{"a": 1}'},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "found"}],
        "id": "fco_2",
        "status": "completed",
    },
    {"type": "function_call", "call_id": "call_3", "name": "lookup", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "call_3", "output": ""},
    {"type": "function_call", "call_id": "call_4", "name": "lookup", "arguments": "[1, 2]"},
    {"type": "function_call_output", "call_id": "call_4", "output": "x"},
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Refunded 180.", "annotations": []}],
    },
    # Item types the session has no event kind for: kept whole.
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
    {"type": "item_reference", "id": "msg_1"},
]


async def items_of(session: CtxadminSession, limit: int | None = None) -> list[dict[str, Any]]:
    """get_items as plain dicts (the SDK types an item as a union of some 30 TypedDicts)."""
    return [dict(item) for item in await session.get_items(limit)]


async def popped(session: CtxadminSession) -> dict[str, Any] | None:
    item = await session.pop_item()
    return None if item is None else dict(item)


def as_items(items: list[dict[str, Any]]) -> list[TResponseInputItem]:
    return cast(list[TResponseInputItem], items)


def stored(event: dict[str, Any], seq: int) -> dict[str, Any]:
    """What the server answers for an appended event, JSON and all."""
    answer = json.loads(json.dumps(event))
    answer.update(seq=seq, hash="h", token_count=1, created_at="2026-12-01T00:00:00Z")
    return answer


def test_every_item_type_round_trips_through_its_event() -> None:
    for seq, item in enumerate(ITEMS, 1):
        before = copy.deepcopy(item)
        event = item_to_event(item)
        assert item == before, "the mapping never changes the item it is given"
        assert event_to_item(stored(event, seq)) == item


def test_items_become_the_events_a_person_reads() -> None:
    call = item_to_event(CALL)
    assert call["kind"] == "tool_call" and call["tool_call_id"] == "call_1"
    assert call["arguments"] == {"order": 10086, "fields": ["total", "état"]}
    # The server keeps objects, not their key order: the text is kept as it came...
    assert call["metadata"]["agents_item"]["extra"] == {
        "type": "function_call",
        "id": "fc_1",
        "status": "completed",
        "arguments": CALL["arguments"],
    }
    # ...unless the object alone redoes it (compact, sorted keys).
    simple = item_to_event({**CALL, "arguments": '{"a":1,"b":[2]}'})
    assert "arguments" not in simple["metadata"]["agents_item"]["extra"]
    assert item_to_event(ITEMS[7])["metadata"]["agents_item"]["extra"]["arguments"] == '{"a": 1}'
    assert item_to_event(ITEMS[9])["arguments"] == {"_raw": "not json"}
    assert item_to_event(ITEMS[11])["arguments"] == {"_raw": "[1, 2]"}
    result = item_to_event(ITEMS[6])
    assert (result["kind"], result["status"], result["result"]) == (
        "tool_result",
        "succeeded",
        '{"total": 180}',
    )
    reasoning = item_to_event(ITEMS[4])
    assert (reasoning["kind"], reasoning["role"]) == ("message", "assistant")
    assert reasoning["content"] == ITEMS[4]["summary"]
    assert reasoning["metadata"]["agents_item"]["extra"]["encrypted_content"]
    assert item_to_event(ITEMS[15])["content"] == [ITEMS[15]]


def test_events_of_other_writers_map_to_the_nearest_item() -> None:
    assert event_to_item({"kind": "message", "role": "user", "content": "hi", "seq": 1}) == {
        "role": "user",
        "content": "hi",
    }
    call = {"kind": "tool_call", "tool_call_id": "c", "tool_name": "t", "arguments": {"a": 1}}
    assert event_to_item(call) == {
        "type": "function_call",
        "call_id": "c",
        "name": "t",
        "arguments": '{"a":1}',
    }
    result = {"kind": "tool_result", "tool_call_id": "c", "status": "succeeded", "result": {"a": 1}}
    assert event_to_item(result) == {
        "type": "function_call_output",
        "call_id": "c",
        "output": '{"a":1}',
    }
    note = {
        "kind": "annotation",
        "seq": 4,
        "hash": "h",
        # The server's flag of a secret in the event's text is its bookkeeping, not what the
        # writer said (docs/api.md, "Append — `POST` (agents)").
        "secrets": [{"type": "AWS Access Key", "field": "payload.value"}],
        "type": "fact",
        "authority": "operator",
        "payload": {"key": "k", "value": 1},
    }
    assert event_to_item(note) == {
        "role": "developer",
        "content": "annotation: "
        '{"authority":"operator","payload":{"key":"k","value":1},"type":"fact"}',
    }
    assert event_to_item({"kind": "retraction", "retracts": 3}) is None
    assert event_to_item({"kind": "reset"}) is None


@pytest.mark.asyncio
async def test_items_come_back_exactly_from_a_live_server(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        session = CtxadminSession("agents-roundtrip", client, context_window=16000)
        assert isinstance(session, Session)
        assert is_openai_responses_compaction_aware_session(session)
        assert session.session_settings is not None and session.session_settings.limit is None

        assert await items_of(session) == []
        assert await popped(session) is None  # empty: nothing popped, nothing appended

        await session.add_items(as_items(copy.deepcopy(ITEMS[:6])))
        await session.add_items(as_items(copy.deepcopy(ITEMS[6:])))
        assert await items_of(session) == ITEMS
        assert await items_of(session, 3) == ITEMS[-3:]
        assert await items_of(session, 0) == []
        assert await items_of(session, 100) == ITEMS

        thread = await client.get_thread(session.session_id)
        events = [e async for e in thread.events()]
        assert [e["kind"] for e in events[:7]] == [
            *["message"] * 5,
            "tool_call",
            "tool_result",
        ]
        assert thread.data["context_window"] == 16000
        # A second session on the same id is the same thread, unchanged.
        again = CtxadminSession("agents-roundtrip", client, context_window=9000)
        assert await items_of(again) == ITEMS
        assert (await again.thread()).data["context_window"] == 16000


TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order 10086?"},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"id":10086}'},
    {"type": "function_call_output", "call_id": "c1", "output": "shelf 4"},
    {"role": "assistant", "content": "On shelf 4."},
]


@pytest.mark.asyncio
async def test_pop_and_clear_append_markers_and_the_log_keeps_everything(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        session = CtxadminSession("agents-pop", client)
        await session.add_items(as_items(copy.deepcopy(TURN)))
        assert await popped(session) == TURN[3]
        assert await items_of(session) == TURN[:3]
        # A tool output leaves with its call: the working context never holds half a call.
        assert await popped(session) == TURN[2]
        assert await items_of(session) == TURN[:1]

        await session.clear_session()
        assert await items_of(session) == []
        assert await popped(session) is None
        await session.add_items(as_items([{"role": "user", "content": "Start over."}]))
        assert await items_of(session) == [{"role": "user", "content": "Start over."}]

        thread = await client.get_thread(session.session_id)
        events = [e async for e in thread.events()]
        assert [e["kind"] for e in events] == [
            "message",
            "tool_call",
            "tool_result",
            "message",
            "retraction",
            "retraction",
            "reset",
            "message",
        ]
        assert [e["retracts"] for e in events if e["kind"] == "retraction"] == [4, 3]


@pytest.mark.asyncio
async def test_compaction_folds_and_a_reset_leaves_the_summary_out(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        session = CtxadminSession("agents-fold", client)
        await session.add_items(as_items(copy.deepcopy(TURN)))
        # The Runner's own call folds only when the context calls for it.
        await session.run_compaction({"response_id": "resp_1", "force": False})
        assert await items_of(session) == TURN
        await session.run_compaction()
        items = await items_of(session)
        summary = session.last_context and session.last_context["summary"]
        assert summary and items[0] == {"role": "developer", "content": summary["rendered"]}
        assert "Where is order 10086?" in items[0]["content"]
        assert len(items) < 1 + len(TURN)
        await session.add_items(as_items([{"role": "user", "content": "And 10087?"}]))
        assert (await items_of(session))[-1] == {"role": "user", "content": "And 10087?"}

        await session.clear_session()
        assert await items_of(session) == []

        system = CtxadminSession("agents-fold", client, summary_role="system")
        await system.add_items(as_items([{"role": "user", "content": "Again."}]))
        await system.run_compaction({"response_id": "resp_2", "force": True})
        folded = await items_of(system)
        assert folded[0]["role"] == "system"
        # What the reset took out does not come back with the next summary.
        assert "10086" not in folded[0]["content"]


@pytest.mark.asyncio
async def test_a_blocking_client_works_too(server: Server) -> None:
    with Client(server.url, server.api_key) as client:
        session = CtxadminSession("agents-sync", client)
        await session.add_items(as_items([{"role": "user", "content": "hello"}]))
        assert await items_of(session) == [{"role": "user", "content": "hello"}]


@pytest.mark.asyncio
async def test_a_budget_too_small_is_an_error_not_a_silent_cut(server: Server) -> None:
    async with AsyncClient(server.url, server.api_key) as client:
        session = CtxadminSession(
            "agents-small", client, context_window=300, reserved_output=0, safety_margin=0
        )
        await session.add_items(as_items([{"role": "user", "content": "word " * 2000}]))
        with pytest.raises(UnprocessableError) as raised:
            await items_of(session)
        assert raised.value.code == "budget_too_small"


@pytest.mark.asyncio
async def test_add_items_retries_with_the_same_client_event_ids() -> None:
    thread = {"id": "7d1c2d36-1d1e-4f57-9c61-3a7a5e1b0001", "external_id": "t-1"}
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/threads/":
            return httpx.Response(201, json=thread)
        body = json.loads(request.content)
        bodies.append(body)
        if len(bodies) == 1:
            raise httpx.ReadError("the answer was lost", request=request)
        if len(bodies) == 2:
            return httpx.Response(503, json={"error": {"code": "server_error", "message": "x"}})
        return httpx.Response(201, json=[{"seq": i + 1} for i in range(len(body["events"]))])

    async def no_sleep(seconds: float) -> None:
        return None

    async with AsyncClient(
        "http://ctxadmin.test", "key", transport=httpx.MockTransport(handler), sleep=no_sleep
    ) as client:
        session = CtxadminSession("t-1", client)
        await session.add_items(as_items([ITEMS[2], CALL]))

    assert len(bodies) == 3
    ids = [[e["client_event_id"] for e in body["events"]] for body in bodies]
    assert ids[0] == ids[1] == ids[2] and len(set(ids[0])) == 2
    assert bodies[0] == bodies[2]
